//! The router's decisions, proven on the model of AWS (aws-world's, the one routerctl's tests run
//! on too) behind the router's seam, in paused time: no emulator, no network, no waiting. Each file is one concern; each test plays an invocation (or several, as
//! an event source mapping would) through [`Router::invoke`], the handler the Lambda runs.

mod accounts;
mod batches;
mod dead_letters;
mod deployed;
mod direct;
mod health;
mod insights;
mod kinds;
mod lookups;
mod tenancy;
mod timing;
mod world;

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json, value::RawValue};

use self::world::{EPOCH_MS, HUB, REGION, WorldAws, url};
use aws_model::esm;
use router_core::{
    config::Config,
    handler::{Answered, Invocation, Router},
};

pub const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:111111111111:function:interruption-router";
pub const DLQ: &str = "interruption-router-dlq";
pub const INGEST_ARN: &str = "arn:aws:sqs:us-east-1:111111111111:interruption-router-ingest";
/// The base stack's direct queue (CentralBus=Enabled).
pub const DIRECT_ARN: &str = "arn:aws:sqs:us-east-1:111111111111:interruption-router-direct";
/// The base stack's function timeout.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// An AWS with the hub's dead-letter queue.
/// One cluster, alpha, at home: its tenant stack and one node, `i-0a000001`.
pub fn alpha() -> Arc<WorldAws> {
    let aws = aws();
    aws.tenant(HUB, REGION, "alpha");
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    aws
}

/// Record `n`: a spot warning for alpha's node.
pub fn alpha_warning(n: &str) -> Msg {
    Msg::new(n, spot(n, "i-0a000001", HUB, REGION))
}

pub fn aws() -> Arc<WorldAws> {
    let aws = Arc::new(world::hub());
    aws.queue(HUB, REGION, DLQ, &[], None);
    aws
}

/// A router configured as base.yaml configures it (a dead-letter queue, 20 receives, every
/// account served), with `vars` on top (an empty value unsets a variable).
pub fn router(aws: &Arc<WorldAws>, vars: &[(&str, &str)]) -> Router<WorldAws> {
    let dlq = url(HUB, REGION, DLQ);
    let defaults = [
        ("DEAD_LETTER_QUEUE_URL", dlq.as_str()),
        ("MAX_RECEIVE_COUNT", "20"),
        ("SERVED_ACCOUNTS", "*"),
    ];
    let config = Config::from_lookup(|name| {
        vars.iter()
            .chain(defaults.iter())
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
            .filter(|v| !v.is_empty())
    })
    .expect("a valid configuration");
    Router::new(&config, aws.clone(), REGION, "interruption-router".into())
}

/// One SQS record of the ingest queue.
#[derive(Debug, Clone)]
pub struct Msg {
    pub id: String,
    pub body: String,
    pub receive_count: u32,
    /// When the event source mapping first received it, ms since the epoch.
    pub first_receive_ms: u64,
    /// The queue it came from (the ingest queue unless [`Msg::direct`]).
    pub queue_arn: &'static str,
    /// SQS's SenderId of it.
    pub sender_id: Option<String>,
}

impl Msg {
    pub fn new(id: &str, body: String) -> Self {
        Self {
            id: id.into(),
            body,
            receive_count: 1,
            first_receive_ms: EPOCH_MS,
            queue_arn: INGEST_ARN,
            sender_id: Some("AIDAEVENTBRIDGE".into()),
        }
    }

    /// The same record from the direct queue, sent by `sender` (a SenderId, or none).
    pub fn direct(mut self, sender: Option<&str>) -> Self {
        self.queue_arn = DIRECT_ARN;
        self.sender_id = sender.map(str::to_owned);
        self
    }

    pub fn receive(mut self, count: u32) -> Self {
        self.receive_count = count;
        self
    }
}

