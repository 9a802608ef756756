//! The deployer's least privilege (cloudformation/deployer.yaml), evaluated as IAM does with the
//! project's policy evaluator on the documents CloudFormation would create:
//!
//! * DeployerPolicy allows every AWS call the make deploy targets make (recorded by the AWS CLI
//!   stand-in, CFN_ROLE set) and the spoke StackSet's, and no change to a stack without the
//!   deploy role, to another stack, or outside the release's prefix;
//! * CloudFormationRole allows, on the resources each stack creates (as named in the deployed
//!   templates), every action AWS's resource schemas list for that type's handlers, less the ones
//!   for features the templates do not use (each named with why), and nothing on other names.
//!
//! The linters (tools/lint_policies.py, `make policy-lint`) check the same documents against
//! AWS's action, resource and condition-key database.
//!
//! [`deployer_policy`] holds the first, [`cloudformation_role`] the second, and [`escalation`]
//! every way a principal holding DeployerPolicy could have become an administrator, each seen
//! allowed by the deployer.yaml before it.

mod cloudformation_role;
mod deployer_policy;
mod escalation;

use anyhow::{Context, Result};
use aws_model::{
    policy::{Policy, Principal, Request, evaluate},
    stacks::DEPLOYER_TEMPLATE,
    template::{Stage, Template},
};
use serde_json::json;

pub(crate) const ACCOUNT: &str = "123456789012";
pub(crate) const REGION: &str = "eu-west-1";
/// The spoke stacks' (and the deployer's) SpokeRoleName.
pub(super) const SPOKE_ROLE_NAME: &str = "platform-router-spoke";

/// The deployer stack's documents and its role's ARN.
pub(crate) struct Deployer {
    /// DeployerPolicy, and StackSetDeployerPolicy beside it (whoever runs the spoke StackSet).
    pub(crate) policy: Vec<Policy>,
    /// PublisherPolicy: who writes the releases into the bucket.
    pub(super) publisher: Vec<Policy>,
    /// The role's inline policies.
    pub(super) role: Vec<Policy>,
    pub(crate) role_arn: String,
}

/// The deployer stack as the tests deploy it: artifacts in bucket `artifacts`, a spoke role
/// whose name does not start with the spoke stack's (the grants on the stack's generated names
/// must not be what lets the spoke's named roles through).
pub(super) fn stage() -> Stage {
    Stage::new("interruption-router-deployer", ACCOUNT, REGION)
        .parameter("ArtifactBucket", "artifacts")
        .parameter("SpokeRoleName", SPOKE_ROLE_NAME)
}

pub(crate) fn deployer() -> Result<Deployer> {
    deployed(&stage())
}

pub(super) fn deployed(stage: &Stage) -> Result<Deployer> {
    let template = Template::parse("deployer.yaml", DEPLOYER_TEMPLATE)?;
    let d = template.deploy(stage)?;
    let policy = d.properties("DeployerPolicy")?.context("DeployerPolicy")?;
    // Beside it where the spoke StackSet is run (one managed policy would not hold both).
    let stack_sets = d.properties("StackSetDeployerPolicy").ok().flatten();
    // None before deployer.yaml had one: the escalation tests then fail on what they check.
    let publisher = d.properties("PublisherPolicy").ok().flatten();
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
        policy: [
            ("DeployerPolicy", Some(policy)),
            ("StackSetDeployerPolicy", stack_sets),
        ]
        .into_iter()
        .filter_map(|(name, p)| Some((name, p?)))
        .map(|(name, p)| {
            Policy::parse(name, &p["PolicyDocument"].to_string()).map_err(anyhow::Error::msg)
        })
        .collect::<Result<Vec<_>>>()?,
        publisher: publisher
            .map(|p| Policy::parse("PublisherPolicy", &p["PolicyDocument"].to_string()))
            .transpose()
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .collect(),
        role: role_policies,
        role_arn,
    })
}

pub(crate) fn allowed(
    policies: &[Policy],
    action: &str,
    resource: &str,
    context: &[(&str, &str)],
) -> bool {
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

/// The URL of a release's template in bucket `artifacts`, as the make targets and the README name
/// it.
pub(crate) fn release_url(version: &str, template: &str) -> String {
    format!("https://artifacts.s3.{REGION}.amazonaws.com/interruption-router/{version}/{template}")
}

pub(super) fn stack_arn(stack: &str) -> String {
    format!(
        "arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/0f1e2d3c-aaaa-bbbb-cccc-000000000000"
    )
}

/// Condition keys a request carries, by name.
pub(super) type Conditions = Vec<(String, String)>;
