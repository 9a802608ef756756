//! Every IAM and resource policy document the templates create (the four stacks' and the
//! deployer's), rendered for deployments
//! that between them take every branch of every condition a policy depends on, one JSON object
//! per line: what `make lint` hands the IAM policy linters (tools/lint_policies.py).
//!
//! Rendering uses the project's own template reader (`aws_model::template`), so the linters see
//! the documents CloudFormation would create, with real ARNs in place of intrinsic functions.
//! A condition that keeps one value in every scenario below would leave a branch unlinted: that
//! stops the program, naming the condition, rather than passing in silence.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, bail};
use aws_model::{
    stacks::{BASE_TEMPLATE, DEPLOYER_TEMPLATE, FIS_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{Deployment, Stage, Template},
};
use serde_json::{Value, json};

const HUB: &str = "123456789012";
const MEMBER: &str = "111111111111";
const REGION: &str = "us-east-1";
const BASE: &str = "interruption-router";
const SPOKE: &str = "interruption-router-spoke";
const ROUTER_ROLE: &str = "arn:aws:iam::123456789012:role/interruption-router-RouterRole-SAMPLE";

/// The deployments each template is rendered for.
fn scenarios() -> Vec<(&'static str, &'static str, Stage)> {
    let base = || Stage::new(BASE, HUB, REGION).parameter("CodeS3Bucket", "artifacts");
    const ALARMS: &str = "arn:aws:sns:us-east-1:123456789012:interruption-router-AlarmTopic-X";
    let tenant = || {
        Stage::new("interruption-router-tenant-alpha", HUB, REGION)
            .parameter("ClusterName", "alpha")
            .export("interruption-router:RouterRoleArn", ROUTER_ROLE)
            .export("interruption-router:QueuePrefix", "karpenter-")
            .export(&format!("{BASE}-RouterRoleArn"), ROUTER_ROLE)
            .export(&format!("{BASE}-QueuePrefix"), "karpenter-")
            .export("interruption-router:AlarmTopicArn", ALARMS)
            .export(&format!("{BASE}-AlarmTopicArn"), ALARMS)
    };
    let spoke = || {
        Stage::new(SPOKE, MEMBER, REGION)
            .parameter(
                "HubEventBusArn",
                "arn:aws:events:us-east-1:123456789012:event-bus/interruption-router-hub",
            )
            .parameter("RouterRoleArn", ROUTER_ROLE)
    };
    vec![
        ("base.yaml", "defaults", base()),
        (
            "base.yaml",
            "tuned lookups",
            base()
                .parameter("SweepIntervalSeconds", "0")
                .parameter("LookupHedgeDelayMs", "off")
                .parameter("Ec2SuspectAfterFailures", "3")
                .parameter("Ec2SuspectSeconds", "60"),
        ),
        (
            "base.yaml",
            "alarm topic, a build of one's own",
            base()
                .parameter(
                    "CodeS3Key",
                    "interruption-router/bootstrap-arm64-0123456789abcdef.zip",
                )
                .parameter("AlarmTopicArn", "arn:aws:sns:us-east-1:123456789012:alarms"),
        ),
        (
            "base.yaml",
            "hub of two accounts",
            base()
                .parameter("CentralBus", "Enabled")
                .parameter("ServedAccounts", "111111111111,222222222222"),
        ),
        (
            "base.yaml",
            "hub of an organisation",
            base()
                .parameter("CentralBus", "Enabled")
                .parameter("ServedAccounts", "*")
                .parameter("OrganizationId", "o-abcd123456"),
        ),
        (
            "base.yaml",
            "locked down: its own key, a boundary and a path",
            base()
                .parameter("KmsKey", "Create")
                .parameter("PermissionsBoundary", "platform/boundary")
                .parameter("RolePath", "/platform/"),
        ),
        (
            "base.yaml",
            "locked-down hub: a served account's spoke role under a path",
            base()
                .parameter("CentralBus", "Enabled")
                .parameter("ServedAccounts", MEMBER)
                .parameter("KmsKey", "Create")
                .parameter("PermissionsBoundary", "platform/boundary")
                .parameter("SpokeRolePath", "/platform/spokes/"),
        ),
        (
            "base.yaml",
            "the organisation's own key",
            base().parameter(
                "KmsKey",
                "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            ),
        ),
        ("tenant.yaml", "importing the region's exports", tenant()),
        (
            "tenant.yaml",
            "a role Karpenter reads as whose own policies grant it the queue",
            tenant().parameter(
                "ReaderRoleArn",
                "arn:aws:iam::123456789012:role/alpha-karpenter",
            ),
        ),
        (
            "tenant.yaml",
            "the organisation's own key, Karpenter's role",
            tenant()
                .parameter(
                    "KmsKey",
                    "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
                )
                .parameter("KarpenterRoleName", "alpha-karpenter"),
        ),
        (
            "tenant.yaml",
            "its own key, Karpenter's role",
            tenant()
                .parameter("KmsKey", "Create")
                .parameter("KarpenterRoleName", "alpha-karpenter"),
        ),
        (
            "tenant.yaml",
            "importing a named stack's exports",
            tenant().parameter("BaseStackName", BASE),
        ),
        (
            "tenant.yaml",
            "a cluster name too long for its queue name",
            tenant()
                .parameter("ClusterName", &"a".repeat(100))
                .parameter(
                    "QueueName",
                    &format!("karpenter-{}-28165978", "a".repeat(61)),
                ),
        ),
        (
            "tenant.yaml",
            "explicit sender and prefix, Karpenter's role",
            tenant()
                .parameter("RouterRoleArn", ROUTER_ROLE)
                .parameter("QueuePrefix", "karpenter-")
                .parameter("KarpenterRoleName", "alpha-karpenter")
                .parameter("AlarmTopicArn", "arn:aws:sns:us-east-1:123456789012:alarms"),
        ),
        ("spoke.yaml", "creating the spoke role", spoke()),
        (
            "spoke.yaml",
            "locked down: a boundary and a path",
            spoke()
                .parameter("PermissionsBoundary", "platform/boundary")
                .parameter("RolePath", "/platform/")
                .parameter("SpokeRolePath", "/platform/spokes/")
                .parameter("AlarmTopicArn", "arn:aws:sns:us-east-1:111111111111:alarms")
                .parameter(
                    "KmsKey",
                    "arn:aws:kms:us-east-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab,\
                     arn:aws:kms:eu-west-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ac",
                ),
        ),
        (
            "spoke.yaml",
            "another region",
            spoke().parameter("CreateSpokeRole", "false"),
        ),
        (
            "spoke.yaml",
            "the hub's region, rules writing its direct queue",
            spoke().parameter(
                "HubDirectQueueArn",
                "arn:aws:sqs:us-east-1:999999999999:interruption-router-direct",
            ),
        ),
        (
            "fis.yaml",
            "default",
            Stage::new("interruption-router-fis-alpha", HUB, REGION)
                .parameter("ClusterName", "alpha"),
        ),
        (
            "fis.yaml",
            "locked down: a boundary and a path",
            Stage::new("interruption-router-fis-alpha", HUB, REGION)
                .parameter("ClusterName", "alpha")
                .parameter("PermissionsBoundary", "platform/boundary")
                .parameter("RolePath", "/platform/"),
        ),
        (
            "deployer.yaml",
            "default names",
            Stage::new("interruption-router-deployer", HUB, REGION)
                .parameter("ArtifactBucket", "artifacts"),
        ),
        (
            "deployer.yaml",
            "other names",
            Stage::new("ir-deployer", HUB, REGION)
                .parameter("ArtifactBucket", "platform-artifacts-eu-west-1")
                .parameter("ArtifactPrefix", "releases/interruption-router")
                .parameter("StackName", "ir")
                .parameter("SpokeStackName", "ir-spoke")
                .parameter("SpokeRoleName", "ir-spoke")
                .parameter("RuleNamePrefix", "ir")
                .parameter("QueuePrefix", "kq-"),
        ),
        (
            // The longest names a deployment may give (a bucket name's 63 characters, a deep
            // prefix), so that a managed policy's 6,144-character limit is measured at its worst.
            "deployer.yaml",
            "the longest names",
            Stage::new("interruption-router-deployer", HUB, REGION)
                .parameter("ArtifactBucket", &"platform-artifacts-".repeat(4)[..63])
                .parameter(
                    "ArtifactPrefix",
                    "platform/releases/eu-west-1/interruption-router",
                )
                .parameter("StackName", "interruption-router-production-hub")
                .parameter("SpokeStackName", "interruption-router-production-spoke")
                .parameter(
                    "PermissionsBoundary",
                    "platform/boundaries/interruption-router",
                ),
        ),
        (
            "deployer.yaml",
            "locked down: a boundary on every role",
            Stage::new("interruption-router-deployer", HUB, REGION)
                .parameter("ArtifactBucket", "artifacts")
                .parameter("PermissionsBoundary", "platform/boundary"),
        ),
    ]
}

/// One document to lint.
struct Document {
    resource: String,
    policy: String,
    /// `IDENTITY_POLICY`, `TRUST_POLICY` or `RESOURCE_POLICY`, as the linters name them.
    kind: &'static str,
    /// The resource a trust policy is on (its role), which a linter may need as `Resource`.
    role_arn: Option<String>,
    document: Value,
}

fn documents(d: &Deployment<'_>) -> Result<Vec<Document>> {
    let mut out = Vec::new();
    let mut add = |resource: &str, policy: String, kind, role_arn, document: Value| {
        if document.is_object() {
            out.push(Document {
                resource: resource.to_owned(),
                policy,
                kind,
                role_arn,
                document,
            });
        }
    };
    for (logical, resource) in d.template.resources() {
        let Some(props) = d.properties(logical)? else {
            continue;
        };
        let attribute = |name: &str| -> Result<String> {
            let v = d.resolve(&json!({"Fn::GetAtt": [logical, name]}))?;
            Ok(v.and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default())
        };
        match resource["Type"].as_str().unwrap_or_default() {
            "AWS::IAM::Role" => {
                let arn = attribute("Arn")?;
                add(
                    logical,
                    "AssumeRolePolicyDocument".into(),
                    "TRUST_POLICY",
                    Some(arn),
                    props["AssumeRolePolicyDocument"].clone(),
                );
                for p in props["Policies"].as_array().into_iter().flatten() {
                    let name = p["PolicyName"].as_str().unwrap_or("inline").to_owned();
                    add(
                        logical,
                        format!("Policies[{name}]"),
                        "IDENTITY_POLICY",
                        None,
                        p["PolicyDocument"].clone(),
                    );
                }
            }
            "AWS::IAM::Policy" | "AWS::IAM::ManagedPolicy" => add(
                logical,
                "PolicyDocument".into(),
                "IDENTITY_POLICY",
                None,
                props["PolicyDocument"].clone(),
            ),
            "AWS::KMS::Key" => add(
                logical,
                "KeyPolicy".into(),
                "RESOURCE_POLICY",
                None,
                props["KeyPolicy"].clone(),
            ),
            "AWS::SQS::QueuePolicy" => add(
                logical,
                "PolicyDocument".into(),
                "RESOURCE_POLICY",
                None,
                props["PolicyDocument"].clone(),
            ),
            "AWS::Events::EventBus" => add(
                logical,
                "Policy".into(),
                "RESOURCE_POLICY",
                None,
                props["Policy"].clone(),
            ),
            // The statement AddPermission writes into the function's policy. (Lambda spells the
            // keys AWS:SourceArn; condition key names are case-insensitive, and the linters'
            // databases spell them aws:.)
            "AWS::Lambda::Permission" => {
                let function = d
                    .resolve(&json!({"Fn::GetAtt": [
                        resource["Properties"]["FunctionName"]["Ref"].as_str().unwrap_or_default(),
                        "Arn"]}))?
                    .unwrap_or(Value::Null);
                let mut condition = serde_json::Map::new();
                if let Some(arn) = props.get("SourceArn") {
                    condition.insert("ArnLike".into(), json!({"aws:SourceArn": arn}));
                }
                if let Some(account) = props.get("SourceAccount") {
                    condition.insert("StringEquals".into(), json!({"aws:SourceAccount": account}));
                }
                add(
                    logical,
                    "function policy statement".into(),
                    "RESOURCE_POLICY",
                    None,
                    json!({"Version": "2012-10-17", "Statement": [{
                        "Sid": logical, "Effect": "Allow",
                        "Principal": {"Service": props["Principal"]},
                        "Action": props["Action"], "Resource": function,
                        "Condition": condition}]}),
                );
            }
            _ => {}
        }
    }
    Ok(out)
}

fn main() -> Result<()> {
    let templates = [
        ("base.yaml", BASE_TEMPLATE),
        ("tenant.yaml", TENANT_TEMPLATE),
        ("spoke.yaml", SPOKE_TEMPLATE),
        ("fis.yaml", FIS_TEMPLATE),
        ("deployer.yaml", DEPLOYER_TEMPLATE),
    ];
    let mut seen: BTreeMap<(&str, String), BTreeSet<bool>> = BTreeMap::new();
    let mut lines = Vec::new();
    for (name, text) in templates {
        let template = Template::parse(name, text)?;
        let stages: Vec<_> = scenarios()
            .into_iter()
            .filter(|(t, _, _)| *t == name)
            .collect();
        if stages.is_empty() {
            bail!("no scenario renders {name}");
        }
        for (_, scenario, stage) in stages {
            let refused = template.rules_failures(&stage)?;
            if !refused.is_empty() {
                bail!("{name} ({scenario}): CloudFormation would refuse it: {refused:?}");
            }
            let deployment = template
                .deploy(&stage)
                .with_context(|| format!("{name} ({scenario})"))?;
            for (condition, value) in &deployment.conditions {
                seen.entry((name, condition.clone()))
                    .or_default()
                    .insert(*value);
            }
            for doc in documents(&deployment).with_context(|| format!("{name} ({scenario})"))? {
                lines.push(json!({
                    "template": name, "scenario": scenario, "resource": doc.resource,
                    "policy": doc.policy, "kind": doc.kind, "role_arn": doc.role_arn,
                    "document": doc.document,
                }));
            }
        }
    }
    let one_sided: Vec<String> = seen
        .iter()
        .filter(|(_, values)| values.len() < 2)
        .map(|((t, c), values)| format!("{t}: {c} is always {values:?}"))
        .collect();
    if !one_sided.is_empty() {
        bail!(
            "these conditions keep one value in every scenario, so their other branch is never \
             linted; add a scenario to tests/src/bin/policy-documents.rs:\n{}",
            one_sided.join("\n")
        );
    }
    for line in lines {
        println!("{line}");
    }
    Ok(())
}
