//! Accounts: which accounts and regions the router serves, and who it is in each.
//!
//! A cluster is (account, region, name): every event carries its [`Scope`], and the router looks
//! its instances up and writes its cluster's queue *in that scope*, as the principal
//! [`Sender::for_scope`] names. One rule, which the stacks follow too:
//!
//! * in the function's own account **and** region it is its execution role, the role base.yaml
//!   exports as `RouterRoleArn` (tenant stacks there import it from the base stack);
//! * anywhere else, its own account in another region included, it is the spoke role that
//!   account created for it (`arn:<partition>:iam::<account>:role<SPOKE_ROLE_PATH><SPOKE_ROLE_NAME>`,
//!   the path `/` unless the accounts put their roles under one), the role
//!   spoke.yaml exports as `RouterRoleArn` (tenant stacks there import it from the spoke stack,
//!   the only stack of the project in that region).
//!
//! So whichever stack a tenant queue imports its sender from, it names the principal the router
//! uses to write it. Assumed credentials are shared by every region of an account, cached until
//! five minutes before they expire: an account costs one AssumeRole per credential lifetime.
//!
//! Who is served is decided before anything is looked up ([`Accounts::admit`]): an event from an
//! account that is not served is dead-lettered (`account-not-served`), never looked up, and while
//! the function's own account is not known nothing is routed (no guess at whose credentials fit).
//! A spoke role that cannot be assumed makes its account [`Unreachable`]: a transient failure,
//! retried like any other, then dead-lettered `account-unreachable`.

