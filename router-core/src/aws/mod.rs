//! The seam: every effect the router has on the world, and every reading it takes of it.
//!
//! The router decides; an [`Aws`] acts. Each call method is one AWS API call, made once (no SDK
//! retries: every retry is the router's, and all of them are written down in [`crate::retry`]),
//! as the principal and in the account and region its [`Session`] names, and it answers with what
//! AWS answers, error codes included ([`CallError`]). So the code that reads the answers, which is
//! all of the router's policy, runs unchanged against a fake that answers as AWS does: the
//! decision tests (`tests/decisions`, on aws-world's model) and the organisation simulation do exactly that.
//!
//! ```text
//!               handler (route: admit ▸ deliver ▸ settle ▸ keep ▸ hand back)
//!                  │              │               │
//!              accounts        resolve         forward          redeliver
//!              (sessions)   (owners, hedge)  (destinations,    (visibility)
//!                  │              │            sends, DLQ)          │
//!   ───────────────┴──────────────┴───────────────┴─────────────────┴──── Aws (this trait)
//!     AssumeRole   DescribeInstances  GetQueueUrl  ListQueueTags        ChangeMessage-
//!     GetRole      GetResources       GetQueueAttributes  GetParameter  VisibilityBatch
//!     (direct)                        SendMessageBatch                  now(), jitter()
//!   ──────────────────────────────────────────────────────────────────────────────────────
//!   interruption_router::aws::sdk::SdkAws (the Lambda) · aws_world's WorldAws (the decision tests;
//!   under the simulation's quota, latency and fault layers, an organisation's storm)
//! ```
//!
//! Two readings of the world that are not calls go through it for the same reason: the wall
//! clock ([`Aws::now`]: event ages, first-receive times, credential expiry) and the jitter of
//! retry delays ([`Aws::jitter`]: a seeded model reproduces a run). Monotonic time (budgets,
//! cache lifetimes, backoff sleeps) is tokio's, which a test or the simulation pauses and
//! advances.

use std::{fmt, future::Future, sync::Arc, time::SystemTime};

use crate::{event::InstanceId, scope::Scope};

/// Who makes a call, and where: the scope's account and region, as the function's own role or
/// as the credentials of a spoke role it assumed.
#[derive(Debug, Clone)]
pub struct Session {
    pub scope: Scope,
    pub identity: Identity,
}

#[derive(Debug, Clone)]
pub enum Identity {
    /// The function's execution role.
    Home,
    /// A spoke role's credentials (from [`Aws::assume_role`]).
    Assumed {
        role_arn: Arc<str>,
        credentials: Credentials,
    },
}

/// Temporary credentials from AssumeRole: what the SDK adapter signs with, held by the router
/// between calls. The router's own type, so the seam names no SDK crate; the secret is kept out of
/// `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    /// When AWS said they expire (`None`: never, as for long-term keys).
    pub expiry: Option<SystemTime>,
}

impl Credentials {
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
        expiry: Option<SystemTime>,
    ) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token,
            expiry,
        }
    }

    pub fn expiry(&self) -> Option<SystemTime> {
        self.expiry
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"** redacted **")
            .field("expiry", &self.expiry)
            .finish()
    }
}

/// Codes AWS answers for what does not exist, by API: spelled here alone, for the router, routerctl
/// and the model of AWS.
pub mod missing {
    /// DescribeStacks of a stack that does not exist (CloudFormation says so in the message).
    pub const STACK: &str = "ValidationError";
    /// A missing queue, as SQS's JSON protocol spells it (the one code a [`super::CallError`]
    /// carries for it).
    pub const QUEUE: &str = "QueueDoesNotExist";
    /// A missing queue, as SQS's query protocol spells it for every operation.
    pub const QUEUE_QUERY_PROTOCOL: &str = "AWS.SimpleQueueService.NonExistentQueue";
    /// SSM GetParameter.
    pub const PARAMETER: &str = "ParameterNotFound";
    /// EventBridge DescribeRule, Lambda, and CloudWatch GetDashboard (moto's spelling of the
    /// latter; AWS's `ResourceNotFound`/`DashboardNotFoundError` are normalised to it).
    pub const RESOURCE: &str = "ResourceNotFoundException";
    /// IAM: a role (GetRole) or a policy (GetPolicy) that does not exist.
    pub const ROLE: &str = "NoSuchEntity";
}

