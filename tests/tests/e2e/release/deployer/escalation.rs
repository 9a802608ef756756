//! Every way a principal holding DeployerPolicy could make itself an administrator, tried on the
//! policy evaluator against the deployer stack's documents (docs/security.md's rows for "the
//! deployer"). Each was allowed by deployer.yaml as it stood at ab57aaa, and each test here was
//! seen failing on it:
//!
//! * a stack it may change (`<StackName>-tenant-x`) created from a template of its own, one
//!   managed policy granting `*` attached to itself, as CloudFormationRole;
//! * the organisation's spoke StackSet updated to a `spoke.yaml` it uploaded itself, which the
//!   StackSet's execution roles run in every member account;
//! * a new default version of a tenant's grant, which is attached to Karpenter's role;
//! * with a permissions boundary meant to cap the stacks' roles, a role made without it.

use anyhow::Result;
use aws_model::{
    stacks::TENANT_TEMPLATE,
    template::{Stage, Template},
};
use interruption_router::VERSION;
use serde_json::json;

use super::{ACCOUNT, REGION, allowed, deployed, deployer, release_url, stack_arn, stage};

/// The stacks the deployer may change, each with the release's template it is made from.
const STACKS: [(&str, &str); 4] = [
    ("interruption-router", "base.yaml"),
    ("interruption-router-tenant-x", "tenant.yaml"),
    ("interruption-router-fis-x", "fis.yaml"),
    ("interruption-router-spoke", "spoke.yaml"),
];
const TEMPLATES: [&str; 5] = [
    "base.yaml",
    "tenant.yaml",
    "fis.yaml",
    "spoke.yaml",
    "deployer.yaml",
];
const CHANGES: [&str; 3] = [
    "cloudformation:CreateStack",
    "cloudformation:UpdateStack",
    "cloudformation:CreateChangeSet",
];

/// Keys a deployer might upload and then name as a template: the release's own, others under
/// the release prefix (make deploy-base's old uploads among them), beside it, and keys a URL
/// pattern could be tricked into admitting.
fn candidate_keys() -> Vec<String> {
    let mut keys = Vec::new();
    for version in [VERSION, "0.1.0", "latest", "evil", "templates", "x/y"] {
        for name in TEMPLATES
            .iter()
            .copied()
            .chain(["evil.yaml", "0123456789abcdef.template"])
        {
            keys.push(format!("interruption-router/{version}/{name}"));
        }
    }
    for other in [
        "interruption-router/templates/0123456789abcdef.template",
        "interruption-router/bootstrap-arm64-0123456789abcdef.zip",
        "interruption-router-uploads/0.2.0/spoke.yaml",
        "uploads/interruption-router/0.2.0/spoke.yaml",
        "spoke.yaml",
    ] {
        keys.push(other.to_owned());
    }
    keys
}

/// Every URL form S3 answers for `key` of bucket `artifacts`, and a few that dress another key
/// up as a release's.
fn urls(key: &str) -> Vec<String> {
    vec![
        format!("https://artifacts.s3.{REGION}.amazonaws.com/{key}"),
        format!("https://artifacts.s3.amazonaws.com/{key}"),
        format!("https://s3.{REGION}.amazonaws.com/artifacts/{key}"),
        format!("https://s3.amazonaws.com/artifacts/{key}"),
        format!(
            "https://artifacts.s3.{REGION}.amazonaws.com/interruption-router/{VERSION}/../../{key}"
        ),
        format!(
            "https://artifacts.s3.{REGION}.amazonaws.com/{key}?/interruption-router/0/spoke.yaml"
        ),
        format!(
            "https://artifacts.s3.{REGION}.amazonaws.com/{key}#/interruption-router/0/spoke.yaml"
        ),
        format!("https://artifacts.s3.{REGION}.amazonaws.com/interruption-router/0/%2e%2e/{key}"),
    ]
}

fn s3(key: &str) -> String {
    format!("arn:aws:s3:::artifacts/{key}")
}

