//! Event: what arrived, and whether Karpenter would act on it.
//!
//! This is the first step of the data path (event → accounts → resolve → forward → handler) and it
//! is pure: no I/O, no clocks. [`classify`] reads one EventBridge event the way Karpenter v1.14's
//! interruption controller does, picking a parser by exact (`version`, `source`, `detail-type`),
//! and answers with one of three things:
//!
//! * [`Classified::Route`]: an interruption Karpenter acts on, with the instance ids it names;
//! * [`Classified::Ignore`]: a well-formed event Karpenter would delete unread (other kinds,
//!   states that are not an interruption, Health events that are not EC2 scheduled changes);
//! * [`Malformed`]: not an EventBridge event, or one Karpenter could not parse. These go to the
//!   dead-letter queue so an operator sees them, instead of vanishing inside Karpenter.
//!
//! Forwarded bodies are the original text, byte for byte, except for Health events, which name
//! several instances possibly of several clusters: [`health_body_for`] writes one copy per cluster
//! that lists only that cluster's instances, so no tenant ever sees another tenant's instance ids.

mod health;
mod kinds;
mod time;

use std::{borrow::Cow, collections::HashSet, fmt, sync::Arc};

use serde::Deserialize;
use serde_json::{Value, value::RawValue};

pub use self::{
    health::health_body_for,
    kinds::Kinds,
    time::{civil_from_days, is_rfc3339, rfc3339_unix_millis, unix_millis_rfc3339},
};

