//! Accounts: which accounts and regions the router serves, and who it is in each.
//!
//! A cluster is (account, region, name): every event is admitted into a [`Place`], its
//! [`Scope`] (account and region) and the [`Sender`] the router acts as there. One rule, which the
//! stacks follow too:
//!
//! * in the function's own account **and** region it is its execution role, the role base.yaml
//!   exports as `RouterRoleArn` (tenant stacks there import it from the base stack);
//! * anywhere else, its own account in another region included, it is the spoke role that
//!   account created for it (`arn:<partition>:iam::<account>:role<SPOKE_ROLE_PATH><SPOKE_ROLE_NAME>`),
//!   the role spoke.yaml exports as `RouterRoleArn` (tenant stacks there import it from the spoke
//!   stack, the only stack of the project in that region).
//!
//! So whichever stack a tenant queue imports its sender from, it names the principal the router
//! writes it as.
//!
//! Admission is pure and is decided before anything is looked up ([`Accounts::admit`]): the
//! function's own account comes from each invocation's function ARN ([`Home`]), never from what
//! an execution environment saw before; an event from an account that is not served is
//! dead-lettered (`account-not-served`), and if the ARN names no account nothing is routed (no
//! guess at whose credentials fit).
//!
//! A spoke role's credentials are the one thing kept here ([`Accounts::session`]): assumed once
//! per account (shared by all its regions), renewed five minutes before they expire, one
//! AssumeRole in flight per account, and a failure answered from memory for
//! [`ASSUME_FAILURE_MEMORY`] so a batch's lookups and sends for one account cost one attempt, not
//! one each. A role that cannot be assumed makes its account [`Unreachable`]: a transient failure,
//! retried like any other, then dead-lettered `account-unreachable`.

use std::{
    collections::{BTreeSet, HashMap},
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

// Where a call goes: defined apart from this module, which the AWS seam cannot import (this
// module calls through the seam).
pub use crate::scope::{Scope, partition};
use crate::{
    aws::{Aws, Credentials, Identity, Session},
    event::Origin,
};

/// Credentials this close to expiry are renewed before use.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(300);
/// After a failed AssumeRole, callers within this time get the same failure instead of a new call.
pub const ASSUME_FAILURE_MEMORY: Duration = Duration::from_millis(500);

/// Which accounts' events the router handles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    /// Its own account only (the default).
    Own,
    /// Its own account and these.
    Listed(BTreeSet<String>),
    /// Any account whose events reach it: the central bus's policy is the gate (an organisation).
    Any,
}

/// The function itself as one invocation names it: its account (from the invoked function's ARN,
/// `arn:<partition>:lambda:<region>:<account>:function:…`) and its region (its configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    pub account: Option<Arc<str>>,
    pub region: Arc<str>,
}

impl Home {
    pub fn new(function_arn: &str, region: &str) -> Self {
        Self {
            account: function_arn
                .split(':')
                .nth(4)
                .filter(|a| is_account_id(a))
                .map(Arc::from),
            region: Arc::from(region),
        }
    }

    /// Where the ingest queue and the dead-letter queue are, as the function's own role.
    pub fn place(&self) -> Place {
        Place {
            scope: Scope {
                account: self.account.clone().unwrap_or_else(|| Arc::from("")),
                region: self.region.clone(),
            },
            sender: Sender::Home,
        }
    }
}

/// Where an admitted event is routed, and as whom.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    pub scope: Scope,
    pub sender: Sender,
}

impl Place {
    /// How a cluster of this place is named in metrics: by name at home,
    /// `<account>.<region>.<name>` elsewhere (a name can repeat across accounts).
    pub fn label(&self, cluster: &str) -> String {
        match self.sender {
            Sender::Home => cluster.to_owned(),
            Sender::Spoke { .. } => {
                format!("{}.{}.{cluster}", self.scope.account, self.scope.region)
            }
        }
    }
}