/// A call that did not answer as asked: AWS's error code and message, or, when AWS gave no answer,
/// one of the transport codes below.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct CallError {
    pub code: String,
    pub message: String,
}

impl CallError {
    /// No answer within the attempt timeout.
    pub const TIMEOUT: &'static str = "Timeout";
    /// The request never reached AWS, or the connection broke (DNS, connect, reset).
    pub const DISPATCH: &'static str = "Dispatch";
    /// An answer that could not be read.
    pub const RESPONSE: &'static str = "ResponseError";

    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }

    /// SQS's answer for a queue that does not exist: `QueueDoesNotExist` in its JSON protocol,
    /// `AWS.SimpleQueueService.NonExistentQueue` in the query protocol.
    pub fn is_missing_queue(&self) -> bool {
        matches!(
            self.code.as_str(),
            missing::QUEUE | missing::QUEUE_QUERY_PROTOCOL
        )
    }

    /// CloudFormation's answer for a stack that does not exist, by name or id (DescribeStacks)
    /// or by a resource's physical id (DescribeStackResources): a `ValidationError` that says
    /// so, where other validation errors (and throttling, `Rate exceeded`) share the code.
    pub fn is_missing_stack(&self) -> bool {
        self.code == missing::STACK && self.message.contains("does not exist")
    }

    /// SSM's answer for a parameter that does not exist.
    pub fn is_missing_parameter(&self) -> bool {
        self.code == missing::PARAMETER
    }

    /// Whether AWS refused the caller: a configuration error no retry fixes once IAM, the
    /// resource's policy and the KMS key have propagated. `KmsThrottled` is a brownout and is
    /// not one of them.
    pub fn is_denial(&self) -> bool {
        is_denial(&self.code)
    }
}

/// See [`CallError::is_denial`]: the codes SQS, SSM and STS answer a caller that may not act.
pub fn is_denial(code: &str) -> bool {
    matches!(
        code,
        "AccessDenied"
            | "AccessDeniedException"
            | "UnauthorizedOperation"
            | "InvalidSecurity"
            | "KmsAccessDenied"
            | "KMS.AccessDeniedException"
            | "KmsDisabled"
            | "KMS.DisabledException"
            | "KmsInvalidKeyUsage"
            | "KMS.InvalidKeyUsageException"
            | "KmsInvalidState"
            | "KMS.KMSInvalidStateException"
            | "KmsNotFound"
            | "KMS.NotFoundException"
            | "KmsOptInRequired"
            | "KMS.OptInRequired"
    )
}

/// An instance and its tags, as a lookup path returned them, with what DescribeInstances says of
/// it besides (the Tagging API returns tags only: `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged {
    pub id: InstanceId,
    pub tags: Vec<(String, String)>,
    pub described: Option<Described>,
}

/// What every DescribeInstances answer says of an instance besides its tags, and the interruption
/// record carries ([`crate::insight`]): its type, its Availability Zone (`Placement`) and how it
/// was bought. Read from the answer the lookup already has: no call of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// `InstanceType` (`m6i.large`).
    pub instance_type: String,
    /// `Placement.AvailabilityZone` (`us-east-1a`).
    pub zone: String,
    pub capacity: Capacity,
}

/// How an instance was bought, in the words of Karpenter's `karpenter.sh/capacity-type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capacity {
    Spot,
    OnDemand,
    /// In a capacity reservation (an On-Demand Capacity Reservation or a Capacity Block).
    Reserved,
}

impl Capacity {
    /// From DescribeInstances' `InstanceLifecycle` (`spot`, `scheduled`, `capacity-block`, or
    /// none for On-Demand) and `CapacityReservationId` (set while the instance runs in a
    /// reservation).
    pub fn of(lifecycle: Option<&str>, reservation: Option<&str>) -> Self {
        match (lifecycle, reservation.filter(|r| !r.is_empty())) {
            (Some("spot"), _) => Capacity::Spot,
            (Some("capacity-block"), _) | (_, Some(_)) => Capacity::Reserved,
            _ => Capacity::OnDemand,
        }
    }