/// The interruption kinds Karpenter v1.14 parses from its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    SpotInterruption,
    RebalanceRecommendation,
    StateChange,
    CapacityReservationInterruption,
    ScheduledChange,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::SpotInterruption,
        Kind::RebalanceRecommendation,
        Kind::StateChange,
        Kind::CapacityReservationInterruption,
        Kind::ScheduledChange,
    ];

    pub fn source(self) -> &'static str {
        match self {
            Kind::ScheduledChange => "aws.health",
            _ => "aws.ec2",
        }
    }

    pub fn detail_type(self) -> &'static str {
        match self {
            Kind::SpotInterruption => "EC2 Spot Instance Interruption Warning",
            Kind::RebalanceRecommendation => "EC2 Instance Rebalance Recommendation",
            Kind::StateChange => "EC2 Instance State-change Notification",
            Kind::CapacityReservationInterruption => {
                "EC2 Capacity Reservation Instance Interruption Warning"
            }
            Kind::ScheduledChange => "AWS Health Event",
        }
    }

    /// A short stable label for logs and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Kind::SpotInterruption => "spot-interruption",
            Kind::RebalanceRecommendation => "rebalance-recommendation",
            Kind::StateChange => "state-change",
            Kind::CapacityReservationInterruption => "capacity-reservation-interruption",
            Kind::ScheduledChange => "scheduled-change",
        }
    }

    /// The EventBridge pattern a rule needs to deliver exactly the events of this kind the router
    /// forwards: state changes only to the actionable states, Health only EC2 scheduled changes.
    /// Anything wider is noise the router would be invoked for and then ignore.
    pub fn event_pattern(self) -> Value {
        let mut pattern =
            serde_json::json!({"source": [self.source()], "detail-type": [self.detail_type()]});
        match self {
            Kind::StateChange => {
                pattern["detail"] = serde_json::json!({"state": ACTIONABLE_STATES})
            }
            Kind::ScheduledChange => {
                pattern["detail"] = serde_json::json!({"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]})
            }
            _ => {}
        }
        pattern
    }

    /// The pattern of a rule on an account's default bus: [`Kind::event_pattern`] for that
    /// account's own events only. A default bus can also receive other accounts' events, which
    /// reach the router through the central bus instead (its rules use the plain pattern).
    pub fn event_pattern_in(self, account: &str) -> Value {
        let mut pattern = serde_json::Map::new();
        pattern.insert("account".into(), serde_json::json!([account]));
        if let Value::Object(fields) = self.event_pattern() {
            pattern.extend(fields);
        }
        Value::Object(pattern)
    }

    fn from_envelope(source: &str, detail_type: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.source() == source && k.detail_type() == detail_type)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Instance states Karpenter treats as an interruption (its `instance_stopped` and
/// `instance_terminated` parsers).
pub const ACTIONABLE_STATES: [&str; 4] = ["stopping", "stopped", "shutting-down", "terminated"];

/// Why a well-formed event is not forwarded. Counted per reason, never an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IgnoreReason {
    /// Not one of the five (source, detail-type) pairs Karpenter parses.
    UnknownKind,
    /// A known kind whose `version` is not "0": Karpenter matches no parser and deletes it.
    UnsupportedVersion,
    /// A state change to a state that is not an interruption (pending, running, …).
    StateNotActionable,
    /// A Health event that is not an EC2 scheduled change.
    HealthNotScheduledChange,
    /// An EC2 scheduled change whose entities are not instances (hosts, volumes, …).
    NoInstanceEntities,
    /// EC2 does not know the instance (another account or region, or long gone).
    UnknownInstance,
    /// The instance exists but lacks the managed tag (e.g. a managed node group instance).
    UnmanagedInstance,
    /// The instance is managed but carries no usable cluster tag.
    NoClusterTag,
    /// The owning cluster has no tenant queue (it is not onboarded yet): its own interruption
    /// set-up, if any, still delivers the event. Counted per cluster, never paged.
    NoTenantQueue,
    /// Every cluster it names declined its kind (their tenant stacks' `EventKinds`).
    KindDeclined,
}

impl IgnoreReason {
    pub fn label(self) -> &'static str {
        match self {
            IgnoreReason::UnknownKind => "unknown-kind",
            IgnoreReason::UnsupportedVersion => "unsupported-version",
            IgnoreReason::StateNotActionable => "state-not-actionable",
            IgnoreReason::HealthNotScheduledChange => "health-not-ec2-scheduled-change",
            IgnoreReason::NoInstanceEntities => "no-instance-entities",
            IgnoreReason::UnknownInstance => "unknown-instance",
            IgnoreReason::UnmanagedInstance => "unmanaged-instance",
            IgnoreReason::NoClusterTag => "no-cluster-tag",
            IgnoreReason::NoTenantQueue => "no-tenant-queue",
            IgnoreReason::KindDeclined => "kind-declined",
        }
    }
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A payload that is not an EventBridge event, or an interruption Karpenter could not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed event: {0}")]
pub struct Malformed(pub String);

impl Malformed {
    fn new(why: impl Into<String>) -> Self {
        Self(why.into())
    }
}

/// An EC2 instance id in its bare form (`i-` and 8 or 17 hex digits), the form Karpenter matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId(Arc<str>);

impl InstanceId {
    /// Accepts a bare id or an instance ARN (`arn:<partition>:ec2:<region>:<account>:instance/i-…`).
    pub fn parse(value: &str) -> Option<Self> {
        let bare = match value.strip_prefix("arn:") {
            Some(rest) => {
                let mut parts = rest.splitn(5, ':');
                let (_partition, service) = (parts.next()?, parts.next()?);
                let (_region, _account, resource) = (parts.next()?, parts.next()?, parts.next()?);
                if service != "ec2" {
                    return None;
                }
                resource.strip_prefix("instance/")?
            }
            None => value,
        };
        let hex = bare.strip_prefix("i-")?;
        let valid = matches!(hex.len(), 8 | 17)
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| Self(Arc::from(bare)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an event says it comes from: its `account` and `region` fields, either of which may be
/// absent (then it is the function's own: `crate::accounts::admit` fills them in).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    pub account: Option<Arc<str>>,
    pub region: Option<Arc<str>>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let account = self.account.as_deref().unwrap_or("-");
        let region = self.region.as_deref().unwrap_or("-");
        write!(f, "{account}/{region}")
    }
}

/// An interruption to route: the kind, the instances it names, and the envelope fields worth logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interruption {
    pub kind: Kind,
    /// The EventBridge event id, for logs.
    pub id: Option<String>,
    /// The event's RFC3339 `time`, for the end-to-end latency metric.
    pub time: Option<String>,
    pub origin: Origin,
    /// Distinct instance ids, in the order the event names them (never empty).
    pub instances: Vec<InstanceId>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Classified {
    Route(Interruption),
    Ignore {
        reason: IgnoreReason,
        kind: Option<Kind>,
    },
}

/// The envelope, with everything but the two fields that pick a parser left raw: a wrong type in
/// `account` makes a known kind malformed (Karpenter could not parse it) but not an unknown one.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    source: Cow<'a, str>,
    #[serde(rename = "detail-type", borrow)]
    detail_type: Cow<'a, str>,
    #[serde(default, borrow)]
    version: Option<&'a RawValue>,
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    time: Option<&'a RawValue>,
    #[serde(default, borrow)]
    account: Option<&'a RawValue>,
    #[serde(default, borrow)]
    region: Option<&'a RawValue>,
    #[serde(default, borrow)]
    resources: Option<&'a RawValue>,
    #[serde(default, borrow)]
    detail: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Ec2Detail<'a> {
    #[serde(rename = "instance-id", default, borrow)]
    instance_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    state: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct HealthDetail<'a> {
    #[serde(default, borrow)]
    service: Option<Cow<'a, str>>,
    #[serde(rename = "eventTypeCategory", default, borrow)]
    category: Option<Cow<'a, str>>,
    #[serde(rename = "affectedEntities", default, borrow)]
    entities: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Entity<'a> {
    #[serde(rename = "entityValue", default, borrow)]
    value: Option<Cow<'a, str>>,
}

/// A struct read from `text` only when it is a JSON object. serde would read a struct from an
/// array too (its fields in order); Karpenter's Go decoder refuses that, and so does the splitter
/// that writes each cluster's Health copy ([`health_body_for`]).
fn object<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> Result<T, String> {
    if !text.trim_start().starts_with('{') {
        let start: String = text.trim_start().chars().take(40).collect();
        return Err(format!("{what} is a JSON object, not {start}…"));
    }
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// `affectedEntities` as a list of entities, each a JSON object.
fn entities(raw: &RawValue) -> Result<Vec<Entity<'_>>, String> {
    let listed: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
    listed
        .into_iter()
        .map(|entity| object(entity.get(), "an entity"))
        .collect()
}

/// Classifies one EventBridge event given as JSON text.
pub fn classify(body: &str) -> Result<Classified, Malformed> {
    let envelope: Envelope<'_> = object(body, "an event").map_err(|e| {
        Malformed::new(format!(
            "not an EventBridge event with string source and detail-type: {e}"
        ))
    })?;
    let Some(kind) = Kind::from_envelope(&envelope.source, &envelope.detail_type) else {
        return Ok(Classified::Ignore {
            reason: IgnoreReason::UnknownKind,
            kind: None,
        });
    };

    // From here on the event claims to be one Karpenter parses, so hold it to what Karpenter's
    // Go structs accept: string fields are strings, `time` is RFC3339, `resources` is a list.
    let version = string_field(envelope.version, "version")?;
    let id = string_field(envelope.id, "id")?.map(Cow::into_owned);
    let time = string_field(envelope.time, "time")?;
    if let Some(t) = time.as_deref().filter(|t| !is_rfc3339(t)) {
        return Err(Malformed::new(format!("time {t:?} is not RFC3339")));
    }
    let account = string_field(envelope.account, "account")?;
    let region = string_field(envelope.region, "region")?;
    if let Some(resources) = envelope.resources {
        serde_json::from_str::<Vec<Cow<'_, str>>>(resources.get())
            .map_err(|_| Malformed::new("resources is not a list of strings"))?;
    }
    if version.as_deref() != Some("0") {
        return Ok(Classified::Ignore {
            reason: IgnoreReason::UnsupportedVersion,
            kind: Some(kind),
        });
    }
    let detail = envelope
        .detail
        .ok_or_else(|| Malformed::new(format!("{kind} event has no detail")))?;

    let instances = match kind {
        Kind::ScheduledChange => match health_instances(detail)? {
            HealthInstances::Instances(ids) => ids,
            HealthInstances::Ignore(reason) => {
                return Ok(Classified::Ignore {
                    reason,
                    kind: Some(kind),
                });
            }
        },
        _ => {
            let detail: Ec2Detail<'_> = object(detail.get(), "the detail")
                .map_err(|e| Malformed::new(format!("{kind} detail is not what EC2 sends: {e}")))?;
            if kind == Kind::StateChange {
                let state = detail.state.as_deref().unwrap_or_default();
                if !ACTIONABLE_STATES.contains(&state) {
                    return Ok(Classified::Ignore {
                        reason: IgnoreReason::StateNotActionable,
                        kind: Some(kind),
                    });
                }
            }
            let raw = detail
                .instance_id
                .ok_or_else(|| Malformed::new(format!("{kind} event has no detail.instance-id")))?;
            let id = InstanceId::parse(&raw).ok_or_else(|| {
                Malformed::new(format!(
                    "detail.instance-id {raw:?} is not an EC2 instance id"
                ))
            })?;
            vec![id]
        }
    };

    Ok(Classified::Route(Interruption {
        kind,
        id,
        time: time.map(Cow::into_owned),
        origin: Origin {
            account: account.map(|a| Arc::from(a.as_ref())),
            region: region.map(|r| Arc::from(r.as_ref())),
        },
        instances,
    }))
}

