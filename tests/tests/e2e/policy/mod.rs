//! The security checks of `e2e_tests::policy` on the real templates, and on broken copies: every
//! check passes on `cloudformation/*.yaml`, and for every check there are copies broken the ways
//! a careless edit would break them, each failing exactly that check.

use std::collections::BTreeSet;

use aws_model::stacks::{BASE_TEMPLATE, FIS_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE};
use e2e_tests::policy::{
    Check, Template, alternatives, assumable_roles, dead_letter_queues, evaluate, execution_roles,
    ingest_queues, items, statements,
};
use serde_json::{Value, json};

fn base() -> Template {
    Template::parse("base.yaml", BASE_TEMPLATE).unwrap()
}

fn tenant() -> Template {
    Template::parse("tenant.yaml", TENANT_TEMPLATE).unwrap()
}

fn fis() -> Template {
    Template::parse("fis.yaml", FIS_TEMPLATE).unwrap()
}

fn spoke() -> Template {
    Template::parse("spoke.yaml", SPOKE_TEMPLATE).unwrap()
}

/// The template text with `from` replaced by `to`; `from` must occur exactly once, so a
/// template edit cannot silently turn a mutation into a no-op.
fn edit(name: &str, text: &str, from: &str, to: &str) -> Template {
    assert_eq!(text.matches(from).count(), 1, "{from:?} in {name}");
    Template::parse(name, &text.replacen(from, to, 1)).unwrap()
}

/// The statement with `sid` anywhere in resource `id` (also inside an `Fn::If`).
fn statement<'a>(t: &'a mut Template, id: &str, sid: &str) -> &'a mut Value {
    fn find<'a>(v: &'a mut Value, sid: &str) -> Option<&'a mut Value> {
        if v.get("Sid").and_then(Value::as_str) == Some(sid) {
            return Some(v);
        }
        match v {
            Value::Object(map) => map.values_mut().find_map(|c| find(c, sid)),
            Value::Array(list) => list.iter_mut().find_map(|c| find(c, sid)),
            _ => None,
        }
    }
    let name = t.name.clone();
    find(t.resource_mut(id), sid).unwrap_or_else(|| panic!("{name}: no {id} statement {sid}"))
}

/// The statement list holding `sid` in resource `id`.
fn statement_list<'a>(t: &'a mut Template, id: &str, sid: &str) -> &'a mut Vec<Value> {
    fn find<'a>(v: &'a mut Value, sid: &str) -> Option<&'a mut Vec<Value>> {
        match v {
            Value::Object(map) => {
                let holds = map
                    .get("Statement")
                    .and_then(Value::as_array)
                    .is_some_and(|l| {
                        l.iter()
                            .any(|s| s.get("Sid").and_then(Value::as_str) == Some(sid))
                    });
                if holds {
                    return map.get_mut("Statement").and_then(Value::as_array_mut);
                }
                map.values_mut().find_map(|c| find(c, sid))
            }
            Value::Array(list) => list.iter_mut().find_map(|c| find(c, sid)),
            _ => None,
        }
    }
    let name = t.name.clone();
    find(t.resource_mut(id), sid).unwrap_or_else(|| panic!("{name}: no {id} statement {sid}"))
}

fn remove_statement(t: &mut Template, id: &str, sid: &str) {
    statement_list(t, id, sid).retain(|s| s["Sid"] != sid);
}

fn properties<'a>(t: &'a mut Template, id: &str) -> &'a mut serde_json::Map<String, Value> {
    t.resource_mut(id)["Properties"].as_object_mut().unwrap()
}

struct Broken {
    check: Check,
    what: &'static str,
    template: Template,
}

fn broken(check: Check, what: &'static str, template: Template) -> Broken {
    Broken {
        check,
        what,
        template,
    }
}

