//! Where tenant queues are checked: the hub's own account, where the router writes them as its
//! router role and tenant stacks import from the base stack; or a member account, where it
//! writes them as the spoke role and tenant stacks import from the spoke stack. The checks are
//! the same in both ([`super::check`]); a [`Site`] gives them the sender, the check names and
//! the fixes' wording.

use aws_model::stacks::tenant_stack_name;

use crate::deployment::Base;

/// One account and region whose tenant queues are checked.
pub(crate) struct Site<'a> {
    /// The hub's base stack (`make deploy-tenant`'s STACK_NAME names tenant stacks after it).
    pub base: &'a str,
    pub account: &'a str,
    pub region: &'a str,
    pub partition: &'a str,
    pub place: Place<'a>,
    /// The role the router sends with here (the base stack's router role, or the spoke role);
    /// `None` when it is unknown, which its own check reports.
    pub sender: Option<&'a str>,
    /// The queue prefix the router's role may write here (QueuePrefix).
    pub queue_prefix: Option<&'a str>,
    /// The router here also serves other accounts (a hub with a central bus or a served list):
    /// its own account may run no cluster of its own (an organisation's hub usually runs none).
    pub serves_others: bool,
}

/// Which kind of account a [`Site`] is.
pub(crate) enum Place<'a> {
    /// The hub's own account, with its base stack.
    Hub,
    /// A member account, with its spoke stack.
    Member { spoke_stack: &'a str },
}

impl<'a> Site<'a> {
    /// The hub's own account in `region`, as the base stack describes it.
    pub fn hub(base: &'a Base, region: &'a str) -> Self {
        Self {
            base: &base.name,
            account: &base.account,
            region,
            partition: &base.partition,
            place: Place::Hub,
            sender: base.output("RouterRoleArn"),
            queue_prefix: base.output("QueuePrefix"),
            serves_others: base.assumes_spoke_roles(),
        }
    }

    /// The names `cluster`'s tenant stack may have here: `make deploy-tenant`'s (after its
    /// STACK_NAME, the base stack's name); in a member account also one named after the spoke
    /// stack.
    pub fn tenant_stacks(&self, cluster: &str) -> Vec<String> {
        let mut names = vec![tenant_stack_name(self.base, cluster)];
        if let Place::Member { spoke_stack } = self.place {
            names.push(tenant_stack_name(spoke_stack, cluster));
        }
        names
    }

    /// A check's full name: as given at the hub, `spoke:<account>:…` in a member.
    pub fn name(&self, check: &str) -> String {
        match self.place {
            Place::Hub => check.to_owned(),
            Place::Member { .. } => format!("spoke:{}:{check}", self.account),
        }
    }

