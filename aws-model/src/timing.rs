//! AWS's timings that the model of AWS (`aws-world`) and the emulator's stand-ins (`local-aws`,
//! driven by the lab) both play, so the two worlds wait alike.

use std::time::Duration;

/// How long after EnableRule or DisableRule EventBridge still delivers by the rule's old state:
/// its API reference says a change "might not take effect immediately; allow a short period of
/// time", with no figure. 5 s: enough that a move counting on the change at once misses events,
/// and well within adopt's 60-s settle.
pub const RULE_CHANGE_DELAY: Duration = Duration::from_secs(5);
