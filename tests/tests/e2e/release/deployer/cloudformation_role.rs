//! CloudFormationRole: on every resource the four stacks create, every action its type's handlers
//! list (less unused features, named), and nothing on other names.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use aws_model::{
    stacks::{BASE_TEMPLATE, FIS_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{Deployment, Stage, Template},
};
use interruption_router::VERSION;
use serde_json::{Value, json};

use super::{ACCOUNT, Conditions, REGION, SPOKE_ROLE_NAME, allowed, deployer};

/// What a type's handlers list that the templates never need, and why.
const NOT_USED: &[(&str, &[&str], &str)] = &[
    (
        "AWS::Lambda::Function",
        &[
            "lambda:PutFunctionConcurrency",
            "lambda:DeleteFunctionConcurrency",
        ],
        "no ReservedConcurrentExecutions",
    ),
    (
        "AWS::Lambda::Function",
        &[
            "lambda:GetCodeSigningConfig",
            "lambda:PutFunctionCodeSigningConfig",
            "lambda:DeleteFunctionCodeSigningConfig",
        ],
        "no CodeSigningConfigArn",
    ),
    (
        "AWS::Lambda::Function",
        &["lambda:GetLayerVersion"],
        "no Layers",
    ),
    (
        "AWS::Lambda::Function",
        &["lambda:PutRuntimeManagementConfig"],
        "no RuntimeManagementConfig",
    ),
    (
        "AWS::Lambda::Function",
        &["lambda:PutFunctionRecursionConfig"],
        "no RecursiveLoop",
    ),
    (
        "AWS::Lambda::Function",
        &[
            "lambda:PutFunctionScalingConfig",
            "lambda:PassCapacityProvider",
            "lambda:AssociateRuntimeAlias",
            "lambda:PublishVersion",
        ],
        "no capacity provider, no published versions",
    ),
    (
        "AWS::Logs::LogGroup",
        &["logs:AssociateKmsKey", "logs:DisassociateKmsKey"],
        "no KmsKeyId",
    ),
    (
        "AWS::Logs::LogGroup",
        &[
            "logs:PutDataProtectionPolicy",
            "logs:DeleteDataProtectionPolicy",
        ],
        "no DataProtectionPolicy",
    ),
    (
        "AWS::Logs::LogGroup",
        &["logs:PutIndexPolicy", "logs:DeleteIndexPolicy"],
        "no FieldIndexPolicies",
    ),
    (
        "AWS::Logs::LogGroup",
        &["logs:DeleteResourcePolicy"],
        "no ResourcePolicyDocument",
    ),
    (
        "AWS::Logs::LogGroup",
        &[
            "logs:PutLogGroupDeletionProtection",
            "logs:PutBearerTokenAuthentication",
        ],
        "no DeletionProtectionEnabled, no BearerTokenAuthenticationEnabled",
    ),
    (
        "AWS::SNS::Topic",
        &["sns:Subscribe", "sns:Unsubscribe"],
        "no Subscription (the on-call subscribes by hand)",
    ),
    (
        "AWS::SNS::Topic",
        &["sns:PutDataProtectionPolicy"],
        "no DataProtectionPolicy",
    ),
    (
        "AWS::IAM::Role",
        &["iam:AttachRolePolicy", "iam:DetachRolePolicy"],
        "the stacks' roles have no ManagedPolicyArns",
    ),
    (
        "AWS::IAM::ManagedPolicy",
        &["iam:CreatePolicyVersion"],
        "tenant.yaml's grant is never given a new version: its Path names what its document \
         depends on, so a change replaces it (deployer.yaml, KarpenterQueueGrants)",
    ),
    (
        "AWS::IAM::ManagedPolicy",
        &[
            "iam:AttachGroupPolicy",
            "iam:DetachGroupPolicy",
            "iam:AttachUserPolicy",
            "iam:DetachUserPolicy",
        ],
        "attached to a role only",
    ),
];