#[test]
fn the_deployer_cannot_have_the_deploy_role_deploy_a_template_of_its_own() -> Result<()> {
    let d = deployer()?;
    for (stack, own) in STACKS {
        let arn = stack_arn(stack);
        for action in CHANGES {
            let as_role = [("cloudformation:RoleArn", d.role_arn.as_str())];
            // A template body, or the stack's previous template: no cloudformation:TemplateUrl.
            assert!(
                !allowed(&d.policy, action, &arn, &as_role),
                "{action} on {stack} with a template body"
            );
            // A template it wrote first, at any URL it could name.
            for key in candidate_keys() {
                if !allowed(&d.policy, "s3:PutObject", &s3(&key), &[]) {
                    continue;
                }
                for url in urls(&key) {
                    let context = [
                        ("cloudformation:RoleArn", d.role_arn.as_str()),
                        ("cloudformation:TemplateUrl", url.as_str()),
                    ];
                    assert!(
                        !allowed(&d.policy, action, &arn, &context),
                        "{action} on {stack} from {url}, which the deployer may write"
                    );
                }
            }
            // The release's own template for the stack: what the make targets deploy.
            for version in [VERSION, "0.1.0"] {
                let url = release_url(version, own);
                let context = [
                    ("cloudformation:RoleArn", d.role_arn.as_str()),
                    ("cloudformation:TemplateUrl", url.as_str()),
                ];
                assert!(
                    allowed(&d.policy, action, &arn, &context),
                    "{action} on {stack} from {url}"
                );
            }
            // Another of the release's templates, or the release's dressed up: refused.
            let mut refused: Vec<String> = TEMPLATES
                .iter()
                .filter(|t| **t != own)
                .map(|t| release_url(VERSION, t))
                .collect();
            refused.extend(
                urls(&format!("interruption-router/{VERSION}/{own}"))
                    .into_iter()
                    .skip(4),
            );
            for url in refused {
                let context = [
                    ("cloudformation:RoleArn", d.role_arn.as_str()),
                    ("cloudformation:TemplateUrl", url.as_str()),
                ];
                assert!(
                    !allowed(&d.policy, action, &arn, &context),
                    "{action} on {stack} from {url}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn the_deployer_writes_no_template_it_may_deploy_and_the_publisher_deploys_nothing() -> Result<()> {
    let d = deployer()?;
    let stackset = format!(
        "arn:aws:cloudformation:{REGION}:{ACCOUNT}:stackset/interruption-router-spoke:5d2a6e1c-0000-0000-0000-000000000000"
    );
    // The StackSet's template runs in every member account, with every permission there.
    for key in candidate_keys() {
        let writable = allowed(&d.policy, "s3:PutObject", &s3(&key), &[]);
        for url in urls(&key) {
            let context = [("cloudformation:TemplateUrl", url.as_str())];
            for (action, resource) in [
                ("cloudformation:CreateStackSet", "*"),
                ("cloudformation:UpdateStackSet", stackset.as_str()),
            ] {
                assert!(
                    !(writable && allowed(&d.policy, action, resource, &context)),
                    "the deployer may write {key} and {action} from {url}"
                );
            }
        }
    }
    let spoke = format!("interruption-router/{VERSION}/spoke.yaml");
    assert!(!allowed(&d.policy, "s3:PutObject", &s3(&spoke), &[]));
    assert!(allowed(&d.policy, "s3:GetObject", &s3(&spoke), &[]));
    // The release is published by another principal, which may deploy nothing.
    assert!(allowed(&d.publisher, "s3:PutObject", &s3(&spoke), &[]));
    let url = release_url(VERSION, "spoke.yaml");
    for (action, resource) in [
        ("cloudformation:CreateStackSet", "*".to_owned()),
        ("cloudformation:UpdateStackSet", stackset.clone()),
        (
            "cloudformation:CreateStack",
            stack_arn("interruption-router-spoke"),
        ),
        (
            "cloudformation:CreateChangeSet",
            stack_arn("interruption-router-spoke"),
        ),
        ("iam:PassRole", d.role_arn.clone()),
    ] {
        let context = [
            ("cloudformation:TemplateUrl", url.as_str()),
            ("cloudformation:RoleArn", d.role_arn.as_str()),
            ("iam:PassedToService", "cloudformation.amazonaws.com"),
        ];
        assert!(
            !allowed(&d.publisher, action, &resource, &context),
            "publisher: {action}"
        );
    }
    Ok(())
}

#[test]
fn the_deploy_role_never_gives_a_grant_another_stacks_role_holds_a_new_version() -> Result<()> {
    let role = deployer()?.role;
    let karpenter = format!("arn:aws:iam::{ACCOUNT}:role/alpha-karpenter");
    for grant in [
        format!(
            "arn:aws:iam::{ACCOUNT}:policy/interruption-router-tenant-alpha/karpenter-alpha/sse-sqs/interruption-router-tenant-alpha-KarpenterQueueAccess-GENERATED"
        ),
        format!(
            "arn:aws:iam::{ACCOUNT}:policy/interruption-router-tenant-alpha-KarpenterQueueAccess-GENERATED"
        ),
    ] {
        for action in ["iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion"] {
            assert!(!allowed(&role, action, &grant, &[]), "{action} on {grant}");
        }
        // The tenant stacks' grants are what it attaches (to the role a tenant stack names).
        assert!(allowed(
            &role,
            "iam:AttachRolePolicy",
            &karpenter,
            &[("iam:PolicyARN", grant.as_str())]
        ));
    }
    for policy in [
        "arn:aws:iam::aws:policy/AdministratorAccess".to_owned(),
        format!("arn:aws:iam::{ACCOUNT}:policy/interruption-router-admin"),
    ] {
        assert!(!allowed(
            &role,
            "iam:AttachRolePolicy",
            &karpenter,
            &[("iam:PolicyARN", policy.as_str())]
        ));
    }

    // tenant.yaml (the only template a tenant stack is made from) attaches its grant to the role
    // it names and nothing else, under a path naming what the document depends on: a change of
    // queue or key makes a new policy, never a new version of one attached to that role.
    let tenant = Template::parse("tenant.yaml", TENANT_TEMPLATE)?;
    let mut tenant_stage = Stage::new("interruption-router-tenant-alpha", ACCOUNT, REGION)
        .parameter("ClusterName", "alpha")
        .parameter("KarpenterRoleName", "alpha-karpenter")
        .export(
            "interruption-router:RouterRoleArn",
            &format!("arn:aws:iam::{ACCOUNT}:role/interruption-router-RouterRole-X"),
        )
        .export("interruption-router:QueuePrefix", "karpenter-")
        .export(
            "interruption-router:AlarmTopicArn",
            &format!("arn:aws:sns:{REGION}:{ACCOUNT}:topic"),
        );
    let paths: Vec<String> = [
        "",
        "Create",
        &format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"),
    ]
    .iter()
    .map(|key| -> Result<String> {
        tenant_stage = tenant_stage.clone().parameter("KmsKey", key);
        let d = tenant.deploy(&tenant_stage)?;
        let grant = d.properties("KarpenterQueueAccess")?.expect("the grant");
        assert_eq!(grant["Roles"], json!(["alpha-karpenter"]));
        assert!(grant.get("Groups").is_none() && grant.get("Users").is_none());
        assert!(grant.get("ManagedPolicyName").is_none());
        Ok(grant["Path"].as_str().unwrap_or_default().to_owned())
    })
    .collect::<Result<_>>()?;
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with("/interruption-router-tenant-alpha/karpenter-alpha/")),
        "{paths:?}"
    );
    assert_eq!(
        paths[0],
        "/interruption-router-tenant-alpha/karpenter-alpha/sse-sqs/"
    );
    assert!(
        paths[2].ends_with("/1234abcd-12ab-34cd-56ef-1234567890ab/"),
        "{paths:?}"
    );
    assert_ne!(paths[0], paths[1]);
    Ok(())
}

#[test]
fn with_a_boundary_the_deploy_role_makes_and_changes_only_bounded_roles() -> Result<()> {
    let ours = format!("arn:aws:iam::{ACCOUNT}:role/interruption-router-RouterRole-GENERATED");
    let spoke =
        format!("arn:aws:iam::{ACCOUNT}:role/platform/platform-router-spoke-forward-{REGION}");
    let boundary = format!("arn:aws:iam::{ACCOUNT}:policy/platform/boundary");
    let role = deployed(&stage().parameter("PermissionsBoundary", "platform/boundary"))?.role;
    for action in [
        "iam:CreateRole",
        "iam:PutRolePolicy",
        "iam:DeleteRolePolicy",
        "iam:PutRolePermissionsBoundary",
    ] {
        for target in [&ours, &spoke] {
            assert!(
                allowed(
                    &role,
                    action,
                    target,
                    &[("iam:PermissionsBoundary", boundary.as_str())]
                ),
                "{action} on {target}"
            );
            assert!(
                !allowed(&role, action, target, &[]),
                "{action} on {target} without a boundary"
            );
            assert!(
                !allowed(
                    &role,
                    action,
                    target,
                    &[(
                        "iam:PermissionsBoundary",
                        &format!("arn:aws:iam::{ACCOUNT}:policy/other")
                    )]
                ),
                "{action} on {target} with another boundary"
            );
        }
    }
    assert!(!allowed(
        &role,
        "iam:DeleteRolePermissionsBoundary",
        &ours,
        &[("iam:PermissionsBoundary", boundary.as_str())]
    ));
    // Without a boundary asked for, the roles are made as before.
    let role = deployer()?.role;
    assert!(allowed(&role, "iam:CreateRole", &ours, &[]));
    assert!(allowed(
        &role,
        "iam:DeleteRolePermissionsBoundary",
        &ours,
        &[]
    ));
    Ok(())
}