    /// Karpenter's value of `karpenter.sh/capacity-type` for it.
    pub fn label(self) -> &'static str {
        match self {
            Capacity::Spot => "spot",
            Capacity::OnDemand => "on-demand",
            Capacity::Reserved => "reserved",
        }
    }

    /// DescribeInstances' `InstanceLifecycle` for it (`None`: On-Demand, or a reservation's).
    pub fn lifecycle(self) -> Option<&'static str> {
        match self {
            Capacity::Spot => Some("spot"),
            Capacity::OnDemand | Capacity::Reserved => None,
        }
    }
}

/// One page of DescribeInstances, by one filter.
#[derive(Debug, Clone, Copy)]
pub struct DescribeInstances<'a> {
    pub filter: InstanceFilter<'a>,
    pub next_token: Option<&'a str>,
}

/// Which instances a DescribeInstances asks for.
#[derive(Debug, Clone, Copy)]
pub enum InstanceFilter<'a> {
    /// The `instance-id` filter (at most 200 ids): one unknown id in `InstanceIds` fails the
    /// whole call with `InvalidInstanceID.NotFound`, while under the filter unknown ids are
    /// simply absent.
    Ids(&'a [InstanceId]),
    /// Every instance carrying the tag key (the `tag-key` filter), [`SWEEP_PAGE`] a page.
    TagKey(&'a str),
}

/// Instances per page of a [`InstanceFilter::TagKey`] sweep (DescribeInstances' largest page).
pub const SWEEP_PAGE: i32 = 1000;

/// The page of `all` a sweep's `next_token` asks for, and the token of the next one, as a model of
/// AWS pages them ([`SWEEP_PAGE`] a page; the token an offset, which AWS's is not, but which no
/// caller reads): one paging for every model of the seam.
pub fn sweep_page<T: Clone>(all: &[T], next_token: Option<&str>) -> (Vec<T>, Option<String>) {
    let from = next_token
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
        .min(all.len());
    let to = (from + SWEEP_PAGE as usize).min(all.len());
    (
        all[from..to].to_vec(),
        (to < all.len()).then(|| to.to_string()),
    )
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstancePage {
    pub instances: Vec<Tagged>,
    pub next_token: Option<String>,
}

/// One SendMessageBatch entry; `id` is unique within the call.
#[derive(Debug, Clone, Copy)]
pub struct SendEntry<'a> {
    pub id: &'a str,
    pub body: &'a str,
    /// String message attributes.
    pub attributes: &'a [(&'static str, String)],
}

/// One ChangeMessageVisibilityBatch entry.
#[derive(Debug, Clone, Copy)]
pub struct VisibilityEntry<'a> {
    pub id: &'a str,
    pub receipt_handle: &'a str,
    pub timeout_secs: u32,
}

/// A batch call's answer for one entry: SQS lists each entry as successful or failed (and may,
/// against its contract, list it neither way: the caller then counts it as not done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryResult {
    Ok { id: String },
    Failed(EntryFailure),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFailure {
    pub id: String,
    pub code: String,
    pub message: String,
    /// SQS's `SenderFault`: the entry itself is wrong, and sending it again fails again.
    pub sender_fault: bool,
}