/// Why an event's scope is not routed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The event's account is not one the router serves.
    #[error("account {account} is not served by this router (SERVED_ACCOUNTS)")]
    NotServed { account: String },
    /// The function's own account is not known (its ARN did not name one), so no account can be
    /// told apart from it: routing now would mean guessing whose credentials to use.
    #[error(
        "the router does not know its own account (the invoked function ARN named none), so it routes nothing"
    )]
    HomeUnknown,
}

/// The principal the router acts as in a scope ([`Sender::for_scope`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sender {
    /// The function's execution role: its own account, its own region.
    Home,
    /// The spoke role of the scope's account.
    Spoke { account: String, role_arn: String },
}

impl Sender {
    /// Who the router is in (`account`, `region`), for a router in (`home_account`,
    /// `home_region`) whose spoke roles are `spoke_role` (path and name, as the ARN ends after
    /// `role/`: [`crate::config::Config::spoke_role`]): its own role only at home, the
    /// account's spoke role everywhere else.
    pub fn for_scope(
        home_account: &str,
        home_region: &str,
        account: &str,
        region: &str,
        spoke_role: &str,
    ) -> Sender {
        if account == home_account && region == home_region {
            Sender::Home
        } else {
            Sender::Spoke {
                account: account.to_owned(),
                // The role the router assumes: in its own partition, as every account it serves.
                role_arn: spoke_role_arn(home_region, account, spoke_role),
            }
        }
    }
}

impl fmt::Display for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sender::Home => f.write_str("the router's execution role"),
            Sender::Spoke { role_arn, .. } => write!(f, "the spoke role {role_arn}"),
        }
    }
}

/// `arn:<partition>:iam::<account>:role/<name>`, where `name` carries the role's path if it has
/// one (`platform/ir-spoke`).
pub fn spoke_role_arn(region: &str, account: &str, name: &str) -> String {
    format!("arn:{}:iam::{account}:role/{name}", partition(region))
}

/// A member account's spoke role could not be assumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("account {account} is unreachable: assuming {role} failed: {error}")]
pub struct Unreachable {
    pub account: String,
    pub role: String,
    pub error: String,
}

/// Who is served, and the spoke role's credentials per account.
pub struct Accounts<A> {
    aws: Arc<A>,
    served: Served,
    spoke_role: String,
    spokes: Mutex<HashMap<String, Arc<tokio::sync::Mutex<SpokeState>>>>,
    assume_role_calls: AtomicU64,
}

#[derive(Default)]
struct SpokeState {
    credentials: Option<Credentials>,
    failed: Option<(Instant, Unreachable)>,
}

impl<A: Aws> Accounts<A> {
    /// `spoke_role` is the spoke role's path and name as its ARN ends after `role/`.
    pub fn new(aws: Arc<A>, served: Served, spoke_role: String) -> Self {
        Self {
            aws,
            served,
            spoke_role,
            spokes: Mutex::default(),
            assume_role_calls: AtomicU64::new(0),
        }
    }

    /// AssumeRole calls made so far (one per member account per credential lifetime).
    pub fn assume_role_calls(&self) -> u64 {
        self.assume_role_calls.load(Ordering::Relaxed)
    }

    /// Where an event from `origin` is routed, and as whom. An event without `account` or
    /// `region` comes from the function's own. Fails closed: while the function's own account is
    /// unknown, nothing is admitted.
    pub fn admit(&self, home: &Home, origin: &Origin) -> Result<Place, Refused> {
        admit(home, &self.served, &self.spoke_role, origin)
    }

    /// A session acting as `place`'s sender: the function's own role, or the spoke role, assumed
    /// if its credentials are not at hand.
    pub async fn session(&self, place: &Place) -> Result<Session, Unreachable> {
        let identity = match &place.sender {
            Sender::Home => Identity::Home,
            Sender::Spoke { account, role_arn } => Identity::Assumed {
                credentials: self.credentials(account, role_arn).await?,
                role_arn: Arc::from(role_arn.as_str()),
            },
        };
        Ok(Session {
            scope: place.scope.clone(),
            identity,
        })
    }

