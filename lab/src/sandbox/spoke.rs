//! A member account: spoke.yaml and its tenant stacks deployed there and completed as the hub is,
//! reached with the credentials AssumeRole returns for its spoke role.

use anyhow::Result;

use aws_clients::deployed::Rendered;
use aws_clients::{aws::Aws, stacks::Stack};
use aws_model::stacks;
use local_aws::moto::{MotoServer, REGION, sdk_config_as};
use routerctl::verify;

use super::{Sandbox, rewrite_role_policies_as_json};

impl Sandbox {
    /// spoke.yaml in `account` (stack [`verify::DEFAULT_SPOKE_STACK`], forwarding to this hub's
    /// central bus, creating the spoke role) and one tenant.yaml per cluster importing from it and
    /// naming the cluster's Karpenter controller role, completed as [`Sandbox::deploy`] completes
    /// the hub: tenant queue policies admitting the spoke role, inline role policies as JSON, the
    /// on-call subscribed to its alarm topic. The account is reached as moto allows, with the
    /// credentials AssumeRole returns for its spoke role.
    pub async fn deploy_spoke(
        &self,
        moto: &MotoServer,
        account: &str,
        clusters: &[&str],
    ) -> Result<Spoke> {
        self.deploy_spoke_with(moto, account, clusters, &[]).await
    }

    /// [`Sandbox::deploy_spoke`], each tenant stack with these parameters too (`KmsKey=Create`
    /// for a locked-down account).
    pub async fn deploy_spoke_with(
        &self,
        moto: &MotoServer,
        account: &str,
        clusters: &[&str],
        tenant_parameters: &[(&str, &str)],
    ) -> Result<Spoke> {
        self.deploy_spoke_in(moto, account, REGION, &[], clusters, tenant_parameters)
            .await
    }

    /// [`Sandbox::deploy_spoke_with`] in `region`, the spoke stack with `spoke_parameters` too
    /// (`SpokeRoleName=…` for a hub per region).
    pub async fn deploy_spoke_in(
        &self,
        moto: &MotoServer,
        account: &str,
        region: &str,
        spoke_parameters: &[(&str, &str)],
        clusters: &[&str],
        tenant_parameters: &[(&str, &str)],
    ) -> Result<Spoke> {
        let spoke_role = interruption_router::config::DEFAULT_SPOKE_ROLE_NAME;
        let aws = Aws::new(&sdk_config_as(moto.endpoint(), account, region, spoke_role).await?)?;
        let stack = aws_clients::stacks::create(
            &aws.cfn,
            verify::DEFAULT_SPOKE_STACK,
            stacks::SPOKE_TEMPLATE,
            &[
                &[
                    ("HubEventBusArn", self.base.output("HubEventBusArn")?),
                    ("RouterRoleArn", self.router_role_arn()?),
                ],
                spoke_parameters,
            ]
            .concat(),
        )
        .await?;
        let role = stack.output("SpokeRoleArn")?.to_owned();
        for cluster in clusters {
            // As at the hub: Karpenter's controller role is named, so the tenant stack lets it
            // read the new queue.
            let karpenter = super::karpenter_role_name(cluster);
            super::create_karpenter_role(&aws.iam, &karpenter).await?;
            aws_clients::stacks::create(
                &aws.cfn,
                &stacks::tenant_stack_name(verify::DEFAULT_SPOKE_STACK, cluster),
                stacks::TENANT_TEMPLATE,
                // No BaseStackName: the queue imports the region's exports (the spoke's here).
                &[
                    &[("ClusterName", *cluster), ("KarpenterRoleName", &karpenter)],
                    tenant_parameters,
                ]
                .concat(),
            )
            .await?;
            rewrite_role_policies_as_json(&aws.iam, &karpenter).await?;
            let tenant = stacks::tenant_stack_name(verify::DEFAULT_SPOKE_STACK, cluster);
            let rendered = Rendered::of(&aws, &tenant).await?;
            super::put_queue_policy(
                &aws,
                &rendered,
                "InterruptionQueuePolicy",
                "InterruptionQueue",
            )
            .await?;
        }
        let forward =
            aws_clients::aws::stack_resource(&aws, &stack.name, "ForwardToHubRole").await?;
        let mut roles = vec![role.clone(), forward];
        // HubDirectQueueArn: the role the rules write the hub's direct queue as.
        if stack.outputs.contains_key("DirectRoleArn") {
            roles.push(aws_clients::aws::stack_resource(&aws, &stack.name, "DirectRole").await?);
        }
        for role in &roles {
            rewrite_role_policies_as_json(&aws.iam, role).await?;
        }
        super::subscribe_on_call(&aws, stack.output("AlarmTopicArn")?, &stack.name).await?;
        Ok(Spoke {
            aws,
            account: account.to_owned(),
            stack,
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
        })
    }
}

/// A member account's spoke stack and tenant stacks ([`Sandbox::deploy_spoke`]), and clients
/// acting in that account.
pub struct Spoke {
    pub aws: Aws,
    pub account: String,
    pub stack: Stack,
    pub clusters: Vec<String>,
}

impl Spoke {
    /// The role the hub's router assumes in this account.
    pub fn role_arn(&self) -> Result<&str> {
        self.stack.output("SpokeRoleArn")
    }
}