/// Every effect of the router (see the module documentation).
pub trait Aws: Send + Sync + 'static {
    /// The wall clock.
    fn now(&self) -> SystemTime;
    /// A draw in [0, 1) for retry jitter.
    fn jitter(&self) -> f64;

    /// STS AssumeRole from the function's own role: the spoke role's credentials.
    fn assume_role(
        &self,
        role_arn: &str,
    ) -> impl Future<Output = Result<Credentials, CallError>> + Send;

    /// EC2 DescribeInstances, one page (see [`DescribeInstances`]).
    fn describe_instances(
        &self,
        at: &Session,
        query: DescribeInstances<'_>,
    ) -> impl Future<Output = Result<InstancePage, CallError>> + Send;

    /// Resource Groups Tagging API GetResources with the instances' ARNs (at most 100): each
    /// tagged instance with its tags. Untagged and unknown instances are both absent.
    fn get_resources(
        &self,
        at: &Session,
        ids: &[InstanceId],
    ) -> impl Future<Output = Result<Vec<Tagged>, CallError>> + Send;

    /// SQS GetQueueUrl (a missing queue: [`CallError::is_missing_queue`]).
    fn get_queue_url(
        &self,
        at: &Session,
        name: &str,
    ) -> impl Future<Output = Result<String, CallError>> + Send;

    /// SQS ListQueueTags.
    fn list_queue_tags(
        &self,
        at: &Session,
        url: &str,
    ) -> impl Future<Output = Result<Vec<(String, String)>, CallError>> + Send;

    /// SQS GetQueueAttributes for `Policy` (`None`: the queue has none).
    fn get_queue_policy(
        &self,
        at: &Session,
        url: &str,
    ) -> impl Future<Output = Result<Option<String>, CallError>> + Send;

    /// IAM GetRole: the role's unique id (`AROA…`), which SQS reports as the `SenderId` of what
    /// the role sent. A role that does not exist: `NoSuchEntity`.
    fn get_role_id(
        &self,
        at: &Session,
        name: &str,
    ) -> impl Future<Output = Result<String, CallError>> + Send;

    /// SSM GetParameter: the value (a missing one: [`CallError::is_missing_parameter`]).
    fn get_parameter(
        &self,
        at: &Session,
        name: &str,
    ) -> impl Future<Output = Result<String, CallError>> + Send;

    /// SQS SendMessageBatch (at most 10 entries, 256 KiB).
    fn send_message_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[SendEntry<'_>],
    ) -> impl Future<Output = Result<Vec<EntryResult>, CallError>> + Send;

    /// SQS ChangeMessageVisibilityBatch (at most 10 entries).
    fn change_message_visibility_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[VisibilityEntry<'_>],
    ) -> impl Future<Output = Result<Vec<EntryResult>, CallError>> + Send;
}

impl fmt::Display for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.identity {
            Identity::Home => write!(f, "{} as the router's execution role", self.scope),
            Identity::Assumed { role_arn, .. } => write!(f, "{} as {role_arn}", self.scope),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EC2 names a spot instance by its lifecycle and an instance in a reservation by the
    /// reservation's id (a Capacity Block by its own lifecycle); the rest is On-Demand.
    #[test]
    fn capacity_is_read_from_the_lifecycle_and_the_reservation() {
        assert_eq!(Capacity::of(Some("spot"), None), Capacity::Spot);
        assert_eq!(Capacity::of(None, None), Capacity::OnDemand);
        assert_eq!(Capacity::of(None, Some("")), Capacity::OnDemand);
        assert_eq!(Capacity::of(Some("scheduled"), None), Capacity::OnDemand);
        assert_eq!(Capacity::of(None, Some("cr-0123")), Capacity::Reserved);
        assert_eq!(
            Capacity::of(Some("capacity-block"), None),
            Capacity::Reserved
        );
        let labels: Vec<&str> = [Capacity::Spot, Capacity::OnDemand, Capacity::Reserved]
            .map(Capacity::label)
            .to_vec();
        assert_eq!(labels, ["spot", "on-demand", "reserved"]);
    }

    /// 2,500 instances come in pages of 1,000, 1,000 and 500, each token leading to the next and
    /// the last page carrying none; a token past the end is an empty last page.
    #[test]
    fn a_sweep_pages_by_its_page_size_to_the_end() {
        let all: Vec<u32> = (0..2500).collect();
        let mut token = None;
        let mut sizes = Vec::new();
        let mut seen = Vec::new();
        loop {
            let (page, next) = sweep_page(&all, token.as_deref());
            sizes.push(page.len());
            seen.extend(page);
            match next {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        assert_eq!(sizes, [1000, 1000, 500]);
        assert_eq!(seen, all);
        assert_eq!(sweep_page(&all, Some("9999")), (Vec::new(), None));
    }
}