/// The actions of `ty`'s own service that its handlers list (CloudFormation's resource schema).
fn handler_actions(schemas: &std::path::Path, ty: &str) -> Result<Vec<String>> {
    let providers: Value = serde_json::from_str(&std::fs::read_to_string(
        schemas.join("providers/us-east-1.json"),
    )?)?;
    let file = providers[ty]
        .as_str()
        .with_context(|| format!("no schema for {ty}"))?;
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(
        schemas.join("resources").join(format!("{file}.json")),
    )?)?;
    let service = match ty.split("::").nth(1).unwrap_or_default() {
        "CloudWatch" => "cloudwatch".to_owned(),
        other => other.to_lowercase(),
    };
    let mut actions: Vec<String> = ["create", "read", "update", "delete"]
        .iter()
        .flat_map(|h| {
            schema["handlers"][h]["permissions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|a| a.as_str().map(str::to_owned))
        .filter(|a| a.starts_with(&format!("{service}:")))
        .filter(|a| {
            !NOT_USED
                .iter()
                .any(|(t, unused, _)| *t == ty && unused.contains(&a.as_str()))
        })
        .collect();
    actions.sort();
    actions.dedup();
    Ok(actions)
}

/// The resource (and the request context) CloudFormation acts on for a stack's resource.
fn targets(d: &Deployment<'_>, logical: &str, ty: &str) -> Result<Vec<(String, Conditions)>> {
    let att = |name: &str| -> Result<String> {
        Ok(d.resolve(&json!({"Fn::GetAtt": [logical, name]}))?
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default())
    };
    let stack = &d.stage.stack_name;
    let props = d.properties(logical)?.unwrap_or_default();
    let fis_tags = vec![
        (
            "aws:RequestTag/app".to_owned(),
            "interruption-router".to_owned(),
        ),
        (
            "aws:ResourceTag/app".to_owned(),
            "interruption-router".to_owned(),
        ),
    ];
    Ok(match ty {
        "AWS::SQS::QueuePolicy" => props["Queues"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|url| url.as_str())
            .map(|url| {
                let mut parts = url.rsplit('/');
                let (name, account) = (parts.next().unwrap(), parts.next().unwrap());
                (format!("arn:aws:sqs:{REGION}:{account}:{name}"), vec![])
            })
            .collect(),
        "AWS::Logs::LogGroup" => vec![(
            format!(
                "arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{}",
                props["LogGroupName"].as_str().unwrap_or_default()
            ),
            vec![],
        )],
        "AWS::CloudWatch::Alarm" => vec![(
            format!("arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{stack}-{logical}-GENERATED"),
            vec![],
        )],
        "AWS::CloudWatch::Dashboard" => vec![(
            format!(
                "arn:aws:cloudwatch::{ACCOUNT}:dashboard/{}",
                props["DashboardName"].as_str().unwrap_or_default()
            ),
            vec![],
        )],
        "AWS::IAM::ManagedPolicy" => vec![(
            format!(
                "arn:aws:iam::{ACCOUNT}:policy{}{stack}-{logical}-GENERATED",
                props["Path"].as_str().unwrap_or("/")
            ),
            vec![],
        )],
        "AWS::Lambda::EventSourceMapping" => vec![(
            format!(
                "arn:aws:lambda:{REGION}:{ACCOUNT}:event-source-mapping:0a1b2c3d-0000-0000-0000-000000000000"
            ),
            vec![(
                "lambda:FunctionArn".to_owned(),
                d.resolve(&json!({"Fn::GetAtt": ["RouterFunction", "Arn"]}))?
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
            )],
        )],
        "AWS::Lambda::Permission" | "AWS::Lambda::EventInvokeConfig" => vec![(
            d.resolve(&json!({"Fn::GetAtt": ["RouterFunction", "Arn"]}))?
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            vec![],
        )],
        // AWS writes a parameter's ARN without the name's leading slash.
        "AWS::SSM::Parameter" => vec![(
            format!(
                "arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/{}",
                props["Name"]
                    .as_str()
                    .unwrap_or_default()
                    .trim_start_matches('/')
            ),
            vec![],
        )],
        "AWS::SNS::Topic" => vec![(att("TopicArn")?, vec![])],
        // A query definition has no ARN: its actions take no resource.
        "AWS::Logs::QueryDefinition" => vec![("*".to_owned(), vec![])],
        "AWS::FIS::ExperimentTemplate" => vec![(
            format!("arn:aws:fis:{REGION}:{ACCOUNT}:experiment-template/EXT0123456789abcd"),
            fis_tags,
        )],
        _ => vec![(att("Arn")?, vec![])],
    })
}

#[test]
fn cloudformation_acts_as_a_role_that_may_create_what_the_stacks_create_and_nothing_else()
-> Result<()> {
    let role = deployer()?.role;
    let schemas = e2e_tests::cfn_schemas()?;
    let hub = Stage::new("interruption-router", ACCOUNT, REGION)
        .parameter("CodeS3Bucket", "artifacts")
        .parameter("CentralBus", "Enabled")
        .parameter("ServedAccounts", "111111111111")
        .parameter("KmsKey", "Create")
        .parameter("RolePath", "/platform/");
    let tenant = Stage::new("interruption-router-tenant-alpha", ACCOUNT, REGION)
        .parameter("ClusterName", "alpha")
        .parameter("KmsKey", "Create")
        .parameter("KarpenterRoleName", "KarpenterController-alpha")
        .export(
            "interruption-router:RouterRoleArn",
            "arn:aws:iam::123456789012:role/platform/interruption-router-RouterRole-GENERATED",
        )
        .export("interruption-router:QueuePrefix", "karpenter-")
        .export(
            "interruption-router:AlarmTopicArn",
            "arn:aws:sns:us-east-1:123456789012:interruption-router-AlarmTopic-GENERATED",
        );
    let spoke = Stage::new("interruption-router-spoke", ACCOUNT, "eu-west-2")
        .parameter(
            "HubEventBusArn",
            "arn:aws:events:eu-west-1:123456789012:event-bus/interruption-router-hub",
        )
        .parameter(
            "RouterRoleArn",
            "arn:aws:iam::123456789012:role/platform/interruption-router-RouterRole-GENERATED",
        )
        .parameter("SpokeRolePath", "/platform/")
        .parameter("SpokeRoleName", SPOKE_ROLE_NAME);
    // A member's spoke in the hub's region, its rules writing the hub's direct queue as its
    // direct role.
    let direct = Stage::new("interruption-router-spoke", ACCOUNT, REGION)
        .parameter(
            "HubEventBusArn",
            "arn:aws:events:eu-west-1:999999999999:event-bus/interruption-router-hub",
        )
        .parameter(
            "HubDirectQueueArn",
            "arn:aws:sqs:eu-west-1:999999999999:interruption-router-direct",
        )
        .parameter(
            "RouterRoleArn",
            "arn:aws:iam::999999999999:role/platform/interruption-router-RouterRole-GENERATED",
        )
        .parameter("SpokeRolePath", "/platform/")
        .parameter("SpokeRoleName", SPOKE_ROLE_NAME);
    let fis = Stage::new("interruption-router-fis-alpha", ACCOUNT, REGION)
        .parameter("ClusterName", "alpha");
    let mut checked: BTreeMap<String, usize> = BTreeMap::new();
    for (name, text, stage) in [
        ("base.yaml", BASE_TEMPLATE, hub.clone()),
        ("tenant.yaml", TENANT_TEMPLATE, tenant),
        ("spoke.yaml", SPOKE_TEMPLATE, spoke),
        ("spoke.yaml", SPOKE_TEMPLATE, direct),
        ("fis.yaml", FIS_TEMPLATE, fis),
    ] {
        let template = Template::parse(name, text)?;
        let d = template.deploy(&stage)?;
        for (logical, resource) in template.resources() {
            if d.properties(logical)?.is_none() {
                continue;
            }
            let ty = resource["Type"].as_str().unwrap_or_default();
            let actions = handler_actions(&schemas, ty)?;
            assert!(!actions.is_empty(), "{ty}: no actions");
            for (arn, context) in targets(&d, logical, ty)? {
                for action in &actions {
                    // The grant is attached to Karpenter's role, named by the policy's ARN.
                    let (resource, context) = match (ty, action.as_str()) {
                        (
                            "AWS::IAM::ManagedPolicy",
                            "iam:AttachRolePolicy" | "iam:DetachRolePolicy",
                        ) => (
                            "arn:aws:iam::123456789012:role/KarpenterController-alpha".to_owned(),
                            vec![("iam:PolicyARN".to_owned(), arn.clone())],
                        ),
                        (_, "kms:CreateKey") => ("*".to_owned(), context.clone()),
                        _ => (arn.clone(), context.clone()),
                    };
                    let context: Vec<(&str, &str)> = context
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    assert!(
                        allowed(&role, action, &resource, &context),
                        "{name} {logical} ({ty}): {action} on {resource}"
                    );
                    *checked.entry(ty.to_owned()).or_default() += 1;
                }
            }
        }
    }
    println!("{checked:?}");
    assert!(checked.len() >= 14, "resource types checked: {checked:?}");

    // What the stacks pass and read besides: their roles to their services, the release's zip,
    // and Karpenter's role may be given the tenant's grant and nothing else.
    let router_role =
        "arn:aws:iam::123456789012:role/platform/interruption-router-RouterRole-GENERATED";
    let to = |service: &'static str| [("iam:PassedToService", service)];
    assert!(allowed(
        &role,
        "iam:PassRole",
        router_role,
        &to("lambda.amazonaws.com")
    ));
    assert!(allowed(
        &role,
        "iam:PassRole",
        "arn:aws:iam::123456789012:role/interruption-router-spoke-ForwardToHubRole-GENERATED",
        &to("events.amazonaws.com")
    ));
    assert!(allowed(
        &role,
        "iam:PassRole",
        "arn:aws:iam::123456789012:role/interruption-router-fis-alpha-ExperimentRole-GENERATED",
        &to("fis.amazonaws.com")
    ));
    assert!(!allowed(
        &role,
        "iam:PassRole",
        router_role,
        &to("ec2.amazonaws.com")
    ));
    assert!(allowed(
        &role,
        "s3:GetObject",
        &format!("arn:aws:s3:::artifacts/interruption-router/{VERSION}/bootstrap-arm64.zip"),
        &[]
    ));
    let karpenter = "arn:aws:iam::123456789012:role/KarpenterController-alpha";
    let grant = "arn:aws:iam::123456789012:policy/interruption-router-tenant-alpha-KarpenterQueueAccess-GENERATED";
    assert!(allowed(
        &role,
        "iam:AttachRolePolicy",
        karpenter,
        &[("iam:PolicyARN", grant)]
    ));
    assert!(!allowed(
        &role,
        "iam:AttachRolePolicy",
        karpenter,
        &[(
            "iam:PolicyARN",
            "arn:aws:iam::aws:policy/AdministratorAccess"
        )]
    ));
    // fis.yaml's template names its action; only a template tagged as fis.yaml tags it.
    let action =
        "arn:aws:fis:eu-west-1:123456789012:action/aws:ec2:send-spot-instance-interruptions";
    let app = [("aws:RequestTag/app", "interruption-router")];
    assert!(allowed(&role, "fis:CreateExperimentTemplate", action, &app));
    assert!(!allowed(
        &role,
        "fis:CreateExperimentTemplate",
        action,
        &[("aws:RequestTag/app", "other")]
    ));
    for (action, resource) in [
        ("iam:CreateRole", "arn:aws:iam::123456789012:role/Admin"),
        (
            "iam:PutRolePolicy",
            "arn:aws:iam::123456789012:role/KarpenterController-alpha",
        ),
        ("iam:PassRole", "arn:aws:iam::123456789012:role/Admin"),
        (
            "lambda:UpdateFunctionCode",
            "arn:aws:lambda:eu-west-1:123456789012:function:payments",
        ),
        (
            "sqs:DeleteQueue",
            "arn:aws:sqs:eu-west-1:123456789012:payments-orders",
        ),
        (
            "events:PutRule",
            "arn:aws:events:eu-west-1:123456789012:rule/payments",
        ),
        ("s3:GetObject", "arn:aws:s3:::artifacts/payments/app.zip"),
        (
            "cloudwatch:DeleteAlarms",
            "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:payments-5xx",
        ),
    ] {
        assert!(
            !allowed(&role, action, resource, &to("lambda.amazonaws.com")),
            "{action} on {resource}"
        );
    }
    Ok(())
}
