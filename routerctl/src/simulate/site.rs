//! Where simulate picks a member account's instances: with credentials of that account, the
//! caller's own or a profile's. Never through the spoke role: spoke.yaml lets only the hub's
//! router role assume it, so in AWS an operator's AssumeRole is refused, and simulate says so
//! before it sends anything.

use anyhow::{Context, Result, bail};

use aws_clients::aws::Aws;

/// How routerctl acts in the cluster's account to pick its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// The caller's own credentials: they are in that account.
    Caller,
    /// A named profile's credentials, checked to be in that account.
    Profile(String),
}

/// How to reach `account` from a caller in `caller`, or why routerctl cannot. Not through the
/// spoke role: it trusts only the hub's router role (spoke.yaml's `OnlyTheHubRouter`), so in AWS
/// an operator's AssumeRole of it is refused; the refusal is given here, before anything is sent.
pub fn site(caller: &str, account: &str, profile: Option<&str>) -> Result<Site> {
    match profile {
        Some(profile) => Ok(Site::Profile(profile.to_owned())),
        None if caller == account => Ok(Site::Caller),
        None => bail!(
            "--account {account}: your credentials are in account {caller}, and the cluster's \
             instances are picked with credentials of {account}. Pass --profile with a profile \
             for account {account} (it needs ec2:DescribeInstances); the spoke role is no way in: \
             it trusts only the hub's router role (spoke.yaml, OnlyTheHubRouter)"
        ),
    }
}

/// Clients acting in the cluster's account and region: the caller's, or `profile`'s, refused
/// up front (see [`site`]) when neither is in `account`.
pub async fn load_site(
    caller: &Aws,
    region: &str,
    account: &str,
    profile: Option<&str>,
) -> Result<Aws> {
    let (caller_account, _) = caller.caller().await?;
    match site(&caller_account, account, profile)? {
        Site::Caller => Ok(caller.clone()),
        Site::Profile(profile) => {
            let aws = Aws::load_profile(&profile, region)
                .await
                .with_context(|| format!("--profile {profile}"))?;
            let (reached, _) = aws.caller().await.with_context(|| {
                format!("--profile {profile}: check its name (aws configure list-profiles)")
            })?;
            if reached != account {
                bail!("--profile {profile} acts in account {reached}, not --account {account}");
            }
            Ok(aws)
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_model::{
        policy::{Decision, Policy, Principal, Request, evaluate},
        stacks::SPOKE_TEMPLATE,
        template::{Stage, Template},
    };

    use super::{Site, site};

    const HUB: &str = "111111111111";
    const MEMBER: &str = "222222222222";
    const ROUTER: &str = "arn:aws:iam::111111111111:role/interruption-router-function";

    /// The spoke role's trust policy as spoke.yaml deploys it in `MEMBER`, and the decision on
    /// `principal`'s AssumeRole of that role.
    fn assume_spoke_role(principal: &str) -> Decision {
        let template = Template::parse("spoke.yaml", SPOKE_TEMPLATE).unwrap();
        let stage = Stage::new("interruption-router-spoke", MEMBER, "eu-west-1")
            .parameter("RouterRoleArn", ROUTER)
            .parameter(
                "HubEventBusArn",
                "arn:aws:events:eu-west-1:111111111111:event-bus/default",
            );
        let deployed = template.deploy(&stage).unwrap();
        let trust = deployed
            .property("SpokeRole", &["AssumeRolePolicyDocument"])
            .unwrap();
        assert!(trust.is_object(), "spoke.yaml has a SpokeRole trust policy");
        let trust = Policy::parse("SpokeRole trust", &trust.to_string()).unwrap();
        let role = format!("arn:aws:iam::{MEMBER}:role/interruption-router-spoke");
        evaluate(
            &[trust],
            &Request {
                principal: Principal::Aws(principal),
                action: "sts:AssumeRole",
                resource: &role,
                context: &[],
            },
        )
    }

    /// Why simulate does not assume the spoke role: AWS would refuse an operator, even one of
    /// the hub account (its trust names the router role by ARN), and admit only the router.
    #[test]
    fn the_spoke_role_admits_the_router_and_no_operator() {
        assert!(assume_spoke_role(ROUTER).is_allowed());
        for operator in [
            format!("arn:aws:iam::{HUB}:role/platform-admin"),
            format!("arn:aws:iam::{MEMBER}:role/platform-admin"),
        ] {
            assert!(
                !assume_spoke_role(&operator).is_allowed(),
                "{operator}: {:?}",
                assume_spoke_role(&operator)
            );
        }
    }

    #[test]
    fn a_member_account_is_reached_with_its_own_credentials_or_refused_up_front() {
        assert_eq!(site(MEMBER, MEMBER, None).unwrap(), Site::Caller);
        assert_eq!(
            site(HUB, MEMBER, Some("member")).unwrap(),
            Site::Profile("member".into())
        );
        let refused = site(HUB, MEMBER, None).unwrap_err().to_string();
        for says in [
            "--profile",
            MEMBER,
            HUB,
            "trusts only the hub's router role",
        ] {
            assert!(refused.contains(says), "{refused}\nshould say {says}");
        }
    }
}
