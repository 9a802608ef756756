//! The deployer's least privilege (cloudformation/deployer.yaml), evaluated as IAM does with the
//! project's policy evaluator on the documents CloudFormation would create:
//!
//! * DeployerPolicy allows every AWS call the make deploy targets make (recorded by the AWS CLI
//!   stand-in, CFN_ROLE set) and the spoke StackSet's, and no change to a stack without the
//!   deploy role, to another stack, or outside the release's prefix;
//! * CloudFormationRole allows, on the resources each stack creates (as named in the deployed
//!   templates), every action AWS's resource schemas list for that type's handlers, less the ones
//!   for features the templates do not use (named below with why), and nothing on other names.
//!
//! The linters (tools/lint_policies.py, `make policy-lint`) check the same documents against
//! AWS's action, resource and condition-key database.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use aws_model::{
    policy::{Policy, Principal, Request, evaluate},
    stacks::{BASE_TEMPLATE, DEPLOYER_TEMPLATE, FIS_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{Deployment, Stage, Template},
};
use interruption_router::VERSION;
use serde_json::{Value, json};

use super::{Scratch, deploying::stand_in_release};
use crate::deploy_targets::Cli;

const ACCOUNT: &str = "123456789012";
const REGION: &str = "eu-west-1";

/// The deployer stack's two documents and its role's ARN.
struct Deployer {
    policy: Vec<Policy>,
    /// The role's inline policies.
    role: Vec<Policy>,
    role_arn: String,
}