/// Each entry breaks one guarantee the way an edit could.
fn broken_copies() -> Vec<Broken> {
    use Check::*;
    let mut out = Vec::new();

    // ---------------------------------------------------------------- wildcard actions
    let mut t = tenant();
    statement(&mut t, "KarpenterQueueAccess", "ConsumeInterruptionQueue")["Action"]
        .as_array_mut()
        .unwrap()
        .push(json!("sqs:*"));
    out.push(broken(
        NoWildcardActions,
        "tenant: Karpenter's policy gains sqs:*",
        t,
    ));
    let mut t = base();
    statement(
        &mut t,
        "DeadLetterQueuePolicy",
        "AllowDeadLettersFromTheseRules",
    )["Action"] = json!("sqs:*");
    out.push(broken(
        NoWildcardActions,
        "base: rules may sqs:* on the DLQ",
        t,
    ));
    let mut t = fis();
    statement(&mut t, "ExperimentRole", "ResolveTargets")["Action"] = json!("ec2:Describe*");
    out.push(broken(
        NoWildcardActions,
        "fis: ec2:Describe* instead of DescribeInstances",
        t,
    ));
    let mut t = fis();
    let s = statement(&mut t, "ExperimentRole", "InterruptThisClusterOnly");
    let action = s.as_object_mut().unwrap().remove("Action").unwrap();
    assert_eq!(action, "ec2:SendSpotInstanceInterruptions");
    s["NotAction"] = json!("iam:*");
    out.push(broken(
        NoWildcardActions,
        "fis: Allow with NotAction iam:*",
        t,
    ));

    let mut t = spoke();
    statement(&mut t, "ForwardToHubRole", "PutOnHubBusOnly")["Action"] = json!("events:Put*");
    out.push(broken(
        NoWildcardActions,
        "spoke: the forwarding role may events:Put*",
        t,
    ));

    // ---------------------------------------------------------------- router sends
    let mut t = base();
    statement(&mut t, "RouterRole", "SendToClusterQueues")["Resource"] = json!("*");
    out.push(broken(
        RouterSendsOnlyToPrefixAndDlq,
        "base: SendMessage on *",
        t,
    ));
    let mut t = base();
    statement(&mut t, "RouterRole", "SendToClusterQueues")["Resource"] =
        json!({"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:*"});
    out.push(broken(
        RouterSendsOnlyToPrefixAndDlq,
        "base: SendMessage on every queue of the account (prefix dropped)",
        t,
    ));
    let mut t = base();
    statement_list(&mut t, "RouterRole", "SendToClusterQueues").push(json!({
        "Sid": "AlsoElsewhere",
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Resource": "arn:aws:sqs:us-east-1:999999999999:karpenter-alpha",
    }));
    out.push(broken(
        RouterSendsOnlyToPrefixAndDlq,
        "base: SendMessage to another account's queue",
        t,
    ));
    let mut t = base();
    let removed = t.doc["Parameters"]["QueuePrefix"]
        .as_object_mut()
        .unwrap()
        .remove("MinLength");
    assert!(removed.is_some());
    out.push(broken(
        RouterSendsOnlyToPrefixAndDlq,
        "base: QueuePrefix may be empty (<prefix>* = every queue)",
        t,
    ));

    // ---------------------------------------------------------------- router reads
    let mut t = base();
    statement(&mut t, "RouterRole", "SendToClusterQueues")["Action"]
        .as_array_mut()
        .unwrap()
        .push(json!("sqs:ReceiveMessage"));
    out.push(broken(
        RouterReadsOnlyIngestQueue,
        "base: router may receive from the cluster queues",
        t,
    ));
    let mut t = base();
    statement(&mut t, "RouterRole", "ConsumeIngestQueue")["Resource"] = json!([
        {"Fn::GetAtt": ["IngestQueue", "Arn"]},
        {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]},
    ]);
    out.push(broken(
        RouterReadsOnlyIngestQueue,
        "base: router may consume the DLQ",
        t,
    ));
    let mut t = base();
    t.doc["Resources"]["ExtraRouterPolicy"] = json!({
        "Type": "AWS::IAM::Policy",
        "Properties": {
            "PolicyName": "extra",
            "Roles": [{"Ref": "RouterRole"}],
            "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow",
                "Action": "sqs:PurgeQueue",
                "Resource": {"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:karpenter-alpha"},
            }]},
        },
    });
    out.push(broken(
        RouterReadsOnlyIngestQueue,
        "base: a policy attached to the router role purges a cluster queue",
        t,
    ));
    let mut t = base();
    statement_list(&mut t, "RouterRole", "SendToDeadLetterQueue").push(json!({
        "Sid": "DelayDeadLetters",
        "Effect": "Allow",
        "Action": "sqs:ChangeMessageVisibility",
        "Resource": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]},
    }));
    out.push(broken(
        RouterReadsOnlyIngestQueue,
        "base: ChangeMessageVisibility on the DLQ as well",
        t,
    ));

    // ---------------------------------------------------------------- tenant queue writers
    let mut t = tenant();
    let s = statement(&mut t, "InterruptionQueuePolicy", "AllowRouterToSend");
    let router = s["Principal"]["AWS"].clone();
    s["Principal"]["AWS"] = json!([router, "arn:aws:iam::123456789012:role/ci"]);
    out.push(broken(
        TenantQueueWritableOnlyByRouter,
        "tenant: a second principal may send",
        t,
    ));
    // Scoped to the organisation, so that only this check (and not the wildcard one) fails.
    let mut t = tenant();
    let s = statement(&mut t, "InterruptionQueuePolicy", "AllowRouterToSend");
    s["Principal"] = json!("*");
    s["Condition"] = json!({"StringEquals": {"aws:PrincipalOrgID": "o-abcdefghij"}});
    out.push(broken(
        TenantQueueWritableOnlyByRouter,
        "tenant: every principal of the organisation may send",
        t,
    ));
    let mut t = tenant();
    remove_statement(
        &mut t,
        "InterruptionQueuePolicy",
        "DenySendersOtherThanRouter",
    );
    out.push(broken(
        TenantQueueWritableOnlyByRouter,
        "tenant: no Deny for other senders",
        t,
    ));
    let mut t = tenant();
    statement(
        &mut t,
        "InterruptionQueuePolicy",
        "DenySendersOtherThanRouter",
    )["Condition"]["ArnNotEquals"]["aws:PrincipalArn"] = json!("arn:aws:iam::123456789012:role/ci");
    out.push(broken(
        TenantQueueWritableOnlyByRouter,
        "tenant: the Deny exempts another role",
        t,
    ));

    // ---------------------------------------------------------------- encryption
    let mut t = tenant();
    assert!(
        properties(&mut t, "InterruptionQueue")
            .remove("SqsManagedSseEnabled")
            .is_some()
    );
    out.push(broken(QueuesEncrypted, "tenant: no SSE on the queue", t));
    let mut t = base();
    properties(&mut t, "DeadLetterQueue")["SqsManagedSseEnabled"] = json!(false);
    out.push(broken(QueuesEncrypted, "base: SSE off on the DLQ", t));
    let mut t = base();
    properties(&mut t, "IngestQueue")["SqsManagedSseEnabled"] =
        json!({"Fn::If": ["HasAlarmTopic", true, {"Ref": "AWS::NoValue"}]});
    out.push(broken(
        QueuesEncrypted,
        "base: ingest SSE only when an alarm topic is set",
        t,
    ));
    let mut t = base();
    properties(&mut t, "IngestQueue")["SqsManagedSseEnabled"] =
        json!({"Fn::If": ["CreatesKey", false, false]});
    out.push(broken(
        QueuesEncrypted,
        "base: ingest SSE-SQS off, so without KmsKey=Create it is unencrypted",
        t,
    ));

    // ---------------------------------------------------------------- TLS
    let mut t = base();
    remove_statement(&mut t, "IngestQueuePolicy", "DenyInsecureTransport");
    out.push(broken(
        QueuePoliciesRequireTls,
        "base: ingest policy without the TLS deny",
        t,
    ));
    let mut t = tenant();
    assert!(
        t.doc["Resources"]
            .as_object_mut()
            .unwrap()
            .remove("InterruptionQueuePolicy")
            .is_some()
    );
    out.push(broken(
        QueuePoliciesRequireTls,
        "tenant: no queue policy at all",
        t,
    ));
    let t = edit(
        "tenant.yaml",
        TENANT_TEMPLATE,
        "aws:SecureTransport: \"false\"",
        "aws:SecureTransport: \"true\"",
    );
    out.push(broken(
        QueuePoliciesRequireTls,
        "tenant: TLS deny inverted",
        t,
    ));
    let mut t = base();
    statement(&mut t, "DeadLetterQueuePolicy", "DenyInsecureTransport")["Action"] =
        json!("sqs:SendMessage");
    out.push(broken(
        QueuePoliciesRequireTls,
        "base: DLQ TLS deny covers SendMessage only",
        t,
    ));

    // ---------------------------------------------------------------- service principals
    let mut t = base();
    let s = statement(&mut t, "IngestQueuePolicy", "AllowTheseRulesOnly");
    assert!(s.as_object_mut().unwrap().remove("Condition").is_some());
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "base: any rule may send to the ingest queue",
        t,
    ));
    let mut t = fis();
    let trust = &mut properties(&mut t, "ExperimentRole")["AssumeRolePolicyDocument"]["Statement"]
        [0]["Condition"];
    assert!(trust.as_object_mut().unwrap().remove("ArnLike").is_some());
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "fis: trust pinned by SourceAccount only",
        t,
    ));
    let mut t = base();
    assert!(
        properties(&mut t, "SpotInterruptionRulePermission")
            .remove("SourceArn")
            .is_some()
    );
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "base: Lambda permission without SourceArn",
        t,
    ));
    let mut t = base();
    properties(&mut t, "RouterRole")["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"] =
        json!(["lambda.amazonaws.com", "events.amazonaws.com"]);
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "base: EventBridge may assume the router role",
        t,
    ));
    let mut t = fis();
    properties(&mut t, "ExperimentRole")["AssumeRolePolicyDocument"]["Statement"][0] = json!({
        "Effect": "Allow",
        "Principal": {"Service": "lambda.amazonaws.com"},
        "Action": "sts:AssumeRole",
    });
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "fis: the Lambda exception claimed by a role no function runs as",
        t,
    ));
    let mut t = spoke();
    let s = statement(&mut t, "ForwardToHubRole", "OnlyTheseRules");
    assert!(
        s["Condition"]
            .as_object_mut()
            .unwrap()
            .remove("ArnEquals")
            .is_some()
    );
    out.push(broken(
        ServicePrincipalsPinnedToSource,
        "spoke: any rule of the account may forward to the hub (SourceAccount only)",
        t,
    ));

    // ---------------------------------------------------------------- visibility timeout
    let t = edit(
        "base.yaml",
        BASE_TEMPLATE,
        "VisibilityTimeout: 180",
        "VisibilityTimeout: 179",
    );
    out.push(broken(IngestVisibilityTimeout, "base: visibility 179 s", t));
    let t = edit("base.yaml", BASE_TEMPLATE, "Timeout: 30\n", "Timeout: 31\n");
    out.push(broken(
        IngestVisibilityTimeout,
        "base: function timeout 31 s",
        t,
    ));
    let mut t = base();
    assert!(
        properties(&mut t, "IngestQueue")
            .remove("VisibilityTimeout")
            .is_some()
    );
    out.push(broken(
        IngestVisibilityTimeout,
        "base: visibility left at the 30 s default",
        t,
    ));

    // ---------------------------------------------------------------- batch item failures
    let mut t = base();
    assert!(
        properties(&mut t, "IngestEventSourceMapping")
            .remove("FunctionResponseTypes")
            .is_some()
    );
    out.push(broken(
        ReportBatchItemFailures,
        "base: no FunctionResponseTypes",
        t,
    ));
    let mut t = base();
    properties(&mut t, "IngestEventSourceMapping")["FunctionResponseTypes"] = json!([]);
    out.push(broken(
        ReportBatchItemFailures,
        "base: empty FunctionResponseTypes",
        t,
    ));

    // ---------------------------------------------------------------- wildcard principals
    let mut t = base();
    let s = statement(&mut t, "HubEventBus", "AllowOrganizationToPutEvents");
    assert!(s.as_object_mut().unwrap().remove("Condition").is_some());
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "base: every AWS account may put events on the hub bus",
        t,
    ));
    let mut t = base();
    statement(&mut t, "HubEventBus", "AllowOrganizationToPutEvents")["Condition"] =
        json!({"StringEquals": {"aws:PrincipalOrgID": "*"}});
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "base: hub bus open to the organisation \"*\"",
        t,
    ));
    let mut t = base();
    statement(&mut t, "HubEventBus", "AllowOrganizationToPutEvents")["Condition"] =
        json!({"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}});
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "base: hub bus \"*\" narrowed by a key that does not name the caller",
        t,
    ));
    let mut t = spoke();
    t.doc["Resources"]["OpenDefaultBus"] = json!({
        "Type": "AWS::Events::EventBusPolicy",
        "Properties": {
            "StatementId": "anyone",
            "Statement": {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "events:PutEvents",
                "Resource": {"Fn::Sub": "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"},
            },
        },
    });
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "spoke: the default bus opened to every account",
        t,
    ));
    let mut t = spoke();
    t.doc["Resources"]["OpenDefaultBus"] = json!({
        "Type": "AWS::Events::EventBusPolicy",
        "Properties": {"StatementId": "anyone", "Principal": "*", "Action": "events:PutEvents"},
    });
    out.push(broken(
        NoUnscopedWildcardPrincipals,
        "spoke: the default bus opened to every account (legacy Principal property)",
        t,
    ));

    // ---------------------------------------------------------------- router's needed permissions
    let mut t = base();
    remove_statement(&mut t, "RouterRole", "ResolveInstanceTagsByArn");
    out.push(broken(
        RouterHasNeededPermissions,
        "base: no tag:GetResources",
        t,
    ));
    let mut t = base();
    statement(&mut t, "RouterRole", "ResolveInstanceTags")["Resource"] =
        json!({"Fn::Sub": "arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/*"});
    out.push(broken(
        RouterHasNeededPermissions,
        "base: DescribeInstances on instance ARNs (AWS accepts only *)",
        t,
    ));
    let mut t = base();
    statement(&mut t, "RouterRole", "ConsumeIngestQueue")["Action"]
        .as_array_mut()
        .unwrap()
        .retain(|a| a != "sqs:ChangeMessageVisibility");
    out.push(broken(
        RouterHasNeededPermissions,
        "base: no ChangeMessageVisibility on the ingest queue",
        t,
    ));

    // ---------------------------------------------------------------- router assumes
    let mut t = base();
    statement(&mut t, "RouterRole", "AssumeSpokeRoles")["Resource"] = json!("*");
    out.push(broken(
        RouterAssumesOnlySpokeRoles,
        "base: router may assume any role",
        t,
    ));
    let t = edit(
        "base.yaml",
        BASE_TEMPLATE,
        ":role/${SpokeRoleName}\"",
        ":role/*\"",
    );
    out.push(broken(
        RouterAssumesOnlySpokeRoles,
        "base: router may assume every role of every account (name dropped)",
        t,
    ));
    let mut t = base();
    t.doc["Parameters"]["SpokeRoleName"]["AllowedPattern"] = json!("^[A-Za-z0-9+=,.@_*-]{1,64}$");
    out.push(broken(
        RouterAssumesOnlySpokeRoles,
        "base: SpokeRoleName may be \"*\"",
        t,
    ));

    // ---------------------------------------------------------------- spoke role trust
    let mut t = spoke();
    let s = statement(&mut t, "SpokeRole", "OnlyTheHubRouter");
    let router = s["Principal"]["AWS"].clone();
    s["Principal"]["AWS"] = json!([router, "arn:aws:iam::123456789012:role/ci"]);
    out.push(broken(
        SpokeRoleTrustsOnlyRouter,
        "spoke: a second principal may assume the spoke role",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "OnlyTheHubRouter")["Principal"]["AWS"] =
        json!("arn:aws:iam::123456789012:root");
    out.push(broken(
        SpokeRoleTrustsOnlyRouter,
        "spoke: the whole hub account may assume the spoke role",
        t,
    ));
    let mut t = spoke();
    assert!(
        t.doc["Parameters"]["RouterRoleArn"]
            .as_object_mut()
            .unwrap()
            .remove("AllowedPattern")
            .is_some()
    );
    out.push(broken(
        SpokeRoleTrustsOnlyRouter,
        "spoke: RouterRoleArn may be \"*\"",
        t,
    ));

    // ---------------------------------------------------------------- spoke role permissions
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "ResolveInstanceTags")["Action"]
        .as_array_mut()
        .unwrap()
        .push(json!("ec2:TerminateInstances"));
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: the router may terminate instances",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "ResolveInstanceTags")["Action"] =
        json!("ec2:DescribeInstances");
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: no tag:GetResources",
        t,
    ));
    let mut t = spoke();
    statement(&mut t, "SpokeRole", "SendToClusterQueues")["Resource"] =
        json!({"Fn::Sub": "arn:${AWS::Partition}:sqs:*:*:${QueuePrefix}*"});
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: send to <prefix>* queues of every account",
        t,
    ));
    let mut t = spoke();
    properties(&mut t, "SpokeRole").insert(
        "ManagedPolicyArns".into(),
        json!([{"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/ReadOnlyAccess"}]),
    );
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: a managed policy attached beside the inline one",
        t,
    ));
    let mut t = spoke();
    assert!(
        t.doc["Parameters"]["QueuePrefix"]
            .as_object_mut()
            .unwrap()
            .remove("MinLength")
            .is_some()
    );
    out.push(broken(
        SpokeRoleExactPermissions,
        "spoke: QueuePrefix may be empty (<prefix>* = every queue)",
        t,
    ));

    out
}