use std::{
    collections::{BTreeSet, HashMap},
    fmt,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use aws_config::{Region, SdkConfig, identity::IdentityCache, sts::AssumeRoleProvider};
use aws_credential_types::{
    Credentials,
    provider::{ProvideCredentials, SharedCredentialsProvider, error::CredentialsError, future},
};

use crate::event::Scope;

/// Credentials this close to expiry are renewed before use.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);
/// After a failed AssumeRole, callers within this time get the same failure instead of a new
/// call: a batch of lookups and sends for one account makes one attempt, not one each.
const FAILURE_MEMORY: Duration = Duration::from_millis(500);
const SESSION_NAME: &str = "interruption-router";

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

/// The clients for one scope.
#[derive(Debug, Clone)]
pub struct Clients {
    pub ec2: aws_sdk_ec2::Client,
    pub tagging: aws_sdk_resourcegroupstagging::Client,
    pub sqs: aws_sdk_sqs::Client,
}

impl Clients {
    pub fn new(config: &SdkConfig) -> Self {
        Self {
            ec2: aws_sdk_ec2::Client::new(config),
            tagging: aws_sdk_resourcegroupstagging::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// account's spoke role everywhere else. The stacks export the same principal for the tenant
    /// queues of each region (see the module documentation).
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

pub struct Accounts {
    base: SdkConfig,
    home_region: Arc<str>,
    /// Learned from the first invocation's function ARN; until then nothing is routed.
    home_account: OnceLock<Arc<str>>,
    served: Served,
    spoke_role: String,
    home: Arc<Clients>,
    by_scope: Mutex<HashMap<Scope, Arc<Clients>>>,
    assumed: Mutex<HashMap<Arc<str>, Arc<Assumed>>>,
    assume_role_calls: Arc<AtomicU64>,
}

impl Accounts {
    /// `base` is the function's own configuration (its region, credentials, timeouts, retries).
    pub fn new(base: SdkConfig, served: Served, spoke_role: String) -> Self {
        let home_region: Arc<str> = Arc::from(base.region().map_or("", |r| r.as_ref()));
        Self {
            home: Arc::new(Clients::new(&base)),
            base,
            home_region,
            home_account: OnceLock::new(),
            served,
            spoke_role,
            by_scope: Mutex::default(),
            assumed: Mutex::default(),
            assume_role_calls: Arc::default(),
        }
    }

    /// The function's own account, from its ARN (`arn:<partition>:lambda:<region>:<account>:…`).
    /// Only the first call counts: the account of a function never changes.
    pub fn learn_home_account(&self, function_arn: &str) {
        if let Some(account) = function_arn.split(':').nth(4).filter(|a| is_account_id(a)) {
            let _ = self.home_account.set(Arc::from(account));
        }
    }

    pub fn home_account(&self) -> Option<&str> {
        self.home_account.get().map(|a| a.as_ref())
    }

    pub fn home_region(&self) -> &str {
        &self.home_region
    }

    /// The clients of the function's own account and region (also where the DLQ and the ingest
    /// queue are).
    pub fn home(&self) -> Arc<Clients> {
        self.home.clone()
    }

    /// AssumeRole calls made so far (one per member account per credential lifetime).
    pub fn assume_role_calls(&self) -> u64 {
        self.assume_role_calls.load(Ordering::Relaxed)
    }

    /// The event's scope with what it leaves out filled in from the function's own: an event
    /// without `account` or `region` comes from here.
    pub fn complete(&self, scope: &Scope) -> Scope {
        Scope {
            account: scope
                .account
                .clone()
                .or_else(|| self.home_account.get().cloned()),
            region: scope
                .region
                .clone()
                .filter(|r| !r.is_empty())
                .or_else(|| Some(self.home_region.clone())),
        }
    }

    /// Whether the router serves the scope's account. Fails closed: while its own account is
    /// unknown, no scope is admitted.
    pub fn admit(&self, scope: &Scope) -> Result<(), Refused> {
        let Some(home) = self.home_account.get() else {
            return Err(Refused::HomeUnknown);
        };
        let Some(account) = scope.account.as_deref() else {
            // `complete` fills a missing account with the home account once it is known.
            return Err(Refused::HomeUnknown);
        };
        if **home == *account {
            return Ok(());
        }
        let served = match &self.served {
            Served::Own => false,
            Served::Listed(accounts) => accounts.contains(account),
            // An account field that is not an account id cannot be reached anyway.
            Served::Any => is_account_id(account),
        };
        if served {
            Ok(())
        } else {
            Err(Refused::NotServed {
                account: account.to_owned(),
            })
        }
    }

    /// Who the router is in an admitted scope; `None` while its own account is unknown.
    pub fn sender(&self, scope: &Scope) -> Option<Sender> {
        let home = self.home_account.get()?;
        let account = scope.account.as_deref().unwrap_or(home);
        let region = scope.region.as_deref().unwrap_or(&self.home_region);
        Some(Sender::for_scope(
            home,
            &self.home_region,
            account,
            region,
            &self.spoke_role,
        ))
    }

    /// The clients for an admitted scope, acting as [`Accounts::sender`]. For a spoke role this
    /// makes sure its credentials are at hand (assuming it if they are not), so an unreachable
    /// account is told apart from a failing lookup.
    pub async fn clients(&self, scope: &Scope) -> Result<Arc<Clients>, Unreachable> {
        let region = scope.region.as_deref().unwrap_or(&self.home_region);
        let (account, role_arn) = match self.sender(scope) {
            Some(Sender::Home) => return Ok(self.home.clone()),
            Some(Sender::Spoke { account, role_arn }) => (account, role_arn),
            // admit refuses every scope until the home account is known; never guess.
            None => {
                return Err(Unreachable {
                    account: scope.account.as_deref().unwrap_or_default().to_owned(),
                    role: String::new(),
                    error: Refused::HomeUnknown.to_string(),
                });
            }
        };
        let assumed = self.assumed(&account, role_arn);
        assumed.credentials().await?;
        let mut by_scope = self.by_scope.lock().unwrap();
        let clients = by_scope.entry(scope.clone()).or_insert_with(|| {
            let mut config = self.base.to_builder();
            config.set_region(Some(Region::new(region.to_owned())));
            config.set_credentials_provider(Some(SharedCredentialsProvider::new(AssumedProvider(
                assumed,
            ))));
            // The account's credentials are cached once, in `Assumed`, for all its regions.
            config.set_identity_cache(Some(IdentityCache::no_cache()));
            Arc::new(Clients::new(&config.build()))
        });
        Ok(clients.clone())
    }

    fn assumed(&self, account: &str, role: String) -> Arc<Assumed> {
        let mut assumed = self.assumed.lock().unwrap();
        if let Some(found) = assumed.get(account) {
            return found.clone();
        }
        let entry = Arc::new(Assumed {
            account: account.to_owned(),
            role,
            base: self.base.clone(),
            state: tokio::sync::Mutex::default(),
            calls: self.assume_role_calls.clone(),
        });
        assumed.insert(Arc::from(account), entry.clone());
        entry
    }
}

/// One member account's credentials, shared by its clients in every region.
struct Assumed {
    account: String,
    role: String,
    base: SdkConfig,
    state: tokio::sync::Mutex<AssumedState>,
    calls: Arc<AtomicU64>,
}

#[derive(Default)]
struct AssumedState {
    provider: Option<AssumeRoleProvider>,
    credentials: Option<Credentials>,
    failed: Option<(Instant, Unreachable)>,
}

impl fmt::Debug for Assumed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Assumed").field("role", &self.role).finish()
    }
}

impl Assumed {
    /// Cached credentials, or new ones from AssumeRole. One caller at a time renews; the others
    /// wait and share the result.
    async fn credentials(&self) -> Result<Credentials, Unreachable> {
        let mut state = self.state.lock().await;
        if let Some(credentials) = &state.credentials {
            let fresh = credentials
                .expiry()
                .is_none_or(|at| at > SystemTime::now() + REFRESH_BEFORE);
            if fresh {
                return Ok(credentials.clone());
            }
        }
        if let Some((at, failure)) = &state.failed
            && at.elapsed() < FAILURE_MEMORY
        {
            return Err(failure.clone());
        }
        if state.provider.is_none() {
            let provider = AssumeRoleProvider::builder(self.role.clone())
                .session_name(SESSION_NAME)
                .configure(&self.base)
                .build()
                .await;
            state.provider = Some(provider);
        }
        let provider = state.provider.as_ref().expect("just set");
        self.calls.fetch_add(1, Ordering::Relaxed);
        match provider.provide_credentials().await {
            Ok(credentials) => {
                tracing::info!(account = %self.account, role = %self.role, expiry = ?credentials.expiry(), "assumed the spoke role");
                state.credentials = Some(credentials.clone());
                state.failed = None;
                Ok(credentials)
            }
            Err(e) => {
                let failure = Unreachable {
                    account: self.account.clone(),
                    role: self.role.clone(),
                    error: aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
                };
                state.failed = Some((Instant::now(), failure.clone()));
                Err(failure)
            }
        }
    }
}

/// The SDK's view of an [`Assumed`]: each call is served from its cache.
#[derive(Debug)]
struct AssumedProvider(Arc<Assumed>);

impl ProvideCredentials for AssumedProvider {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            self.0
                .credentials()
                .await
                .map_err(CredentialsError::provider_error)
        })
    }
}