    /// Cached credentials, or new ones from AssumeRole. One caller per account renews; the
    /// others wait and share the result.
    async fn credentials(&self, account: &str, role_arn: &str) -> Result<Credentials, Unreachable> {
        let spoke = self
            .spokes
            .lock()
            .unwrap()
            .entry(account.to_owned())
            .or_default()
            .clone();
        let mut state = spoke.lock().await;
        if let Some(credentials) = &state.credentials {
            let fresh = credentials
                .expiry()
                .is_none_or(|at| at > self.aws.now() + REFRESH_BEFORE);
            if fresh {
                return Ok(credentials.clone());
            }
        }
        if let Some((at, failure)) = &state.failed
            && at.elapsed() < ASSUME_FAILURE_MEMORY
        {
            return Err(failure.clone());
        }
        self.assume_role_calls.fetch_add(1, Ordering::Relaxed);
        match self.aws.assume_role(role_arn).await {
            Ok(credentials) => {
                tracing::info!(account, role = role_arn, expiry = ?credentials.expiry(), "assumed the spoke role");
                state.credentials = Some(credentials.clone());
                state.failed = None;
                Ok(credentials)
            }
            Err(e) => {
                let failure = Unreachable {
                    account: account.to_owned(),
                    role: role_arn.to_owned(),
                    error: e.to_string(),
                };
                state.failed = Some((Instant::now(), failure.clone()));
                Err(failure)
            }
        }
    }
}

/// See [`Accounts::admit`].
pub fn admit(
    home: &Home,
    served: &Served,
    spoke_role: &str,
    origin: &Origin,
) -> Result<Place, Refused> {
    let Some(home_account) = home.account.as_deref() else {
        return Err(Refused::HomeUnknown);
    };
    let account = origin.account.as_deref().unwrap_or(home_account);
    let region = origin
        .region
        .as_deref()
        .filter(|r| !r.is_empty())
        .unwrap_or(&home.region);
    let admitted = account == home_account
        || match served {
            Served::Own => false,
            Served::Listed(accounts) => accounts.contains(account),
            // An account field that is not an account id cannot be reached anyway.
            Served::Any => is_account_id(account),
        };
    if !admitted {
        return Err(Refused::NotServed {
            account: account.to_owned(),
        });
    }
    Ok(Place {
        scope: Scope::new(account, region),
        sender: Sender::for_scope(home_account, &home.region, account, region, spoke_role),
    })
}