    /// How the report calls the sender: `router`, `spoke role`.
    pub fn sender_label(&self) -> &'static str {
        match self.place {
            Place::Hub => "router",
            Place::Member { .. } => "spoke role",
        }
    }

    /// The check that the sender's own policies let it write a cluster's queue.
    pub fn sender_check(&self) -> &'static str {
        match self.place {
            Place::Hub => "router-role",
            Place::Member { .. } => "spoke-role",
        }
    }

    /// The stack tenant stacks here import from, and how a report names it.
    fn imported(&self) -> String {
        match self.place {
            Place::Hub => format!("the base stack {}", self.base),
            Place::Member { spoke_stack } => format!("the spoke stack {spoke_stack}"),
        }
    }

    /// The command that deploys or updates `cluster`'s tenant stack here.
    pub fn command(&self, cluster: &str) -> String {
        let region = self.region;
        match self.place {
            Place::Hub => format!(
                "make deploy-tenant CLUSTER={cluster} REGION={region} STACK_NAME={}",
                self.base
            ),
            Place::Member { .. } => format!("make deploy-tenant CLUSTER={cluster} REGION={region}"),
        }
    }

    /// Deploying `cluster`'s tenant stack, as a fix.
    pub fn deploy(&self, cluster: &str) -> String {
        match self.place {
            Place::Hub => format!("deploy the tenant stack: {}", self.command(cluster)),
            Place::Member { .. } => format!(
                "deploy the tenant stack with account {}'s credentials: {} (it imports the spoke \
                 role and QueuePrefix {} exports for the region)",
                self.account,
                self.command(cluster),
                self.imported()
            ),
        }
    }

    /// Updating `cluster`'s tenant stack, as a fix.
    pub fn redeploy(&self, cluster: &str) -> String {
        match self.place {
            Place::Hub => format!("update the tenant stack: {}", self.command(cluster)),
            Place::Member { .. } => format!(
                "update the tenant stack of {cluster} with account {}'s credentials: {}",
                self.account,
                self.command(cluster)
            ),
        }
    }

    /// Where no tenant queue was found.
    pub fn nowhere(&self, prefix: &str) -> String {
        match self.place {
            Place::Hub => format!(
                "no queue named {prefix}… in {}: the router has nowhere to deliver",
                self.region
            ),
            Place::Member { .. } => format!(
                "no queue named {prefix}… in account {}, {}: the router has nowhere to deliver \
                 this account's events",
                self.account, self.region
            ),
        }
    }

    /// The fix for [`Site::nowhere`].
    pub fn deploy_any(&self) -> String {
        match self.place {
            Place::Hub => format!(
                "deploy cloudformation/tenant.yaml per cluster ({}), or name clusters with \
                 --cluster",
                self.command("<name>")
            ),
            Place::Member { .. } => format!(
                "deploy cloudformation/tenant.yaml per cluster in account {}, region {} ({} with \
                 that account's credentials): it imports the spoke role and QueuePrefix {} \
                 exports for the region",
                self.account,
                self.region,
                self.command("<name>"),
                self.imported()
            ),
        }
    }

    /// The fix for a queue policy that names another role than `sender`.
    pub fn wrong_sender(&self, sender: &str) -> String {
        let role = match self.place {
            Place::Hub => "router role",
            Place::Member { .. } => "spoke role",
        };
        format!(
            "the policy must name the {role}: update the tenant stack with BaseStackName empty (it \
             then imports the {role} {} exports for the region) or RouterRoleArn={sender}",
            self.imported()
        )
    }

    /// The fix for a sender whose own policies do not reach a cluster's queue (`statements`:
    /// the template's statements that would).
    pub fn sender_reach(&self, statements: &str) -> String {
        let prefix = self.queue_prefix.unwrap_or("see its QueuePrefix output");
        let update = match self.place {
            Place::Hub => "update the base stack".to_owned(),
            Place::Member { .. } => format!(
                "update the spoke stack that creates the role (CreateSpokeRole=true) in account {}",
                self.account
            ),
        };
        format!(
            "the role may use <QueuePrefix>* only: give the tenant stack the QueuePrefix of {} \
             ({prefix}), or restore the role's {statements} statement(s) ({update})",
            self.imported()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member<'a>() -> Site<'a> {
        Site {
            base: "ir",
            account: "111111111111",
            region: "us-west-2",
            partition: "aws",
            place: Place::Member {
                spoke_stack: "ir-spoke",
            },
            sender: None,
            queue_prefix: Some("karpenter-"),
            serves_others: false,
        }
    }

    /// A member's tenant stack may be named after the hub's base stack or after the spoke
    /// stack; at the hub only after the base stack.
    #[test]
    fn the_names_a_clusters_tenant_stack_may_have() {
        let base = crate::fixtures::base(&[], &[]);
        let hub = Site::hub(&base, "us-east-1");
        assert_eq!(
            hub.tenant_stacks("alpha"),
            [tenant_stack_name("ir", "alpha")]
        );
        assert_eq!(
            member().tenant_stacks("beta"),
            [
                tenant_stack_name("ir", "beta"),
                tenant_stack_name("ir-spoke", "beta")
            ]
        );
    }

    /// Each fix names the stack its tenant stacks import from and the credentials to use.
    #[test]
    fn a_members_fixes_name_its_spoke_stack_and_account() {
        let site = member();
        let command = "make deploy-tenant CLUSTER=beta REGION=us-west-2";
        assert_eq!(
            site.redeploy("beta"),
            format!(
                "update the tenant stack of beta with account 111111111111's credentials: {command}"
            )
        );
        assert!(
            site.deploy("beta")
                .ends_with("QueuePrefix the spoke stack ir-spoke exports for the region)"),
            "{}",
            site.deploy("beta")
        );
        let base = crate::fixtures::base(&[], &[]);
        let hub = Site::hub(&base, "us-east-1");
        assert_eq!(
            hub.redeploy("alpha"),
            "update the tenant stack: make deploy-tenant CLUSTER=alpha REGION=us-east-1 STACK_NAME=ir"
        );
        assert_eq!(
            site.sender_reach("SendToClusterQueues"),
            "the role may use <QueuePrefix>* only: give the tenant stack the QueuePrefix of the \
             spoke stack ir-spoke (karpenter-), or restore the role's SendToClusterQueues \
             statement(s) (update the spoke stack that creates the role (CreateSpokeRole=true) \
             in account 111111111111)"
        );
        assert!(
            hub.wrong_sender("arn:aws:iam::123456789012:role/r")
                .contains("imports the router role the base stack ir exports"),
            "{}",
            hub.wrong_sender("x")
        );
    }
}
