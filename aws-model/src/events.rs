//! Synthetic interruption events, in the exact shapes EC2, AWS Health and FIS produce them: what
//! `routerctl simulate`, the demo and the benchmarks send. Every builder returns a complete
//! EventBridge event (the form a rule delivers to a queue or a function);
//! `aws_clients::events::PutEvents` gives the same event as an EventBridge PutEvents entry.

use std::time::{SystemTime, UNIX_EPOCH};

use router_core::event::Kind;
use serde_json::{Value, json};

/// A synthetic event and the instances it names.
#[derive(Debug, Clone)]
pub struct Synthetic {
    pub kind: Kind,
    pub id: String,
    pub instances: Vec<String>,
    pub event: Value,
}

impl Synthetic {
    pub fn body(&self) -> String {
        self.event.to_string()
    }
}

/// Where synthetic events claim to come from.
#[derive(Debug, Clone)]
pub struct Origin {
    pub account: String,
    pub region: String,
}

impl Origin {
    fn envelope(&self, kind: Kind, id: &str, resources: Value, detail: Value) -> Value {
        json!({
            "version": "0",
            "id": id,
            "detail-type": kind.detail_type(),
            "source": kind.source(),
            "account": self.account,
            "time": rfc3339(SystemTime::now()),
            "region": self.region,
            "resources": resources,
            "detail": detail,
        })
    }

    fn instance_arn(&self, instance: &str) -> String {
        format!(
            "arn:aws:ec2:{}:{}:instance/{instance}",
            self.region, self.account
        )
    }

    fn single(&self, kind: Kind, instance: &str, id: &str, detail: Value) -> Synthetic {
        let event = self.envelope(kind, id, json!([self.instance_arn(instance)]), detail);
        Synthetic {
            kind,
            id: id.to_owned(),
            instances: vec![instance.to_owned()],
            event,
        }
    }

    /// EC2 Spot Instance Interruption Warning (also what a FIS spot experiment sends).
    pub fn spot_warning(&self, instance: &str, id: &str) -> Synthetic {
        self.single(
            Kind::SpotInterruption,
            instance,
            id,
            json!({"instance-id": instance, "instance-action": "terminate"}),
        )
    }

    pub fn rebalance(&self, instance: &str, id: &str) -> Synthetic {
        self.single(
            Kind::RebalanceRecommendation,
            instance,
            id,
            json!({"instance-id": instance}),
        )
    }

    pub fn state_change(&self, instance: &str, state: &str, id: &str) -> Synthetic {
        self.single(
            Kind::StateChange,
            instance,
            id,
            json!({"instance-id": instance, "state": state}),
        )
    }

    pub fn capacity_reservation(&self, instance: &str, id: &str) -> Synthetic {
        let termination = rfc3339(SystemTime::now() + std::time::Duration::from_secs(120));
        self.single(
            Kind::CapacityReservationInterruption,
            instance,
            id,
            json!({"instance-id": instance, "instance-action": "terminate", "instance-termination-time": termination}),
        )
    }

    /// AWS Health EC2 scheduled change (instance retirement) naming several instances.
    pub fn scheduled_change(&self, instances: &[String], id: &str) -> Synthetic {
        let entities: Vec<Value> = instances
            .iter()
            .map(|i| json!({"entityValue": i, "status": "PENDING"}))
            .collect();
        let detail = json!({
            "eventArn": format!("arn:aws:health:{}::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/{id}", self.region),
            "service": "EC2",
            "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
            "eventTypeCategory": "scheduledChange",
            "eventScopeCode": "ACCOUNT_SPECIFIC",
            "communicationId": format!("{id}-1"),
            "startTime": "Mon, 30 Nov 2026 10:00:00 GMT",
            "statusCode": "upcoming",
            "eventRegion": self.region,
            "eventDescription": [{"language": "en_US", "latestDescription": "Instance retirement scheduled."}],
            "affectedEntities": entities,
            "affectedAccount": self.account,
            "page": "1",
            "totalPages": "1",
            "backupEvent": "false",
        });
        let event = self.envelope(Kind::ScheduledChange, id, json!(instances), detail);
        Synthetic {
            kind: Kind::ScheduledChange,
            id: id.to_owned(),
            instances: instances.to_vec(),
            event,
        }
    }

    /// What a FIS `aws:ec2:send-spot-instance-interruptions` experiment makes EC2 send for one
    /// instance, in order: a rebalance recommendation, the two-minute warning, then the instance
    /// stopping and terminating.
    pub fn spot_experiment(&self, instance: &str, id_prefix: &str) -> Vec<Synthetic> {
        vec![
            self.rebalance(instance, &format!("{id_prefix}-rebalance")),
            self.spot_warning(instance, &format!("{id_prefix}-warning")),
            self.state_change(instance, "stopping", &format!("{id_prefix}-stopping")),
            self.state_change(instance, "terminated", &format!("{id_prefix}-terminated")),
        ]
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC), as EventBridge writes `time`.
pub fn rfc3339(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = router_core::event::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use router_core::event::{Classified, classify, rfc3339_unix_millis};

    use super::*;

    #[test]
    fn rfc3339_round_trips_through_the_routers_parser() {
        for secs in [0, 951_782_400, 1_709_164_800, 1_793_534_400, 4_102_444_799] {
            let at = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(
                rfc3339_unix_millis(&rfc3339(at)),
                Some(secs as i64 * 1000),
                "{}",
                rfc3339(at)
            );
        }
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_793_534_400)),
            "2026-11-01T12:00:00Z"
        );
    }

    #[test]
    fn every_synthetic_event_is_routed_by_the_router_to_its_instances() {
        let origin = Origin {
            account: "123456789012".into(),
            region: "us-east-1".into(),
        };
        let a = "i-0123456789abcdef0";
        let b = "i-0123456789abcdef1";
        let mut all = origin.spot_experiment(a, "x");
        all.push(origin.capacity_reservation(a, "cap"));
        all.push(origin.scheduled_change(&[a.to_owned(), b.to_owned()], "health"));
        for s in all {
            match classify(&s.body()).unwrap() {
                Classified::Route(i) => {
                    assert_eq!(i.kind, s.kind);
                    assert_eq!(
                        i.instances.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
                        s.instances
                    );
                }
                other => panic!("{}: {other:?}", s.id),
            }
        }
    }
}