/// A 12-digit AWS account id.
pub fn is_account_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUB: &str = "111111111111";
    const SPOKE: &str = "interruption-router-spoke";

    /// Logs and errors name the scope and the principal the router acted as.
    #[test]
    fn scopes_and_senders_read_as_logs_name_them() {
        assert_eq!(
            Scope::new(HUB, "eu-west-1").to_string(),
            "111111111111/eu-west-1"
        );
        assert_eq!(Sender::Home.to_string(), "the router's execution role");
        let spoke = Sender::for_scope(HUB, "us-east-1", "222222222222", "us-east-1", SPOKE);
        assert_eq!(
            spoke.to_string(),
            "the spoke role arn:aws:iam::222222222222:role/interruption-router-spoke"
        );
    }

    fn home() -> Home {
        Home::new(
            "arn:aws:lambda:us-east-1:111111111111:function:router",
            "us-east-1",
        )
    }

    fn origin(account: Option<&str>, region: Option<&str>) -> Origin {
        Origin {
            account: account.map(Arc::from),
            region: region.map(Arc::from),
        }
    }

    fn admitted(
        served: &Served,
        account: Option<&str>,
        region: Option<&str>,
    ) -> Result<Place, Refused> {
        admit(&home(), served, SPOKE, &origin(account, region))
    }

    #[test]
    fn own_account_only_by_default() {
        assert!(admitted(&Served::Own, Some(HUB), Some("eu-west-1")).is_ok());
        assert_eq!(
            admitted(&Served::Own, Some("222222222222"), None),
            Err(Refused::NotServed {
                account: "222222222222".into()
            })
        );
    }

    #[test]
    fn listed_and_organisation_modes() {
        let listed = Served::Listed(["222222222222".to_owned()].into());
        assert!(admitted(&listed, Some("222222222222"), None).is_ok());
        assert!(admitted(&listed, Some("333333333333"), None).is_err());
        assert!(admitted(&Served::Any, Some("333333333333"), None).is_ok());
        assert!(admitted(&Served::Any, Some("not-an-account"), None).is_err());
    }

    #[test]
    fn missing_account_and_region_are_the_functions_own() {
        let place = admitted(&Served::Own, None, None).unwrap();
        assert_eq!(place.scope, Scope::new(HUB, "us-east-1"));
        assert_eq!(place.sender, Sender::Home);
        let empty_region = admitted(&Served::Own, Some(HUB), Some("")).unwrap();
        assert_eq!(empty_region.scope.region.as_ref(), "us-east-1");
    }

    #[test]
    fn the_home_account_comes_from_each_invocations_function_arn() {
        assert_eq!(home().account.as_deref(), Some(HUB));
        let other = Home::new(
            "arn:aws:lambda:us-east-1:999999999999:function:r",
            "us-east-1",
        );
        assert_eq!(other.account.as_deref(), Some("999999999999"));
    }

    #[test]
    fn an_unknown_home_account_admits_nothing() {
        // Fails closed: the account an event names cannot be told apart from the function's own,
        // so routing would mean guessing whose credentials fit.
        let unknown = Home::new("not an arn", "us-east-1");
        assert_eq!(unknown.account, None);
        for account in [Some("222222222222"), None] {
            assert_eq!(
                admit(
                    &unknown,
                    &Served::Any,
                    SPOKE,
                    &origin(account, Some("us-east-1"))
                ),
                Err(Refused::HomeUnknown)
            );
        }
    }

    #[test]
    fn the_router_is_its_own_role_only_at_home_and_the_spoke_role_elsewhere() {
        let served = Served::Listed(["222222222222".to_owned()].into());
        let spoke = |account: &str| Sender::Spoke {
            account: account.into(),
            role_arn: format!("arn:aws:iam::{account}:role/interruption-router-spoke"),
        };
        let placements = [
            ((HUB, "us-east-1"), Sender::Home),
            ((HUB, "eu-west-1"), spoke(HUB)),
            (("222222222222", "us-east-1"), spoke("222222222222")),
            (("222222222222", "eu-west-1"), spoke("222222222222")),
        ];
        for ((account, region), expected) in placements {
            let place = admitted(&served, Some(account), Some(region)).unwrap();
            assert_eq!(place.sender, expected, "{account} {region}");
            assert_eq!(
                Sender::for_scope(HUB, "us-east-1", account, region, SPOKE),
                expected
            );
        }
        assert_eq!(
            spoke_role_arn("cn-north-1", "222222222222", "r"),
            "arn:aws-cn:iam::222222222222:role/r"
        );
        // A spoke role under a path (SPOKE_ROLE_PATH=/platform/) is assumed by its whole ARN.
        assert_eq!(
            Sender::for_scope(HUB, "us-east-1", "222222222222", "us-east-1", "platform/r"),
            Sender::Spoke {
                account: "222222222222".into(),
                role_arn: "arn:aws:iam::222222222222:role/platform/r".into()
            }
        );
    }

    #[test]
    fn clusters_outside_home_are_labelled_with_their_account_and_region() {
        let home_place = admitted(&Served::Any, None, None).unwrap();
        assert_eq!(home_place.label("alpha"), "alpha");
        let away = admitted(&Served::Any, Some("222222222222"), Some("eu-west-1")).unwrap();
        assert_eq!(away.label("alpha"), "222222222222.eu-west-1.alpha");
    }

    #[test]
    fn partitions_follow_the_region() {
        assert_eq!(partition("us-east-1"), "aws");
        assert_eq!(partition("cn-north-1"), "aws-cn");
        assert_eq!(partition("us-gov-west-1"), "aws-us-gov");
    }
}