fn deployer() -> Result<Deployer> {
    let template = Template::parse("deployer.yaml", DEPLOYER_TEMPLATE)?;
    let stage = Stage::new("interruption-router-deployer", ACCOUNT, REGION)
        .parameter("ArtifactBucket", "artifacts");
    let d = template.deploy(&stage)?;
    let policy = d.properties("DeployerPolicy")?.context("DeployerPolicy")?;
    let role = d
        .properties("CloudFormationRole")?
        .context("CloudFormationRole")?;
    let role_arn = d
        .resolve(&json!({"Fn::GetAtt": ["CloudFormationRole", "Arn"]}))?
        .and_then(|v| v.as_str().map(str::to_owned))
        .context("the role's ARN")?;
    let role_policies = role["Policies"]
        .as_array()
        .context("the role's policies")?
        .iter()
        .map(|p| {
            Policy::parse(
                format!("CloudFormationRole {}", p["PolicyName"]),
                &p["PolicyDocument"].to_string(),
            )
            .map_err(anyhow::Error::msg)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Deployer {
        policy: vec![
            Policy::parse("DeployerPolicy", &policy["PolicyDocument"].to_string())
                .map_err(anyhow::Error::msg)?,
        ],
        role: role_policies,
        role_arn,
    })
}

fn allowed(policies: &[Policy], action: &str, resource: &str, context: &[(&str, &str)]) -> bool {
    evaluate(
        policies,
        &Request {
            principal: Principal::Attached,
            action,
            resource,
            context,
        },
    )
    .is_allowed()
}

fn stack_arn(stack: &str) -> String {
    format!(
        "arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/0f1e2d3c-aaaa-bbbb-cccc-000000000000"
    )
}

/// Condition keys a request carries, by name.
type Conditions = Vec<(String, String)>;

/// The requests one recorded CLI call makes: (action, resource, context).
fn requests(call: &[String]) -> Vec<(String, String, Conditions)> {
    let arg = |name: &str| {
        call.iter()
            .position(|a| a == name)
            .and_then(|i| call.get(i + 1))
            .cloned()
    };
    let words: Vec<&str> = call.iter().take(2).map(String::as_str).collect();
    let s3 = |target: &str| format!("arn:aws:s3:::{}", target.trim_start_matches("s3://"));
    match words.as_slice() {
        ["s3", "cp"] => vec![("s3:PutObject".into(), s3(call.last().unwrap()), vec![])],
        // `aws s3 sync <dir> s3://<bucket>/<prefix>`: lists the prefix, puts each file.
        ["s3", "sync"] => {
            let target = call.last().unwrap().trim_start_matches("s3://");
            let (bucket, prefix) = target.split_once('/').unwrap_or((target, ""));
            vec![
                (
                    "s3:ListBucket".into(),
                    format!("arn:aws:s3:::{bucket}"),
                    vec![("s3:prefix".into(), prefix.to_owned())],
                ),
                (
                    "s3:PutObject".into(),
                    s3(&format!("{target}{VERSION}/base.yaml")),
                    vec![],
                ),
            ]
        }
        ["s3api", "head-object"] => vec![(
            "s3:GetObject".into(),
            s3(&format!(
                "{}/{}",
                arg("--bucket").unwrap(),
                arg("--key").unwrap()
            )),
            vec![],
        )],
        ["cloudformation", "describe-stacks"] => vec![(
            "cloudformation:DescribeStacks".into(),
            stack_arn(&arg("--stack-name").unwrap()),
            vec![],
        )],
        ["cloudformation", "deploy"] => {
            let stack = stack_arn(&arg("--stack-name").unwrap());
            let role = arg("--role-arn").unwrap_or_default();
            let mut out = vec![
                (
                    "cloudformation:DescribeStacks".into(),
                    stack.clone(),
                    vec![],
                ),
                (
                    "cloudformation:CreateChangeSet".into(),
                    stack.clone(),
                    if role.is_empty() {
                        vec![]
                    } else {
                        vec![("cloudformation:RoleArn".into(), role.clone())]
                    },
                ),
                (
                    "cloudformation:DescribeChangeSet".into(),
                    stack.clone(),
                    vec![],
                ),
                ("cloudformation:ExecuteChangeSet".into(), stack, vec![]),
            ];
            if !role.is_empty() {
                out.push((
                    "iam:PassRole".into(),
                    role,
                    vec![(
                        "iam:PassedToService".into(),
                        "cloudformation.amazonaws.com".into(),
                    )],
                ));
            }
            // --s3-bucket: the template is uploaded under --s3-prefix.
            if let (Some(bucket), Some(prefix)) = (arg("--s3-bucket"), arg("--s3-prefix")) {
                out.push((
                    "s3:PutObject".into(),
                    format!("arn:aws:s3:::{bucket}/{prefix}/0123456789abcdef.template"),
                    vec![],
                ));
            }
            out
        }
        other => panic!("no requests known for {other:?}"),
    }
}

#[test]
fn the_deployer_runs_the_deploy_targets_only_through_cloudformation_as_its_role() -> Result<()> {
    let deployer = deployer()?;
    let scratch = Scratch::new("deployer");
    stand_in_release(scratch.path());
    let dist = scratch.path().join("dist");
    let cli = Cli::new("deployer");
    let release = [
        format!("RELEASE={VERSION}"),
        format!("RELEASE_DIR={}", dist.display()),
        format!("CFN_ROLE={}", deployer.role_arn),
    ];
    let release: Vec<&str> = release.iter().map(String::as_str).collect();
    let (ok, out) = cli.aws(&[
        "s3",
        "sync",
        &format!("{}/interruption-router/", dist.display()),
        "s3://artifacts/interruption-router/",
    ]);
    assert!(ok, "{out}");
    for target in [
        &["deploy-base", "BUCKET=artifacts", "REGION=eu-west-1"][..],
        &[
            "deploy-spoke",
            "REGION=eu-west-2",
            "HUB_BUS=arn:aws:events:eu-west-1:123456789012:event-bus/interruption-router-hub",
            "ROUTER_ROLE=arn:aws:iam::123456789012:role/r",
        ],
        &[
            "deploy-tenant",
            "CLUSTER=alpha",
            "REGION=eu-west-1",
            "KARPENTER_ROLE=KarpenterController-alpha",
        ],
        &["deploy-fis", "CLUSTER=alpha", "REGION=eu-west-1"],
    ] {
        let (ok, out) = cli.make(&[target, &release[..]].concat());
        assert!(ok, "{target:?}: {out}");
    }
    let calls = cli.calls();
    assert_eq!(cli.deploys().len(), 4);
    let mut checked = 0;
    for call in &calls {
        for (action, resource, context) in requests(call) {
            let context: Vec<(&str, &str)> = context
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert!(
                allowed(&deployer.policy, &action, &resource, &context),
                "{call:?}: {action} on {resource} {context:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked} requests");

    // The spoke StackSet over an organisation (docs/many-accounts.md).
    let stackset = format!(
        "arn:aws:cloudformation:{REGION}:{ACCOUNT}:stackset/interruption-router-spoke:5d2a6e1c-0000-0000-0000-000000000000"
    );
    // CreateStackSet takes no resource: only the release's spoke.yaml may be its template.
    let url = format!(
        "https://artifacts.s3.eu-west-1.amazonaws.com/interruption-router/{VERSION}/spoke.yaml"
    );
    let from_release = [("cloudformation:TemplateUrl", url.as_str())];
    assert!(allowed(
        &deployer.policy,
        "cloudformation:CreateStackSet",
        "*",
        &from_release
    ));
    for action in [
        "cloudformation:UpdateStackSet",
        "cloudformation:CreateStackInstances",
        "cloudformation:DescribeStackSetOperation",
        "cloudformation:ListStackInstances",
    ] {
        assert!(
            allowed(&deployer.policy, action, &stackset, &from_release),
            "{action}"
        );
    }
    for other in [
        "https://artifacts.s3.eu-west-1.amazonaws.com/payments/template.yaml",
        "https://elsewhere.s3.amazonaws.com/interruption-router/0.2.0/spoke.yaml",
    ] {
        let context = [("cloudformation:TemplateUrl", other)];
        assert!(
            !allowed(
                &deployer.policy,
                "cloudformation:CreateStackSet",
                "*",
                &context
            ),
            "{other}"
        );
        assert!(
            !allowed(
                &deployer.policy,
                "cloudformation:UpdateStackSet",
                &stackset,
                &context
            ),
            "{other}"
        );
    }
    assert!(allowed(
        &deployer.policy,
        "s3:GetObject",
        &format!("arn:aws:s3:::artifacts/interruption-router/{VERSION}/spoke.yaml"),
        &[]
    ));

    // Nothing else: a change without the deploy role, as another role, to another stack, a
    // StackSet of another name, an object outside the release's prefix.
    let ours = stack_arn("interruption-router");
    let as_role = [("cloudformation:RoleArn", deployer.role_arn.as_str())];
    assert!(allowed(
        &deployer.policy,
        "cloudformation:CreateChangeSet",
        &ours,
        &as_role
    ));
    assert!(!allowed(
        &deployer.policy,
        "cloudformation:CreateChangeSet",
        &ours,
        &[]
    ));
    assert!(!allowed(
        &deployer.policy,
        "cloudformation:CreateChangeSet",
        &ours,
        &[(
            "cloudformation:RoleArn",
            "arn:aws:iam::123456789012:role/Admin"
        )]
    ));
    assert!(!allowed(
        &deployer.policy,
        "cloudformation:CreateChangeSet",
        &stack_arn("payments"),
        &as_role
    ));
    assert!(!allowed(
        &deployer.policy,
        "iam:PassRole",
        "arn:aws:iam::123456789012:role/Admin",
        &[("iam:PassedToService", "cloudformation.amazonaws.com")]
    ));
    assert!(!allowed(
        &deployer.policy,
        "cloudformation:CreateStackInstances",
        &stackset.replace("interruption-router-spoke", "payments"),
        &[]
    ));
    assert!(!allowed(
        &deployer.policy,
        "s3:PutObject",
        "arn:aws:s3:::artifacts/other/x",
        &[]
    ));
    for (action, resource) in [
        (
            "iam:CreateRole",
            "arn:aws:iam::123456789012:role/interruption-router-x",
        ),
        (
            "lambda:UpdateFunctionCode",
            "arn:aws:lambda:eu-west-1:123456789012:function:interruption-router-x",
        ),
        (
            "sqs:CreateQueue",
            "arn:aws:sqs:eu-west-1:123456789012:karpenter-alpha",
        ),
    ] {
        assert!(
            !allowed(&deployer.policy, action, resource, &[]),
            "{action}: only through CloudFormation"
        );
    }
    Ok(())
}

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
        "AWS::IAM::Role",
        &["iam:AttachRolePolicy", "iam:DetachRolePolicy"],
        "the stacks' roles have no ManagedPolicyArns",
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
            format!("arn:aws:iam::{ACCOUNT}:policy/{stack}-{logical}-GENERATED"),
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
        .export("interruption-router:QueuePrefix", "karpenter-");
    let spoke = Stage::new("interruption-router-spoke", ACCOUNT, "eu-west-2")
        .parameter(
            "HubEventBusArn",
            "arn:aws:events:eu-west-1:123456789012:event-bus/interruption-router-hub",
        )
        .parameter(
            "RouterRoleArn",
            "arn:aws:iam::123456789012:role/platform/interruption-router-RouterRole-GENERATED",
        )
        .parameter("SpokeRolePath", "/platform/");
    let fis = Stage::new("interruption-router-fis-alpha", ACCOUNT, REGION)
        .parameter("ClusterName", "alpha");
    let mut checked: BTreeMap<String, usize> = BTreeMap::new();
    for (name, text, stage) in [
        ("base.yaml", BASE_TEMPLATE, hub.clone()),
        (
            "base.yaml",
            BASE_TEMPLATE,
            hub.clone().parameter("IngestMode", "Direct"),
        ),
        ("tenant.yaml", TENANT_TEMPLATE, tenant),
        ("spoke.yaml", SPOKE_TEMPLATE, spoke),
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
