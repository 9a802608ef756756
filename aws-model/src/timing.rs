//! AWS's timings that the model of AWS (`aws-world`) and the emulator's stand-ins (`local-aws`,
//! driven by the lab) both play, so the two worlds wait alike.

use std::time::Duration;

/// How long after a minute ends CloudWatch has SQS's datapoints of it (NumberOfMessagesReceived,
/// …Deleted): SQS documents one-minute datapoints and no delay ("Available CloudWatch metrics for
/// Amazon SQS"); they come minutes late. 150 s, which adopt's 15-minute patience covers. The
/// model plays it; the lab's demo scene sets the emulator's stand-in (`moto_fixes/sqs.py`) to it.
pub const SQS_METRIC_LAG: Duration = Duration::from_secs(150);

/// How long after EnableRule or DisableRule EventBridge still delivers by the rule's old state:
/// its API reference says a change "might not take effect immediately; allow a short period of
/// time", with no figure. 5 s: enough that a move counting on the change at once misses events,
/// and well within adopt's 60-s settle.
pub const RULE_CHANGE_DELAY: Duration = Duration::from_secs(5);