#[test]
fn the_real_templates_pass_every_check() {
    for t in [base(), tenant(), fis(), spoke()] {
        let violations = evaluate(&t);
        assert!(
            violations.is_empty(),
            "{}:\n{}",
            t.name,
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The checks find what they are about in the real templates, so a pass is not a vacuous one.
#[test]
fn the_checks_see_their_subjects() {
    let base = base();
    assert_eq!(execution_roles(&base), ["RouterRole"]);
    assert_eq!(ingest_queues(&base), ["IngestQueue"]);
    assert_eq!(dead_letter_queues(&base), ["DeadLetterQueue"]);
    let router_sids: BTreeSet<String> = statements(&base)
        .iter()
        .filter(|s| s.holder == "RouterRole")
        .filter_map(|s| s.body["Sid"].as_str().map(str::to_owned))
        .collect();
    // ConsumeIngestQueue, NeverSendToIngestQueue and AssumeSpokeRoles sit inside an Fn::If.
    for sid in [
        "ResolveInstanceTags",
        "ResolveInstanceTagsByArn",
        "SendToClusterQueues",
        "SendToDeadLetterQueue",
        "ConsumeIngestQueue",
        "NeverSendToIngestQueue",
        "AssumeSpokeRoles",
    ] {
        assert!(router_sids.contains(sid), "{sid} not seen: {router_sids:?}");
    }
    // The ten Lambda permissions (five rules on each bus) are statements too.
    let permissions = statements(&base)
        .iter()
        .filter(|s| s.holder.ends_with("RulePermission"))
        .count();
    assert_eq!(permissions, 10);
    // Both branches of the hub bus policy, the organisation's and the account list's.
    let bus_sids: Vec<String> = statements(&base)
        .iter()
        .filter(|s| s.holder == "HubEventBus")
        .filter_map(|s| s.body["Sid"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        bus_sids,
        [
            "AllowOrganizationToPutEvents",
            "AllowServedAccountsToPutEvents"
        ]
    );
    assert!(assumable_roles(&base).is_empty());

    let spoke = spoke();
    assert_eq!(assumable_roles(&spoke), ["SpokeRole"]);
    let spoke_allow: Vec<_> = statements(&spoke)
        .into_iter()
        .filter(|s| s.holder == "SpokeRole" && s.is_allow())
        .filter_map(|s| s.body["Sid"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        spoke_allow,
        [
            "OnlyTheHubRouter",
            "ResolveInstanceTags",
            "SendToClusterQueues",
            "ReadClusterQueueOwnership"
        ]
    );

    let tenant = tenant();
    let tenant_allow: Vec<_> = statements(&tenant)
        .into_iter()
        .filter(|s| s.holder == "InterruptionQueuePolicy" && s.is_allow())
        .collect();
    assert_eq!(tenant_allow.len(), 1);
    assert_eq!(tenant_allow[0].subjects, ["InterruptionQueue"]);
}

/// The default-bus rules of base.yaml, whose patterns the router's kinds are checked against
/// (routerctl/src/verify/); the central bus's and spoke.yaml's copies must not drift from them.
const RULES: [&str; 5] = [
    "SpotInterruptionRule",
    "RebalanceRecommendationRule",
    "StateChangeRule",
    "ScheduledChangeRule",
    "CapacityReservationInterruptionRule",
];

#[test]
fn hub_and_spoke_rules_copy_the_base_patterns_exactly() {
    let base = base();
    let spoke = spoke();
    for id in RULES {
        let rule = &base.doc["Resources"][id]["Properties"];
        assert!(rule["EventPattern"].is_object(), "{id}");
        // On the default bus, the stack's own account's events only; the hub bus takes whatever
        // its policy admits.
        assert_eq!(
            rule["EventPattern"]["account"],
            json!([{"Ref": "AWS::AccountId"}]),
            "{id}"
        );
        let mut without_account = rule["EventPattern"].clone();
        without_account.as_object_mut().unwrap().remove("account");
        let hub = &base.doc["Resources"][format!("Hub{id}")]["Properties"];
        assert_eq!(hub["EventPattern"], without_account, "Hub{id}");
        assert_eq!(hub["Targets"], rule["Targets"], "Hub{id}: same targets");
        assert_eq!(
            spoke.doc["Resources"][id]["Properties"]["EventPattern"], rule["EventPattern"],
            "spoke.yaml {id}"
        );
    }
    assert_eq!(base.resources_of("AWS::Events::Rule").count(), 10);
    assert_eq!(spoke.resources_of("AWS::Events::Rule").count(), 5);
}

/// Each rule's target (and dead-letter queue) lets that rule deliver: the queue policy names the
/// rule in aws:SourceArn, or a Lambda permission does. A rule missing there drops its events.
#[test]
fn every_base_rule_may_deliver_to_its_targets() {
    let base = base();
    let all = statements(&base);
    let names_rule = |values: &Value, rule: &str| {
        items(values)
            .iter()
            .any(|v| **v == json!({"Fn::GetAtt": [rule, "Arn"]}))
    };
    for (rule, r) in base.resources_of("AWS::Events::Rule") {
        for target in items(&r["Properties"]["Targets"]) {
            for arn in [&target["Arn"], &target["DeadLetterConfig"]["Arn"]] {
                let id = arn["Fn::GetAtt"][0].as_str().expect("a GetAtt target");
                let admitted = all.iter().any(|s| {
                    s.is_allow()
                        && s.body["Principal"] == json!({"Service": "events.amazonaws.com"})
                        && (s.subjects.iter().any(|q| q == id)
                            || s.holder.ends_with("Permission")
                                && s.body["Resource"] == json!({"Ref": id}))
                        && s.condition("aws:SourceArn")
                            .iter()
                            .any(|(_, v)| names_rule(v, rule))
                });
                assert!(admitted, "{rule} -> {id}: no grant names the rule");
            }
        }
    }
}

/// The forwarding role's trust names exactly the five rules' ARNs, built from their names.
#[test]
fn the_forwarding_role_trusts_exactly_the_spoke_rules() {
    let spoke = spoke();
    let trust = statements(&spoke)
        .into_iter()
        .find(|s| s.holder == "ForwardToHubRole" && s.body["Sid"] == "OnlyTheseRules")
        .unwrap();
    let trusted: BTreeSet<String> = trust
        .condition("aws:SourceArn")
        .iter()
        .flat_map(|(_, v)| items(v))
        .map(|v| v["Fn::Sub"].as_str().unwrap().to_owned())
        .collect();
    let rules: BTreeSet<String> = spoke
        .resources_of("AWS::Events::Rule")
        .map(|(id, r)| {
            let name = r["Properties"]["Name"]["Fn::Sub"].as_str().unwrap();
            let targets = items(&r["Properties"]["Targets"]);
            assert_eq!(targets.len(), 1, "{id}");
            assert_eq!(targets[0]["Arn"], json!({"Ref": "HubEventBusArn"}), "{id}");
            assert_eq!(
                targets[0]["RoleArn"],
                json!({"Fn::GetAtt": ["ForwardToHubRole", "Arn"]}),
                "{id}"
            );
            format!(
                "arn:${{AWS::Partition}}:events:${{AWS::Region}}:${{AWS::AccountId}}:rule/{name}"
            )
        })
        .collect();
    assert_eq!(trusted, rules);
}

/// The alarms on the router's metrics and its METRICS_NAMESPACE read the same mapping.
#[test]
fn router_metric_alarms_use_the_function_namespace() {
    let base = base();
    let namespace = &base.doc["Resources"]["RouterFunction"]["Properties"]["Environment"]["Variables"]
        ["METRICS_NAMESPACE"];
    assert_eq!(
        *namespace,
        json!({"Fn::FindInMap": ["Metrics", "Router", "Namespace"]})
    );
    for id in ["LateForwardsAlarm", "AccountUnreachableAlarm"] {
        let alarm = &base.doc["Resources"][id]["Properties"];
        assert_eq!(alarm["Namespace"], *namespace, "{id}");
        assert_eq!(
            alternatives(&alarm["Dimensions"][0]["Value"]),
            [&json!({"Ref": "RouterFunction"})],
            "{id}"
        );
    }
}

#[test]
fn every_broken_copy_fails_exactly_its_check() {
    let mut wrong = Vec::new();
    for b in broken_copies() {
        let violations = evaluate(&b.template);
        let failing: BTreeSet<Check> = violations.iter().map(|v| v.check).collect();
        let verdict = if failing == BTreeSet::from([b.check]) {
            "fails exactly"
        } else {
            wrong.push(b.what);
            "WRONG"
        };
        println!("{:<38} {verdict}: {}", b.check.name(), b.what);
        for v in &violations {
            println!("    {v}");
        }
    }
    assert!(
        wrong.is_empty(),
        "broken copies not caught as expected: {wrong:?}"
    );
}

/// A check no broken copy fails would be a check that cannot fail.
#[test]
fn every_check_has_a_broken_copy() {
    let covered: BTreeSet<Check> = broken_copies().iter().map(|b| b.check).collect();
    let all: BTreeSet<Check> = Check::ALL.into_iter().collect();
    assert_eq!(covered, all);
}

/// A customer KMS key instead of SSE-SQS is encryption too.
#[test]
fn a_kms_key_passes_for_sse() {
    let mut t = tenant();
    let props = t.resource_mut("InterruptionQueue")["Properties"]
        .as_object_mut()
        .unwrap();
    props.remove("SqsManagedSseEnabled");
    props.insert("KmsMasterKeyId".into(), json!("alias/interruption-router"));
    assert_eq!(evaluate(&t), []);
}

/// The helpers of `e2e_tests::policy` themselves (they ran as that library's unit tests, a
/// second test binary of this crate).
mod helpers {
    use e2e_tests::policy::{Template, action_matches, alternatives, pattern_admits_only_names};
    use serde_json::json;

    #[test]
    fn short_forms_become_long_forms() {
        let t = Template::parse(
            "t",
            r#"
    Resources:
      R:
        Type: X
        Properties:
          A: !GetAtt Q.Arn
          B: !Sub "${AWS::StackName}-x"
          C: !If [Cond, !Ref P, !Ref AWS::NoValue]
          D: !ImportValue { "Fn::Sub": "${S}-y" }
          E: { "Fn::ImportValue": !Sub "${S}-z" }
          F: !Equals [!Ref P, ""]
    "#,
        )
        .unwrap();
        let p = &t.doc["Resources"]["R"]["Properties"];
        assert_eq!(p["A"], json!({"Fn::GetAtt": ["Q", "Arn"]}));
        assert_eq!(p["B"], json!({"Fn::Sub": "${AWS::StackName}-x"}));
        assert_eq!(
            p["C"],
            json!({"Fn::If": ["Cond", {"Ref": "P"}, {"Ref": "AWS::NoValue"}]})
        );
        assert_eq!(p["D"], json!({"Fn::ImportValue": {"Fn::Sub": "${S}-y"}}));
        assert_eq!(p["E"], json!({"Fn::ImportValue": {"Fn::Sub": "${S}-z"}}));
        assert_eq!(p["F"], json!({"Fn::Equals": [{"Ref": "P"}, ""]}));
        assert_eq!(alternatives(&p["C"]), [&json!({"Ref": "P"})]);
    }

    #[test]
    fn unknown_tags_are_refused() {
        let err = Template::parse("t", "Resources: { R: { Type: !Subb x } }").unwrap_err();
        assert!(format!("{err:#}").contains("unknown tag !Subb"), "{err:#}");
    }

    #[test]
    fn action_globs() {
        assert!(action_matches("*", "sqs:SendMessage"));
        assert!(action_matches("sqs:*", "sqs:SendMessage"));
        assert!(action_matches("SQS:send*", "sqs:SendMessage"));
        assert!(action_matches("sqs:?endMessage", "sqs:SendMessage"));
        assert!(!action_matches("sqs:Send*", "sqs:ReceiveMessage"));
        assert!(!action_matches("sqs:SendMessage", "sqs:SendMessageBatch"));
        assert!(!action_matches("s3:*", "sqs:SendMessage"));
    }

    #[test]
    fn name_patterns() {
        assert!(pattern_admits_only_names("^[A-Za-z0-9+=,.@_-]{1,64}$"));
        assert!(pattern_admits_only_names("^[a-z]+$"));
        assert!(!pattern_admits_only_names("^[A-Za-z0-9*-]{1,64}$"));
        assert!(!pattern_admits_only_names("^[a-z]{0,64}$"));
        assert!(!pattern_admits_only_names("^.+$"));
        assert!(!pattern_admits_only_names("^[a-z]{1,64}$|^\\*$"));
        assert!(!pattern_admits_only_names(""));
    }
}