/// A spot interruption warning for `instance` in (account, region).
pub fn spot(id: &str, instance: &str, account: &str, region: &str) -> String {
    json!({
        "version": "0", "id": id, "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": account, "time": "2026-11-27T21:46:40Z",
        "region": region, "resources": [format!("arn:aws:ec2:{region}:{account}:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    })
    .to_string()
}

/// An EC2 event of another kind for `instance`: `detail-type` and the detail's extra fields.
pub fn ec2(id: &str, detail_type: &str, instance: &str, detail: Value) -> String {
    let mut detail = detail;
    detail["instance-id"] = json!(instance);
    json!({
        "version": "0", "id": id, "detail-type": detail_type, "source": "aws.ec2",
        "account": HUB, "time": "2026-11-27T21:46:40Z", "region": REGION,
        "resources": [format!("arn:aws:ec2:{REGION}:{HUB}:instance/{instance}")], "detail": detail
    })
    .to_string()
}

/// An AWS Health EC2 scheduled change naming `instances`.
pub fn health(id: &str, instances: &[&str], account: &str, region: &str) -> String {
    let entities: Vec<Value> = instances
        .iter()
        .map(|i| json!({"entityValue": i}))
        .collect();
    json!({
        "version": "0", "id": id, "detail-type": "AWS Health Event", "source": "aws.health",
        "account": account, "time": "2026-11-27T21:46:40Z", "region": region, "resources": instances,
        "detail": {"eventArn": "arn:aws:health:us-east-1::event/EC2/x", "service": "EC2",
                   "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                   "eventTypeCategory": "scheduledChange", "affectedEntities": entities}
    })
    .to_string()
}

/// The world's view of the queue an ARN names.
fn queue_of(aws: &WorldAws, arn: &str) -> (aws_world::World, String) {
    let parts: Vec<&str> = arn.split(':').collect();
    let view = aws.world().at(parts[4]).in_region(parts[3]);
    (view, parts[5].to_owned())
}

/// The SQS event of `records`, as the event source mapping hands it over: each record received
/// from its queue in the world (the ingest or the direct queue), so its receipt handle is one
/// SQS would accept.
pub fn sqs_event(aws: &WorldAws, records: &[Msg]) -> Box<RawValue> {
    let handles: Vec<String> = records
        .iter()
        .map(|m| {
            let (view, queue) = queue_of(aws, m.queue_arn);
            view.mapping_receive(&queue, &m.id, &m.body)
                .unwrap_or_else(|| format!("rh-{}", m.id))
        })
        .collect();
    let event = esm::sqs_event(records.iter().zip(&handles).map(|(m, handle)| {
        let mut attributes = vec![
            (
                "ApproximateReceiveCount".to_owned(),
                m.receive_count.to_string(),
            ),
            (
                "ApproximateFirstReceiveTimestamp".to_owned(),
                m.first_receive_ms.to_string(),
            ),
            ("SentTimestamp".to_owned(), EPOCH_MS.to_string()),
        ];
        if let Some(sender) = &m.sender_id {
            attributes.push(("SenderId".to_owned(), sender.clone()));
        }
        esm::Record {
            message_id: &m.id,
            receipt_handle: handle,
            body: &m.body,
            attributes,
            md5_of_body: "",
            queue_arn: m.queue_arn,
            region: REGION,
        }
    }));
    RawValue::from_string(event.to_string()).unwrap()
}

/// One invocation of `router` with `records`, with the base stack's timeout.
pub async fn invoke(router: &Router<WorldAws>, aws: &WorldAws, records: &[Msg]) -> Answered {
    invoke_with(router, aws, records, TIMEOUT).await
}

/// One invocation as the event source mapping makes it: the records received, the function
/// invoked, and what it did not hand back deleted from the queue.
pub async fn invoke_with(
    router: &Router<WorldAws>,
    aws: &WorldAws,
    records: &[Msg],
    timeout: Duration,
) -> Answered {
    use router_core::aws::Aws;
    let now_ms = aws
        .now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let invocation = Invocation {
        request_id: "req",
        function_arn: FUNCTION_ARN,
        deadline_ms: now_ms + timeout.as_millis() as u64,
    };
    let event = sqs_event(aws, records);
    let answered = router.invoke(&event, invocation).await;
    let ids: Vec<&str> = records.iter().map(|m| m.id.as_str()).collect();
    let left = esm::left(
        match &answered.response {
            Ok(response) => esm::Answer::Response(Some(response)),
            Err(_) => esm::Answer::Error,
        },
        &ids,
    );
    let event: Value = serde_json::from_str(event.get()).unwrap();
    for record in event["Records"].as_array().into_iter().flatten() {
        if !left.keeps(record["messageId"].as_str().unwrap()) {
            let (view, queue) = queue_of(aws, record["eventSourceARN"].as_str().unwrap());
            view.mapping_delete(&queue, record["receiptHandle"].as_str().unwrap());
        }
    }
    answered
}

/// One invocation with `payload` handed to the function directly (an operator's invoke or a
/// replay: no event source mapping, so no receipt handle and each record's outcome answered).
pub async fn invoke_directly(
    router: &Router<WorldAws>,
    aws: &WorldAws,
    payload: &RawValue,
) -> Answered {
    use router_core::aws::Aws;
    let now_ms = aws
        .now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let invocation = Invocation {
        request_id: "replay",
        function_arn: FUNCTION_ARN,
        deadline_ms: now_ms + TIMEOUT.as_millis() as u64,
    };
    router.invoke(payload, invocation).await
}

/// The `SenderId` SQS gives the router's own sends (its role's id and session).
pub const ROUTER_SENDER: &str = "AROAROUTERROLE000001:interruption-router";

/// What the replay loop of docs/operating.md ("Replaying the DLQ") hands the function for one
/// dead letter: the loop's own jq program, read from the doc and run by jq on the message as
/// `aws sqs receive-message --attribute-names SenderId --message-attribute-names All` prints it.
pub fn replay_batch(held: &aws_world::router::Held, id: &str) -> Box<RawValue> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operating.md"))
        .expect("docs/operating.md");
    let open = "  jq -c '.Messages[0] | .MessageAttributes as $a";
    let start = doc
        .find(open)
        .expect("the replay loop's jq program in docs/operating.md")
        + "  jq -c '".len();
    let end = start
        + doc[start..]
            .find("' \\\n")
            .expect("the program's closing quote");
    let program = &doc[start..end];
    let attributes: serde_json::Map<String, Value> = held
        .attributes
        .iter()
        .map(|(k, v)| (k.clone(), json!({"StringValue": v, "DataType": "String"})))
        .collect();
    let received = json!({"Messages": [{
        "MessageId": id, "ReceiptHandle": format!("rh-{id}"), "Body": held.body,
        "Attributes": {"SenderId": ROUTER_SENDER}, "MessageAttributes": attributes,
    }]});
    let mut jq = std::process::Command::new("jq")
        .args(["-c", program])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("jq runs (the replay loop is a jq program; install jq)");
    use std::io::Write;
    jq.stdin
        .take()
        .unwrap()
        .write_all(received.to_string().as_bytes())
        .unwrap();
    let out = jq.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "jq: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    RawValue::from_string(String::from_utf8(out.stdout).unwrap().trim().to_owned()).unwrap()
}

/// The message ids the invocation handed back.
pub fn handed_back(answered: &Answered) -> Vec<String> {
    let response = answered.response.as_ref().expect("an SQS batch response");
    response["batchItemFailures"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["itemIdentifier"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The `reason` attribute of each message in the dead-letter queue.
pub fn dead_letter_reasons(aws: &WorldAws) -> Vec<String> {
    aws.held(HUB, REGION, DLQ)
        .iter()
        .map(|m| {
            m.attributes
                .iter()
                .find(|(k, _)| k == "reason")
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        })
        .collect()
}

/// Total of a per-key metric.
pub fn sum(map: &std::collections::BTreeMap<String, u64>) -> u64 {
    map.values().sum()
}
