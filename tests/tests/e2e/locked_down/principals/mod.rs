//! Every principal on an interruption's path, locked down: with `KmsKey=Create` and a
//! permissions boundary each can still do its part, decided as KMS and IAM decide
//! (`aws_model::access`) on the rendered key, role and queue policies: EventBridge delivering
//! into the ingest queue and the DLQ, the router role receiving from the ingest queue (the event
//! source mapping reads as the function's role) and writing dead letters and tenant queues, the
//! spoke role writing a member account's tenant queue, Karpenter's controller role reading its
//! queue. And each is refused when the statement it needs is missing from the key policy, its
//! own policy or its boundary.
//!
//! The boundary is what a platform team would write for these roles: exactly what the stacks
//! grant (each role's own Allow statements), plus the two KMS actions a key policy grants the
//! router's sender by name, which a boundary caps too.
//!
//! * [`delivery`]: EventBridge into the encrypted ingest queue and DLQ, and the keys
//!   CloudFormation refuses;
//! * [`roles`]: the router role, the spoke role and Karpenter's role, each within its boundary.

use anyhow::Result;
use aws_model::{
    access::{Identity, ResourcePolicy, authorize_role, authorize_service},
    policy::{Decision, Policy, Request, strings},
    stacks::{BASE_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{Deployment, Stage},
};
use interruption_router::{accounts::Sender, config::Config};
use serde_json::{Value, json};

use super::super::permissions::{
    BASE_STACK, HOME, HUB, MEMBER, SPOKE_STACK, document, hub_stage, resolved, role_policies,
    template,
};

mod delivery;
mod roles;

const HUB_BOUNDARY: &str = "arn:aws:iam::123456789012:policy/platform/boundary";
const MEMBER_BOUNDARY: &str = "arn:aws:iam::111111111111:policy/platform/boundary";
const EVENTS: &str = "events.amazonaws.com";
const CLUSTER: &str = "alpha";
/// The member accounts keep their roles under a path, the spoke role included.
const SPOKE_ROLE_PATH: &str = "/platform/spokes/";

/// A tenant queue with its own key, where the router sends as `sender`.
struct TenantQueue {
    account: &'static str,
    queue: String,
    queue_policy: Policy,
    key: Policy,
    key_arn: String,
    /// Karpenter's grant (KarpenterQueueAccess).
    karpenter: Policy,
}

/// The stacks rendered for a hub serving one member account, locked down.
struct Rendered {
    router_arn: String,
    router_policies: Vec<Policy>,
    spoke_arn: String,
    spoke_policies: Vec<Policy>,
    /// The router's configuration as the hub stack sets its environment.
    router_config: Config,
    base_key: Policy,
    base_key_arn: String,
    ingest: String,
    dlq: String,
    /// The ingest queue's and the DLQ's policies (which rules may send).
    ingest_policy: Policy,
    dlq_policy: Policy,
    rules: Vec<String>,
    hub_tenant: TenantQueue,
    member_tenant: TenantQueue,
}

fn arn_of(d: &Deployment<'_>, logical: &str) -> String {
    resolved(d, json!({"Fn::GetAtt": [logical, "Arn"]}))
}

fn tenant(
    account: &'static str,
    exports: std::collections::BTreeMap<String, String>,
) -> TenantQueue {
    let mut stage = Stage::new("alpha-tenant", account, HOME)
        .parameter("ClusterName", CLUSTER)
        .parameter("KmsKey", "Create")
        .parameter("KarpenterRoleName", "KarpenterControllerRole-alpha");
    stage.exports = exports;
    let t = template("tenant.yaml", TENANT_TEMPLATE);
    let d = t.deploy(&stage).unwrap();
    let key_arn = arn_of(&d, "QueueKey");
    assert_eq!(
        d.property("InterruptionQueue", &["KmsMasterKeyId"])
            .unwrap(),
        json!(key_arn),
        "the tenant queue is encrypted with the stack's key"
    );
    TenantQueue {
        account,
        queue: arn_of(&d, "InterruptionQueue"),
        queue_policy: document(&d, "InterruptionQueuePolicy", &["PolicyDocument"]),
        key: document(&d, "QueueKey", &["KeyPolicy"]),
        key_arn,
        karpenter: document(&d, "KarpenterQueueAccess", &["PolicyDocument"]),
    }
}

fn render() -> Rendered {
    let base = template("base.yaml", BASE_TEMPLATE);
    let stage = hub_stage(MEMBER, "")
        .parameter("KmsKey", "Create")
        .parameter("PermissionsBoundary", "platform/boundary")
        .parameter("RolePath", "/platform/")
        .parameter("SpokeRolePath", SPOKE_ROLE_PATH);
    let hub = base.deploy(&stage).unwrap();
    let environment = hub
        .property("RouterFunction", &["Environment", "Variables"])
        .unwrap();
    let router_config = Config::from_lookup(|var| {
        environment
            .get(var)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
    })
    .unwrap();
    assert_eq!(
        hub.property("RouterRole", &["PermissionsBoundary"])
            .unwrap(),
        json!(HUB_BOUNDARY)
    );
    let base_key_arn = arn_of(&hub, "QueueKey");
    for queue in ["IngestQueue", "DeadLetterQueue"] {
        assert_eq!(
            hub.property(queue, &["KmsMasterKeyId"]).unwrap(),
            json!(base_key_arn),
            "{queue} is encrypted with the stack's key"
        );
        assert_eq!(
            hub.property(queue, &["SqsManagedSseEnabled"]).unwrap(),
            json!(false)
        );
    }
    let mut rules = Vec::new();
    for (id, _) in base.resources_of("AWS::Events::Rule") {
        if hub.properties(id).unwrap().is_some() {
            rules.push(arn_of(&hub, id));
        }
    }
    assert_eq!(rules.len(), 10, "five rules on each bus");
    let router_arn = arn_of(&hub, "RouterRole");
    assert!(router_arn.contains(":role/platform/"), "{router_arn}");

    let spoke_template = template("spoke.yaml", SPOKE_TEMPLATE);
    let spoke_stage = Stage::new(SPOKE_STACK, MEMBER, HOME)
        .parameter(
            "HubEventBusArn",
            &hub.output("HubEventBusArn").unwrap().unwrap(),
        )
        .parameter("RouterRoleArn", &router_arn)
        .parameter("PermissionsBoundary", "platform/boundary")
        .parameter("RolePath", "/platform/")
        .parameter("SpokeRolePath", SPOKE_ROLE_PATH);
    let spoke = spoke_template.deploy(&spoke_stage).unwrap();
    assert_eq!(
        spoke.property("SpokeRole", &["Path"]).unwrap(),
        json!(SPOKE_ROLE_PATH)
    );
    for role in ["SpokeRole", "ForwardToHubRole"] {
        assert_eq!(
            spoke.property(role, &["PermissionsBoundary"]).unwrap(),
            json!(MEMBER_BOUNDARY)
        );
    }
    Rendered {
        spoke_arn: spoke.output("SpokeRoleArn").unwrap().unwrap(),
        spoke_policies: role_policies(&spoke, "SpokeRole"),
        router_config,
        router_policies: role_policies(&hub, "RouterRole"),
        base_key: document(&hub, "QueueKey", &["KeyPolicy"]),
        base_key_arn,
        ingest: arn_of(&hub, "IngestQueue"),
        dlq: arn_of(&hub, "DeadLetterQueue"),
        ingest_policy: document(&hub, "IngestQueuePolicy", &["PolicyDocument"]),
        dlq_policy: document(&hub, "DeadLetterQueuePolicy", &["PolicyDocument"]),
        rules,
        hub_tenant: tenant(HUB, hub.exports().unwrap()),
        member_tenant: tenant(MEMBER, spoke.exports().unwrap()),
        router_arn,
    }
}

/// A policy with `keep` deciding which statements stay.
fn filtered(policy: &Policy, keep: impl Fn(&Value) -> Value) -> Policy {
    let statements: Vec<Value> = policy
        .statements()
        .iter()
        .map(keep)
        .filter(|s| !s.is_null())
        .collect();
    let doc = json!({"Version": "2012-10-17", "Statement": statements});
    Policy::parse(policy.source.clone(), &doc.to_string()).unwrap()
}

/// `policy` without its statement `sid`.
fn without_statement(policy: &Policy, sid: &str) -> Policy {
    let before = policy.statements().len();
    let p = filtered(policy, |s| {
        if s["Sid"] == sid {
            Value::Null
        } else {
            s.clone()
        }
    });
    assert_eq!(
        p.statements().len() + 1,
        before,
        "{} has a statement {sid}",
        policy.source
    );
    p
}

/// `policy` with `action` left out of every statement.
fn without_action(policy: &Policy, action: &str) -> Policy {
    filtered(policy, |s| {
        let mut s = s.clone();
        let actions: Vec<String> = strings(&s["Action"])
            .into_iter()
            .filter(|a| !a.eq_ignore_ascii_case(action))
            .collect();
        if actions.is_empty() {
            return Value::Null;
        }
        s["Action"] = json!(actions);
        s
    })
}

/// The boundary of a role: its own Allow statements, and the KMS actions a key policy may grant
/// it by name.
fn boundary_for(own: &[Policy], account: &str) -> Policy {
    let mut statements: Vec<Value> = own
        .iter()
        .flat_map(|p| p.statements())
        .filter(|s| s["Effect"] == "Allow")
        .map(|s| json!({"Effect": "Allow", "Action": s["Action"], "Resource": s["Resource"]}))
        .collect();
    statements.push(json!({"Sid": "QueueKeysThroughSqs", "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": format!("arn:aws:kms:*:{account}:key/*")}));
    let doc = json!({"Version": "2012-10-17", "Statement": statements});
    Policy::parse("boundary", &doc.to_string()).unwrap()
}

/// What SQS tells KMS when `principal` in `account` sends or receives (SQS calls KMS on its
/// caller's behalf, so kms:ViaService names SQS in the queue's region).
fn via_sqs<'a>(account: &'a str, principal: &'a str) -> [(&'a str, &'a str); 4] {
    [
        ("kms:ViaService", "sqs.us-east-1.amazonaws.com"),
        ("kms:CallerAccount", account),
        ("aws:PrincipalArn", principal),
        ("aws:SecureTransport", "true"),
    ]
}

fn request<'a>(
    action: &'a str,
    resource: &'a str,
    context: &'a [(&'a str, &'a str)],
) -> Request<'a> {
    Request {
        principal: aws_model::policy::Principal::Attached,
        action,
        resource,
        context,
    }
}

fn use_key(
    role: &Identity<'_>,
    key: &Policy,
    account: &str,
    action: &str,
    key_arn: &str,
) -> Decision {
    let context = via_sqs(account, role.arn);
    authorize_role(
        role,
        key,
        ResourcePolicy::Key,
        account,
        &request(action, key_arn, &context),
    )
}

/// An action, its resource and the condition keys its request carries.
type Operation<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

const PRODUCE: [&str; 2] = ["kms:GenerateDataKey", "kms:Decrypt"];
