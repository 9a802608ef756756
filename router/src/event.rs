//! Event: what arrived, and whether Karpenter would act on it.
//!
//! This is the first step of the data path (event → resolve → forward → handler) and it is pure:
//! no I/O, no clocks. [`classify`] reads one EventBridge event the way Karpenter v1.14's
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

use std::{borrow::Cow, collections::HashSet, fmt, sync::Arc};

use serde::Deserialize;
use serde_json::{Value, value::RawValue};

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

/// Where an event comes from: its account and region. Every lookup and queue is keyed by scope so
/// that one router can later serve several accounts and regions; today each scope is served by
/// the function's own clients (see `resolve` and `forward`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    pub account: Option<Arc<str>>,
    pub region: Option<Arc<str>>,
}

impl fmt::Display for Scope {
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
    pub scope: Scope,
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

/// Classifies one EventBridge event given as JSON text.
pub fn classify(body: &str) -> Result<Classified, Malformed> {
    let envelope: Envelope<'_> = serde_json::from_str(body).map_err(|e| {
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
            let detail: Ec2Detail<'_> = serde_json::from_str(detail.get())
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
        scope: Scope {
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
    let detail: HealthDetail<'_> = serde_json::from_str(detail.get())
        .map_err(|e| Malformed::new(format!("Health detail is not what AWS Health sends: {e}")))?;
    if detail.service.as_deref() != Some("EC2")
        || detail.category.as_deref() != Some("scheduledChange")
    {
        return Ok(HealthInstances::Ignore(
            IgnoreReason::HealthNotScheduledChange,
        ));
    }
    let entities: Vec<Entity<'_>> = match detail.entities {
        Some(raw) => serde_json::from_str(raw.get()).map_err(|e| {
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

fn string_field<'a>(
    raw: Option<&'a RawValue>,
    name: &str,
) -> Result<Option<Cow<'a, str>>, Malformed> {
    match raw {
        None => Ok(None),
        Some(raw) if raw.get() == "null" => Ok(None),
        Some(raw) => serde_json::from_str::<Cow<'a, str>>(raw.get())
            .map(Some)
            .map_err(|_| Malformed::new(format!("{name} is not a string"))),
    }
}

/// Whether `s` is a time Go's `time.Time` JSON decoding accepts (RFC3339, as EventBridge writes
/// `time`).
pub fn is_rfc3339(s: &str) -> bool {
    rfc3339_unix_millis(s).is_some()
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` into milliseconds since the Unix epoch, without a
/// date crate. Used to validate events and to measure how old an event is when it is forwarded.
pub fn rfc3339_unix_millis(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(r)?;
        digits
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month) || day < 1 || day > month_days[(month - 1) as usize] {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &b[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|d| d.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        millis = frac[..n.min(3)]
            .iter()
            .fold(0, |m, d| m * 10 + i64::from(d - b'0'))
            * 10_i64.pow(3 - n.min(3) as u32);
        rest = &frac[n..];
    }
    let offset_minutes = match rest {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            if [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()) =>
        {
            let (h, m) = (
                i64::from((h1 - b'0') * 10 + (h2 - b'0')),
                i64::from((m1 - b'0') * 10 + (m2 - b'0')),
            );
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'+' {
                h * 60 + m
            } else {
                -(h * 60 + m)
            }
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// Milliseconds since the Unix epoch as RFC 3339 in UTC with milliseconds
/// (`2026-11-23T15:57:00.123Z`): the inverse of [`rfc3339_unix_millis`], for timestamps the
/// router writes itself (log lines and metric documents Lambda's log filter must accept).
pub fn unix_millis_rfc3339(ms: i64) -> String {
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60);
    let (second, millis) = (ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

/// (year, month, day) of a count of days since 1970-01-01: Howard Hinnant's "civil from days",
/// the inverse of the day count in [`rfc3339_unix_millis`].
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Writes the copy of a Health event that one cluster receives: the same envelope and detail,
/// with `detail.affectedEntities` reduced to that cluster's instances (ARNs rewritten to the bare
/// ids Karpenter matches, each instance once) and `resources` set to exactly those ids.
///
/// `body` must be an event [`classify`] routed as a scheduled change. Only the three values that
/// change are parsed; everything else (the description, timestamps, fields AWS adds later) is
/// copied as the original JSON text, so a split costs little more than a scan of the body.
pub fn health_body_for(body: &str, instances: &[InstanceId]) -> Result<String, Malformed> {
    let malformed = |e: serde_json::Error| Malformed::new(e.to_string());
    let event: Object<'_, EventMember<'_>> = serde_json::from_str(body).map_err(malformed)?;
    let wanted: HashSet<&str> = instances.iter().map(InstanceId::as_str).collect();
    let mut ids: Vec<InstanceId> = Vec::with_capacity(instances.len());

    // The detail first: `resources` lists the ids it keeps, and may come before it.
    let mut detail_out = Vec::with_capacity(body.len());
    let mut entities_seen = false;
    for (_, member) in &event.0 {
        let EventMember::Detail(detail) = member else {
            continue;
        };
        if !detail_out.is_empty() {
            return Err(Malformed::new("Health event with two detail fields"));
        }
        detail_out.push(b'{');
        for (key, member) in &detail.0 {
            push_key(&mut detail_out, key.as_str());
            match member {
                DetailMember::Entities(entities) => {
                    entities_seen = true;
                    push_entities(&mut detail_out, entities, &wanted, &mut ids);
                }
                DetailMember::Text(text) => detail_out.extend_from_slice(text.get().as_bytes()),
            }
            detail_out.push(b',');
        }
        close(&mut detail_out, b'}');
    }
    if !entities_seen {
        return Err(Malformed::new(
            "Health event without detail.affectedEntities",
        ));
    }

    // Then the event, member by member in the original order; `resources` is added if missing.
    let mut out = Vec::with_capacity(body.len());
    let mut resources_written = false;
    out.push(b'{');
    for (key, member) in &event.0 {
        match member {
            EventMember::Text(_) if key.as_str() == "resources" => {
                if resources_written {
                    continue;
                }
                resources_written = true;
                push_resources(&mut out, &ids);
            }
            EventMember::Text(text) => {
                push_key(&mut out, key.as_str());
                out.extend_from_slice(text.get().as_bytes());
            }
            EventMember::Detail(_) => {
                push_key(&mut out, key.as_str());
                out.extend_from_slice(&detail_out);
            }
        }
        out.push(b',');
    }
    if !resources_written {
        push_resources(&mut out, &ids);
        out.push(b',');
    }
    close(&mut out, b'}');
    // Every piece is either original (valid UTF-8) text, a key serde_json escaped, or an id.
    String::from_utf8(out).map_err(|e| Malformed::new(e.to_string()))
}

/// Writes the entities naming one of `wanted`, each instance once, with `entityValue` bare.
fn push_entities(
    out: &mut Vec<u8>,
    entities: &[Members<'_>],
    wanted: &HashSet<&str>,
    ids: &mut Vec<InstanceId>,
) {
    out.push(b'[');
    for entity in entities {
        let id = entity
            .0
            .iter()
            .find(|(key, _)| key.as_str() == "entityValue")
            .and_then(|(_, value)| serde_json::from_str::<Cow<'_, str>>(value.get()).ok())
            .and_then(|value| InstanceId::parse(&value));
        let Some(id) = id else { continue };
        if !wanted.contains(id.as_str()) || ids.contains(&id) {
            continue;
        }
        out.push(b'{');
        for (key, value) in &entity.0 {
            push_key(out, key.as_str());
            if key.as_str() == "entityValue" {
                push_id(out, &id);
            } else {
                out.extend_from_slice(value.get().as_bytes());
            }
            out.push(b',');
        }
        close(out, b'}');
        out.push(b',');
        ids.push(id);
    }
    close(out, b']');
}

fn push_resources(out: &mut Vec<u8>, ids: &[InstanceId]) {
    out.extend_from_slice(br#""resources":["#);
    for id in ids {
        push_id(out, id);
        out.push(b',');
    }
    close(out, b']');
}

/// Replaces a trailing comma (if any) with `bracket`.
fn close(out: &mut Vec<u8>, bracket: u8) {
    if out.last() == Some(&b',') {
        out.pop();
    }
    out.push(bracket);
}

fn push_key(out: &mut Vec<u8>, key: &str) {
    serde_json::to_writer(&mut *out, key).expect("writing to a Vec cannot fail");
    out.push(b':');
}

/// Instance ids are `i-` and hex digits: nothing to escape.
fn push_id(out: &mut Vec<u8>, id: &InstanceId) {
    out.push(b'"');
    out.extend_from_slice(id.as_str().as_bytes());
    out.push(b'"');
}

/// A JSON object's members in their original order. `M` decides, key by key, what is parsed
/// further; everything else stays unparsed JSON text. One pass over the body builds the whole tree.
struct Object<'a, M>(Vec<(Key<'a>, M)>);

/// An object whose members are all left as text (an affected entity).
type Members<'a> = Object<'a, &'a RawValue>;

/// A member of the Health event being split: its `detail` is parsed, the rest kept as text.
enum EventMember<'a> {
    Text(&'a RawValue),
    Detail(Object<'a, DetailMember<'a>>),
}

/// A member of the detail: `affectedEntities` is parsed, the rest kept as text.
enum DetailMember<'a> {
    Text(&'a RawValue),
    Entities(Vec<Members<'a>>),
}

/// Reads the value of the member named `key` from `map`.
trait Member<'de>: Sized {
    fn read<A: serde::de::MapAccess<'de>>(key: &str, map: &mut A) -> Result<Self, A::Error>;
}

impl<'de> Member<'de> for &'de RawValue {
    fn read<A: serde::de::MapAccess<'de>>(_: &str, map: &mut A) -> Result<Self, A::Error> {
        map.next_value()
    }
}

impl<'de> Member<'de> for EventMember<'de> {
    fn read<A: serde::de::MapAccess<'de>>(key: &str, map: &mut A) -> Result<Self, A::Error> {
        Ok(match key {
            "detail" => EventMember::Detail(map.next_value()?),
            _ => EventMember::Text(map.next_value()?),
        })
    }
}

impl<'de> Member<'de> for DetailMember<'de> {
    fn read<A: serde::de::MapAccess<'de>>(key: &str, map: &mut A) -> Result<Self, A::Error> {
        Ok(match key {
            "affectedEntities" => DetailMember::Entities(map.next_value()?),
            _ => DetailMember::Text(map.next_value()?),
        })
    }
}

/// An object key, borrowed from the input unless it had escapes to undo.
struct Key<'a>(Cow<'a, str>);

impl Key<'_> {
    fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(Visitor)
    }
}

impl<'de: 'a, 'a, M: Member<'de>> Deserialize<'de> for Object<'a, M> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor<M>(std::marker::PhantomData<M>);
        impl<'de, M: Member<'de>> serde::de::Visitor<'de> for Visitor<M> {
            type Value = Object<'de, M>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let member = M::read(key.as_str(), &mut map)?;
                    members.push((key, member));
                }
                Ok(Object(members))
            }
        }
        d.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/events");

    fn fixture(name: &str) -> String {
        let path = format!("{FIXTURES}/{name}");
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn ids(list: &[&str]) -> Vec<InstanceId> {
        list.iter().map(|s| InstanceId::parse(s).unwrap()).collect()
    }

    fn routed(name: &str) -> Interruption {
        match classify(&fixture(name)).unwrap() {
            Classified::Route(i) => i,
            other => panic!("{name}: expected Route, got {other:?}"),
        }
    }

    fn ignored(body: &str) -> IgnoreReason {
        match classify(body).unwrap() {
            Classified::Ignore { reason, .. } => reason,
            other => panic!("expected Ignore, got {other:?}"),
        }
    }

    #[test]
    fn fixtures_karpenter_acts_on_are_routed_with_their_instances() {
        let cases = [
            (
                "spot-interruption-warning.json",
                Kind::SpotInterruption,
                "i-0b662ef9931388ba0",
            ),
            (
                "rebalance-recommendation.json",
                Kind::RebalanceRecommendation,
                "i-0b662ef9931388ba0",
            ),
            (
                "state-change-stopping.json",
                Kind::StateChange,
                "i-0123456789abcdef0",
            ),
            (
                "state-change-terminated.json",
                Kind::StateChange,
                "i-0123456789abcdef2",
            ),
            (
                "capacity-reservation-interruption-warning.json",
                Kind::CapacityReservationInterruption,
                "i-0123456789abcdef4",
            ),
            (
                "health-scheduled-change-bare-id.json",
                Kind::ScheduledChange,
                "i-12345678",
            ),
            (
                "health-instance-retirement-arn-entity.json",
                Kind::ScheduledChange,
                "i-1234567890abcdef0",
            ),
        ];
        for (name, kind, instance) in cases {
            let i = routed(name);
            assert_eq!(i.kind, kind, "{name}");
            assert_eq!(i.instances, ids(&[instance]), "{name}");
        }
    }

    #[test]
    fn envelope_fields_are_kept_for_logs_and_keys() {
        let i = routed("state-change-terminated.json");
        assert_eq!(
            i.id.as_deref(),
            Some("6b7a4a2e-0f5c-4c71-9a51-3f5c2b1f0b00")
        );
        assert_eq!(i.time.as_deref(), Some("2026-08-21T10:00:00Z"));
        assert_eq!(
            i.scope,
            Scope {
                account: Some("000000000000".into()),
                region: Some("us-west-2".into())
            }
        );
    }

    #[test]
    fn fixtures_karpenter_deletes_are_ignored_with_a_reason() {
        assert_eq!(
            ignored(&fixture("state-change-pending.json")),
            IgnoreReason::StateNotActionable
        );
        assert_eq!(
            ignored(&fixture("state-change-no-version-field.json")),
            IgnoreReason::UnsupportedVersion
        );
        assert_eq!(
            ignored(&fixture("health-issue-backup-event.json")),
            IgnoreReason::HealthNotScheduledChange
        );
        assert_eq!(
            ignored(&fixture("health-non-ec2-risk.json")),
            IgnoreReason::HealthNotScheduledChange
        );
        assert_eq!(
            ignored(&fixture("asg-terminate-lifecycle-action.json")),
            IgnoreReason::UnknownKind
        );
    }

    #[test]
    fn every_actionable_state_routes_and_others_do_not() {
        let body = fixture("state-change-stopping.json");
        for state in ACTIONABLE_STATES {
            let b = body.replace("\"stopping\"", &format!("{state:?}"));
            assert!(
                matches!(classify(&b).unwrap(), Classified::Route(_)),
                "{state}"
            );
        }
        for state in ["pending", "running", "Stopping", ""] {
            let b = body.replace("\"stopping\"", &format!("{state:?}"));
            assert_eq!(ignored(&b), IgnoreReason::StateNotActionable, "{state}");
        }
    }

    #[test]
    fn payloads_without_string_source_and_detail_type_are_malformed() {
        for body in [
            "",
            "null",
            "[]",
            "\"text\"",
            "{}",
            r#"{"source":"aws.ec2"}"#,
            r#"{"detail-type":"EC2 Spot Instance Interruption Warning"}"#,
            r#"{"source":5,"detail-type":"x"}"#,
            r#"{"source":"aws.ec2","detail-type":null}"#,
            r#"{"source":"aws.ec2","source":"aws.ec2","detail-type":"x"}"#,
            "{\"source\":\"aws.ec2\",",
        ] {
            assert!(classify(body).is_err(), "{body:?} should be malformed");
        }
    }

    #[test]
    fn known_kinds_karpenter_could_not_parse_are_malformed() {
        let spot = fixture("spot-interruption-warning.json");
        let cases = [
            spot.replace("\"2026-11-01T12:00:00Z\"", "\"yyyy-mm-ddThh:mm:ssZ\""),
            spot.replace("\"123456789012\"", "123456789012"),
            spot.replace("\"version\": \"0\"", "\"version\": 0"),
            spot.replace("\"instance-id\": \"i-0b662ef9931388ba0\"", "\"instance-id\": \"host-1\""),
            spot.replace("\"instance-id\": \"i-0b662ef9931388ba0\"", "\"instance-id\": 7"),
            spot.replace("\"instance-id\": \"i-0b662ef9931388ba0\",", ""),
            spot.replace(
                "\"resources\": [\n    \"arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0\"\n  ]",
                "\"resources\": \"arn\"",
            ),
        ];
        for (n, body) in cases.iter().enumerate() {
            assert_ne!(body, &spot, "case {n} did not change the fixture");
            assert!(
                classify(body).is_err(),
                "case {n} should be malformed: {body}"
            );
        }
        // The same defects in an event Karpenter does not parse are nobody's business.
        let asg = fixture("asg-terminate-lifecycle-action.json")
            .replace("\"123456789012\"", "123456789012");
        assert_eq!(ignored(&asg), IgnoreReason::UnknownKind);
    }

    #[test]
    fn health_entities_that_are_not_instances_are_skipped_and_duplicates_collapse() {
        let body = fixture("health-scheduled-change-bare-id.json").replace(
            r#""affectedEntities": ["#,
            r#""affectedEntities": [
              {"entityValue": "h-0123456789abcdef0"},
              {"entityValue": "arn:aws:ec2:us-east-1:123456789012:instance/i-12345678"},
              {"entityValue": 42},
              {"entityValue": "i-0aaaaaaaaaaaaaaaa"},"#,
        );
        // entityValue 42 is not a string: Karpenter's Go struct could not decode it.
        assert!(classify(&body).is_err());
        let body = body.replace(r#"{"entityValue": 42},"#, "");
        let i = match classify(&body).unwrap() {
            Classified::Route(i) => i,
            other => panic!("{other:?}"),
        };
        assert_eq!(i.instances, ids(&["i-12345678", "i-0aaaaaaaaaaaaaaaa"]));
    }

    #[test]
    fn ec2_scheduled_change_naming_no_instance_is_ignored() {
        let body = fixture("health-scheduled-change-bare-id.json")
            .replace("\"i-12345678\"", "\"h-12345678\"");
        assert_eq!(ignored(&body), IgnoreReason::NoInstanceEntities);
    }

    #[test]
    fn rule_patterns_admit_exactly_what_is_forwarded() {
        assert_eq!(
            Kind::StateChange.event_pattern(),
            serde_json::json!({"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"],
                               "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]}})
        );
        assert_eq!(
            Kind::ScheduledChange.event_pattern()["detail"],
            serde_json::json!({"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]})
        );
        assert_eq!(
            Kind::SpotInterruption.event_pattern(),
            serde_json::json!({"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]})
        );
        assert_eq!(
            Kind::SpotInterruption.event_pattern_in("111111111111"),
            serde_json::json!({"account": ["111111111111"], "source": ["aws.ec2"],
                               "detail-type": ["EC2 Spot Instance Interruption Warning"]})
        );
    }

    #[test]
    fn instance_ids_accept_bare_and_arn_forms_only() {
        assert_eq!(
            InstanceId::parse("i-0123456789abcdef0").unwrap().as_str(),
            "i-0123456789abcdef0"
        );
        assert_eq!(
            InstanceId::parse("i-abcd1111").unwrap().as_str(),
            "i-abcd1111"
        );
        assert_eq!(
            InstanceId::parse(
                "arn:aws-us-gov:ec2:us-gov-west-1:123456789012:instance/i-0123456789abcdef0"
            )
            .unwrap()
            .as_str(),
            "i-0123456789abcdef0"
        );
        for bad in [
            "",
            "i-",
            "i-123",
            "i-0123456789ABCDEF0",
            "i-0123456789abcdef0 ",
            "h-0123456789abcdef0",
            "arn:aws:ec2:us-east-1:123456789012:volume/vol-0123456789abcdef0",
            "arn:aws:s3:us-east-1:123456789012:instance/i-0123456789abcdef0",
            "ACCESS_KEY_ID_HERE",
        ] {
            assert_eq!(InstanceId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_matches_go_time_decoding() {
        for ok in [
            "2026-11-01T12:00:00Z",
            "2026-11-01T12:00:00.123456Z",
            "2026-11-01T12:00:00+05:30",
            "2016-12-31T23:59:60Z",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "yyyy-mm-ddThh:mm:ssZ",
            "2026-11-01 12:00:00Z",
            "2026-11-01T12:00:00",
            "2026-13-01T12:00:00Z",
            "2026-11-01T24:00:00Z",
            "2026-11-01T12:00:00.Z",
            "2026-11-01T12:00:00+5:30",
            "Thu, 27 Aug 2026 13:19:03 GMT",
            "2026-11-01T12:00:00Zjunk",
            "२०२६-11-01T12:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }

    #[test]
    fn rfc3339_converts_to_unix_millis() {
        assert_eq!(rfc3339_unix_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            rfc3339_unix_millis("2026-11-01T12:00:00Z"),
            Some(1_793_534_400_000)
        );
        assert_eq!(
            rfc3339_unix_millis("2026-11-01T12:00:00.25Z"),
            Some(1_793_534_400_250)
        );
        assert_eq!(
            rfc3339_unix_millis("2026-11-01T13:30:00.123456+01:30"),
            Some(1_793_534_400_123)
        );
        assert_eq!(
            rfc3339_unix_millis("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
    }

    #[test]
    fn millis_format_as_rfc3339_and_read_back() {
        assert_eq!(unix_millis_rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            unix_millis_rfc3339(1_793_534_400_250),
            "2026-11-01T12:00:00.250Z"
        );
        assert_eq!(
            unix_millis_rfc3339(1_709_164_800_000),
            "2024-02-29T00:00:00.000Z"
        );
        // Every day of four years (a leap year and a century boundary's rules included) reads
        // back to the same instant.
        for ms in (946_684_800_000_i64..1_072_915_200_000).step_by(86_400_000 + 3_723_001) {
            assert_eq!(rfc3339_unix_millis(&unix_millis_rfc3339(ms)), Some(ms));
        }
    }

    #[test]
    fn health_split_keeps_only_the_clusters_instances_as_bare_ids() {
        let original = fixture("health-instance-retirement-arn-entity.json").replace(
            r#""affectedEntities": ["#,
            r#""affectedEntities": [
              {"entityValue": "i-0bbbbbbbbbbbbbbbb", "status": "PENDING"},
              {"entityValue": "i-0aaaaaaaaaaaaaaaa"},"#,
        );
        let mine = ids(&["i-1234567890abcdef0", "i-0aaaaaaaaaaaaaaaa"]);
        let copy: Value =
            serde_json::from_str(&health_body_for(&original, &mine).unwrap()).unwrap();
        let original: Value = serde_json::from_str(&original).unwrap();

        // In the original's entity order, whatever order the cluster's instances were given in.
        let in_event_order = ids(&["i-0aaaaaaaaaaaaaaaa", "i-1234567890abcdef0"]);
        let entities = copy["detail"]["affectedEntities"].as_array().unwrap();
        let values: Vec<&str> = entities
            .iter()
            .map(|e| e["entityValue"].as_str().unwrap())
            .collect();
        assert_eq!(values, ["i-0aaaaaaaaaaaaaaaa", "i-1234567890abcdef0"]);
        assert_eq!(
            entities[1]["status"], "PENDING",
            "entity fields other than the id are kept"
        );
        assert_eq!(
            copy["resources"],
            serde_json::json!(["i-0aaaaaaaaaaaaaaaa", "i-1234567890abcdef0"])
        );
        assert!(
            !copy.to_string().contains("i-0bbbbbbbbbbbbbbbb"),
            "another cluster's instance leaked"
        );

        // Everything else is the original, field for field.
        for key in [
            "version",
            "id",
            "detail-type",
            "source",
            "account",
            "time",
            "region",
        ] {
            assert_eq!(copy[key], original[key], "{key}");
        }
        let (mut cd, mut od) = (copy["detail"].clone(), original["detail"].clone());
        cd.as_object_mut().unwrap().remove("affectedEntities");
        od.as_object_mut().unwrap().remove("affectedEntities");
        assert_eq!(cd, od);
        // And Karpenter would route the copy to exactly these instances.
        match classify(&copy.to_string()).unwrap() {
            Classified::Route(i) => assert_eq!(i.instances, in_event_order),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn health_split_lists_a_repeated_entity_once() {
        let original = fixture("health-scheduled-change-bare-id.json").replace(
            r#""affectedEntities": ["#,
            r#""affectedEntities": [{"entityValue": "i-12345678"},"#,
        );
        let copy: Value =
            serde_json::from_str(&health_body_for(&original, &ids(&["i-12345678"])).unwrap())
                .unwrap();
        assert_eq!(
            copy["detail"]["affectedEntities"].as_array().unwrap().len(),
            1
        );
        assert_eq!(copy["resources"], serde_json::json!(["i-12345678"]));
    }

    #[test]
    fn health_split_copies_untouched_text_verbatim_and_reads_escaped_keys() {
        // An escaped key still names the field, escapes elsewhere survive byte for byte, and an
        // event without `resources` gets one.
        let original = r#"{"version":"0","id":"x","detail-type":"AWS Health Event","source":"aws.health","account":"1","time":"2026-01-01T00:00:00Z","region":"us-east-1","d\u0065tail":{"service":"EC2","eventTypeCategory":"scheduledChange","eventDescription":[{"latestDescription":"line\none \"q\" \u00e9"}],"affectedEntities":[{"entityValue":"i-0aaaaaaaaaaaaaaaa","tags":{}},{"entityValue":"i-0bbbbbbbbbbbbbbbb"}]}}"#;
        assert!(matches!(classify(original), Ok(Classified::Route(_))));
        let copy = health_body_for(original, &ids(&["i-0bbbbbbbbbbbbbbbb"])).unwrap();
        assert!(copy.contains(r#""latestDescription":"line\none \"q\" \u00e9""#));
        let copy: Value = serde_json::from_str(&copy).unwrap();
        assert_eq!(
            copy["detail"]["affectedEntities"],
            serde_json::json!([{"entityValue": "i-0bbbbbbbbbbbbbbbb"}])
        );
        assert_eq!(
            copy["resources"],
            serde_json::json!(["i-0bbbbbbbbbbbbbbbb"])
        );
    }

    #[test]
    fn health_split_keeps_the_members_in_their_original_order() {
        // `resources` before `detail`, as AWS Health writes it: it stays there.
        let original = fixture("health-instance-retirement-arn-entity.json").replacen(
            r#""detail":"#,
            r#""resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0"], "detail":"#,
            1,
        );
        let keys = |body: &str| -> Vec<String> {
            let members: Members<'_> = serde_json::from_str(body).unwrap();
            members
                .0
                .iter()
                .map(|(k, _)| k.as_str().to_owned())
                .collect()
        };
        let copy = health_body_for(&original, &ids(&["i-1234567890abcdef0"])).unwrap();
        assert_eq!(keys(&copy), keys(&original));
        let twice = original.replacen('{', r#"{"detail":{"affectedEntities":[]},"#, 1);
        assert!(health_body_for(&twice, &ids(&["i-1234567890abcdef0"])).is_err());
    }

    #[test]
    fn health_split_without_entities_is_malformed() {
        let no_entities = fixture("health-scheduled-change-bare-id.json")
            .replace(r#""affectedEntities""#, r#""otherEntities""#);
        assert!(health_body_for(&no_entities, &ids(&["i-12345678"])).is_err());
        assert!(health_body_for(r#"{"detail":{"affectedEntities":"x"}}"#, &[]).is_err());
        assert!(health_body_for("[1]", &[]).is_err());
    }
}