/// A 12-digit AWS account id.
pub fn is_account_id(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// The ARN partition of a region.
pub fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else if region.starts_with("us-isob-") {
        "aws-iso-b"
    } else if region.starts_with("us-iso-") {
        "aws-iso"
    } else if region.starts_with("eusc-") {
        "aws-eusc"
    } else {
        "aws"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounts(served: Served) -> Accounts {
        let config = SdkConfig::builder()
            .region(Region::new("us-east-1"))
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build();
        let accounts = Accounts::new(config, served, "interruption-router-spoke".into());
        accounts.learn_home_account("arn:aws:lambda:us-east-1:111111111111:function:router");
        accounts
    }

    fn scope(account: Option<&str>, region: Option<&str>) -> Scope {
        Scope {
            account: account.map(Arc::from),
            region: region.map(Arc::from),
        }
    }

    #[test]
    fn own_account_only_by_default() {
        let a = accounts(Served::Own);
        assert_eq!(a.home_account(), Some("111111111111"));
        assert!(
            a.admit(&scope(Some("111111111111"), Some("eu-west-1")))
                .is_ok()
        );
        assert_eq!(
            a.admit(&scope(Some("222222222222"), None)),
            Err(Refused::NotServed {
                account: "222222222222".into()
            })
        );
    }

    #[test]
    fn listed_and_organisation_modes() {
        let listed = accounts(Served::Listed(["222222222222".to_owned()].into()));
        assert!(listed.admit(&scope(Some("222222222222"), None)).is_ok());
        assert!(listed.admit(&scope(Some("333333333333"), None)).is_err());
        let any = accounts(Served::Any);
        assert!(any.admit(&scope(Some("333333333333"), None)).is_ok());
        assert!(any.admit(&scope(Some("not-an-account"), None)).is_err());
    }

    #[test]
    fn missing_account_and_region_are_the_functions_own() {
        let a = accounts(Served::Own);
        assert_eq!(
            a.complete(&scope(None, None)),
            scope(Some("111111111111"), Some("us-east-1"))
        );
        assert_eq!(
            a.complete(&scope(Some("222222222222"), Some("eu-west-1"))),
            scope(Some("222222222222"), Some("eu-west-1"))
        );
    }

    #[test]
    fn the_home_account_is_learned_once_from_a_function_arn() {
        let a = accounts(Served::Own);
        a.learn_home_account("arn:aws:lambda:us-east-1:999999999999:function:other");
        assert_eq!(a.home_account(), Some("111111111111"));
    }

    #[test]
    fn an_unknown_home_account_admits_nothing_and_names_no_sender() {
        // Fails closed: the account a scope names cannot be told apart from the function's own,
        // so routing would mean guessing whose credentials fit.
        let fresh = Accounts::new(SdkConfig::builder().build(), Served::Any, "spoke".into());
        fresh.learn_home_account("not an arn");
        assert_eq!(fresh.home_account(), None);
        for account in [Some("222222222222"), None] {
            let s = fresh.complete(&scope(account, Some("us-east-1")));
            assert_eq!(fresh.admit(&s), Err(Refused::HomeUnknown), "{s}");
            assert_eq!(fresh.sender(&s), None);
        }
    }

    #[test]
    fn the_router_is_its_own_role_only_at_home_and_the_spoke_role_elsewhere() {
        let a = accounts(Served::Listed(["222222222222".to_owned()].into()));
        let spoke = |account: &str| Sender::Spoke {
            account: account.into(),
            role_arn: format!("arn:aws:iam::{account}:role/interruption-router-spoke"),
        };
        let placements = [
            (("111111111111", "us-east-1"), Sender::Home),
            (("111111111111", "eu-west-1"), spoke("111111111111")),
            (("222222222222", "us-east-1"), spoke("222222222222")),
            (("222222222222", "eu-west-1"), spoke("222222222222")),
        ];
        for ((account, region), expected) in placements {
            let s = scope(Some(account), Some(region));
            assert_eq!(a.sender(&s), Some(expected.clone()), "{s}");
            assert_eq!(
                Sender::for_scope(
                    "111111111111",
                    "us-east-1",
                    account,
                    region,
                    "interruption-router-spoke"
                ),
                expected
            );
        }
        assert_eq!(
            spoke_role_arn("cn-north-1", "222222222222", "r"),
            "arn:aws-cn:iam::222222222222:role/r"
        );
        // A spoke role under a path (SPOKE_ROLE_PATH=/platform/) is assumed by its whole ARN.
        assert_eq!(
            Sender::for_scope(
                "111111111111",
                "us-east-1",
                "222222222222",
                "us-east-1",
                "platform/r"
            ),
            Sender::Spoke {
                account: "222222222222".into(),
                role_arn: "arn:aws:iam::222222222222:role/platform/r".into()
            }
        );
    }

    #[test]
    fn partitions_follow_the_region() {
        assert_eq!(partition("us-east-1"), "aws");
        assert_eq!(partition("cn-north-1"), "aws-cn");
        assert_eq!(partition("us-gov-west-1"), "aws-us-gov");
    }
}