enum HealthInstances {
    Instances(Vec<InstanceId>),
    Ignore(IgnoreReason),
}

fn health_instances(detail: &RawValue) -> Result<HealthInstances, Malformed> {
    let detail: HealthDetail<'_> = object(detail.get(), "the detail")
        .map_err(|e| Malformed::new(format!("Health detail is not what AWS Health sends: {e}")))?;
    if detail.service.as_deref() != Some("EC2")
        || detail.category.as_deref() != Some("scheduledChange")
    {
        return Ok(HealthInstances::Ignore(
            IgnoreReason::HealthNotScheduledChange,
        ));
    }
    let entities: Vec<Entity<'_>> = match detail.entities {
        Some(raw) => entities(raw).map_err(|e| {
            Malformed::new(format!(
                "detail.affectedEntities is not a list of entities: {e}"
            ))
        })?,
        None => Vec::new(),
    };
    // Entities name hosts and volumes too, and may repeat: keep distinct instances, in order.
    let mut seen = HashSet::with_capacity(entities.len());
    let ids: Vec<InstanceId> = entities
        .iter()
        .filter_map(|e| InstanceId::parse(e.value.as_deref()?))
        .filter(|id| seen.insert(id.clone()))
        .collect();
    Ok(if ids.is_empty() {
        HealthInstances::Ignore(IgnoreReason::NoInstanceEntities)
    } else {
        HealthInstances::Instances(ids)
    })
}

/// A string field of the envelope, absent or a string. serde reads a JSON null into the
/// `Option` as `None` before any `RawValue` is made, so a null is absent here too, as Go's
/// encoding/json leaves the field empty.
fn string_field<'a>(
    raw: Option<&'a RawValue>,
    name: &str,
) -> Result<Option<Cow<'a, str>>, Malformed> {
    match raw {
        None => Ok(None),
        Some(raw) => serde_json::from_str::<Cow<'a, str>>(raw.get())
            .map(Some)
            .map_err(|_| Malformed::new(format!("{name} is not a string"))),
    }
}
#[cfg(test)]
mod tests;
