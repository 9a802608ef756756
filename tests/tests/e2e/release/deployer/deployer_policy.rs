//! DeployerPolicy: every AWS call the make deploy targets make for a release (recorded by the AWS
//! CLI stand-in, RELEASE and CFN_ROLE set) and the spoke StackSet's are allowed, and nothing
//! else; publishing the release (aws s3 sync) is PublisherPolicy's.

use anyhow::Result;
use interruption_router::VERSION;

use super::{ACCOUNT, Conditions, REGION, allowed, deployer, stack_arn};
use crate::{
    deploy_targets::Cli,
    release::{Scratch, deploying::stand_in_release},
};

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
        // The test's own set-up (the account's Karpenter role), not a target's call.
        ["iam", "create-role"] => vec![],
        // make deploy-tenant's check that Karpenter's role exists (IAM is global).
        ["iam", "get-role"] => vec![(
            "iam:GetRole".into(),
            format!(
                "arn:aws:iam::{ACCOUNT}:role/{}",
                arg("--role-name").unwrap()
            ),
            vec![],
        )],
        // A release's template, read before its stack is changed: no stack to name.
        ["cloudformation", "get-template-summary"] => vec![(
            "cloudformation:GetTemplateSummary".into(),
            "*".into(),
            vec![],
        )],
        ["cloudformation", "create-change-set"] => {
            let stack = stack_arn(&arg("--stack-name").unwrap());
            let role = arg("--role-arn").unwrap_or_default();
            let mut context = vec![(
                "cloudformation:TemplateUrl".to_owned(),
                arg("--template-url").unwrap(),
            )];
            let mut out = Vec::new();
            if !role.is_empty() {
                context.push(("cloudformation:RoleArn".into(), role.clone()));
                out.push((
                    "iam:PassRole".into(),
                    role,
                    vec![(
                        "iam:PassedToService".into(),
                        "cloudformation.amazonaws.com".into(),
                    )],
                ));
            }
            out.push(("cloudformation:CreateChangeSet".into(), stack, context));
            out
        }
        [
            "cloudformation",
            "describe-change-set" | "delete-change-set" | "execute-change-set",
        ] => {
            let action = match words[1] {
                "describe-change-set" => "cloudformation:DescribeChangeSet",
                "delete-change-set" => "cloudformation:DeleteChangeSet",
                _ => "cloudformation:ExecuteChangeSet",
            };
            vec![(
                action.into(),
                stack_arn(&arg("--stack-name").unwrap()),
                vec![],
            )]
        }
        ["cloudformation", "wait"] => vec![(
            if call[2].starts_with("change-set") {
                "cloudformation:DescribeChangeSet"
            } else {
                "cloudformation:DescribeStacks"
            }
            .into(),
            stack_arn(&arg("--stack-name").unwrap()),
            vec![],
        )],
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
        "BUCKET=artifacts".to_owned(),
    ];
    let release: Vec<&str> = release.iter().map(String::as_str).collect();
    cli.role("alpha-karpenter");
    let (ok, out) = cli.aws(&[
        "s3",
        "sync",
        &format!("{}/interruption-router/", dist.display()),
        "s3://artifacts/interruption-router/",
    ]);
    assert!(ok, "{out}");
    // Publishing the release is the publisher's, never the deployer's: a key the deployer could
    // write would be a template it could deploy.
    let publishing = cli.calls();
    let sync = publishing
        .iter()
        .find(|c| c.starts_with(&["s3".to_owned(), "sync".to_owned()]))
        .expect("the sync");
    let published = requests(sync);
    assert!(published.len() >= 2, "{published:?}");
    for (action, resource, context) in &published {
        let context: Vec<(&str, &str)> = context
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert!(
            allowed(&deployer.publisher, action, resource, &context),
            "{action} {resource}"
        );
        if action == "s3:PutObject" {
            assert!(
                !allowed(&deployer.policy, action, resource, &context),
                "{action} {resource}"
            );
        }
    }
    for target in [
        &["deploy-base", "REGION=eu-west-1"][..],
        // A member account's spoke, in the region of its artifact bucket (deployer.yaml is
        // deployed once per bucket's region; its template URLs name that region).
        &[
            "deploy-spoke",
            "REGION=eu-west-1",
            "HUB_BUS=arn:aws:events:eu-west-1:999999999999:event-bus/interruption-router-hub",
            "ROUTER_ROLE=arn:aws:iam::999999999999:role/r",
        ],
        &[
            "deploy-tenant",
            "CLUSTER=alpha",
            "REGION=eu-west-1",
            "KARPENTER_ROLE=alpha-karpenter",
        ],
        &["deploy-fis", "CLUSTER=alpha", "REGION=eu-west-1"],
    ] {
        let (ok, out) = cli.make(&[target, &release[..]].concat());
        assert!(ok, "{target:?}: {out}");
    }
    let calls = cli.calls()[publishing.len()..].to_vec();
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
    assert!(checked > 30, "{checked} requests");

    // The spoke StackSet over an organisation (docs/many-accounts.md).
    let stackset = format!(
        "arn:aws:cloudformation:{REGION}:{ACCOUNT}:stackset/interruption-router-spoke:5d2a6e1c-0000-0000-0000-000000000000"
    );
    // CreateStackSet takes no resource: only the release's spoke.yaml may be its template.
    let url = super::release_url(VERSION, "spoke.yaml");
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
    let base_url = super::release_url(VERSION, "base.yaml");
    let as_role = [
        ("cloudformation:RoleArn", deployer.role_arn.as_str()),
        ("cloudformation:TemplateUrl", base_url.as_str()),
    ];
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
        &[
            (
                "cloudformation:RoleArn",
                "arn:aws:iam::123456789012:role/Admin"
            ),
            ("cloudformation:TemplateUrl", base_url.as_str()),
        ]
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
    assert!(!allowed(
        &deployer.policy,
        "s3:PutObject",
        &format!("arn:aws:s3:::artifacts/interruption-router/{VERSION}/base.yaml"),
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
