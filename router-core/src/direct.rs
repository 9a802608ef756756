//! Direct deliveries: whose events a record of the direct queue may carry.
//!
//! In the hub's region a member account's rules can write the hub's direct queue themselves
//! (EventBridge's cross-account targets: same region only, through an execution role of the
//! member account, admitted by the queue's policy). That spends the member's own EventBridge
//! quota and skips the central bus, one hop and one quota fewer. But such a send is the role's:
//! SQS records no rule ARN for it (no `aws:SourceArn` reaches the queue's policy), and a rule may
//! rewrite what it sends (Input, InputTransformer). So whoever administers a member account can
//! put any body on the direct queue, naming another account's instance, which the router would
//! look up with that account's spoke role and forward to its cluster: a drained node elsewhere.
//!
//! The queue policy admits only the served accounts' direct roles. This module ties each record
//! to its sender: SQS gives every message a `SenderId`, for a role session `<role id>:<session>`
//! (SQS API reference, ReceiveMessage), and a role's id is unique and never reused (IAM user
//! guide, "Unique identifiers"). The router reads the direct role's id in the account the event
//! names (IAM GetRole, through that account's spoke role) and routes the record only if the two
//! match. Anything else is dead-lettered `foreign-sender`:
//!
//! * an event of the hub's own account, or of another region than the hub's (a direct rule
//!   delivers only its own account's events of its own region: the hub's come through its own
//!   rules);
//! * no `SenderId`, or one that is not the named account's direct role (another account's role,
//!   a user, anything);
//! * an account with no direct role (`NoSuchEntity`): its events come through the central bus.
//!
//! A role's id is read once per account and execution environment and kept: it changes only when
//! the role is deleted and made again (a spoke stack replaced). So a sender that does not match
//! what is kept is not refused from memory: the role is read again first, and only a mismatch
//! with a read made for that sender (a *fresh* read) is `foreign-sender`. A re-created role's
//! first send is therefore read for and forwarded, not lost. Reads are rate-limited per sender:
//! one sender id makes the router read an account's role at most once a [`REREAD_AFTER`], so a
//! stranger cannot make it ask each time; a record whose sender was read for less than that ago,
//! and was not the role then, is handed back (retried), not refused, until a read made for it
//! decides. A GetRole that fails otherwise leaves the record unrouted and handed back (denied:
//! like a send denied, retried for the grace IAM needs to propagate), never routed unchecked.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;

use crate::{
    accounts::{Accounts, Home, Place, Sender, Unreachable},
    aws::{Aws, CallError},
};

/// How often one sender that does not match an account's known direct role may make the router
/// read that role again.
pub const REREAD_AFTER: Duration = Duration::from_secs(60);

/// The check for records of the direct queue.
pub struct Direct<A> {
    aws: Arc<A>,
    accounts: Arc<Accounts<A>>,
    queue_arn: String,
    /// The direct role's name in every member account.
    role_name: String,
    /// Per account: its direct role's id as last read.
    known: Mutex<HashMap<Arc<str>, Known>>,
    /// Per (account, sender role id) that did not match: when the role was last read for it.
    asked: Mutex<HashMap<Asked, Instant>>,
}

/// An account, and a sender's role id.
type Asked = (Arc<str>, Arc<str>);

/// What the last read of an account's direct role found: its id, or no such role.
#[derive(Debug, Clone)]
struct Known {
    role_id: Option<Arc<str>>,
}

/// An account's direct role as the check sees it: its id (`None`: no such role), and whether it
/// was read for this check (fresh) or kept from an earlier one.
#[derive(Debug, Clone)]
struct Read {
    role_id: Option<Arc<str>>,
    fresh: bool,
}

/// Why a record of the direct queue is not routed, for good.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Foreign {
    #[error(
        "a direct delivery names {scope}, and direct rules deliver only a member account's events of the hub's region ({region})"
    )]
    NotAMember { scope: String, region: String },
    #[error("a direct delivery without a SenderId: SQS names the sender of every message")]
    NoSender,
    #[error(
        "sent by {sender}, which is not account {account}'s direct role {role} ({role_id}): only that role may deliver the account's events directly"
    )]
    NotTheRole {
        sender: String,
        account: String,
        role: String,
        role_id: String,
    },
    #[error(
        "account {account} has no direct role {role}: its events come through the central bus, not directly"
    )]
    NoRole { account: String, role: String },
}

/// Why the check could not be made now.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unchecked {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error("GetRole {role} in {account}: {error}")]
    Call {
        account: String,
        role: String,
        error: CallError,
    },
    /// The sender matched no read of the role, and the role was read for this sender less than
    /// [`REREAD_AFTER`] ago: retried until a read made for it decides.
    #[error(
        "sent by {sender}, which was not account {account}'s direct role {role} when it was last read; read again for this sender at most once every {} s: retried",
        REREAD_AFTER.as_secs()
    )]
    NotReadAgain {
        sender: String,
        account: String,
        role: String,
    },
}

impl Unchecked {
    /// IAM or the spoke role's policy refused GetRole (a spoke stack without the permission).
    pub fn is_denial(&self) -> bool {
        matches!(self, Unchecked::Call { error, .. } if error.is_denial())
    }
}

/// What a record of the direct queue gets.
pub type Verdict = Result<Result<(), Foreign>, Unchecked>;

impl<A: Aws> Direct<A> {
    pub fn new(
        aws: Arc<A>,
        accounts: Arc<Accounts<A>>,
        queue_arn: String,
        role_name: String,
    ) -> Self {
        Self {
            aws,
            accounts,
            queue_arn,
            role_name,
            known: Mutex::default(),
            asked: Mutex::default(),
        }
    }

    /// Whether a record from `queue_arn` came through the direct queue.
    pub fn is_direct(&self, queue_arn: Option<&str>) -> bool {
        queue_arn == Some(self.queue_arn.as_str())
    }

    /// The verdict on each record, given its place and `SenderId`: at most one GetRole per
    /// account, all accounts at once.
    pub async fn check(&self, home: &Home, records: &[(&Place, Option<&str>)]) -> Vec<Verdict> {
        let mut senders: BTreeMap<&Place, Vec<&str>> = BTreeMap::new();
        for (place, sender) in records {
            if member(home, place) {
                senders
                    .entry(*place)
                    .or_default()
                    .extend(sender.map(role_id_of));
            }
        }
        let read = futures_util::future::join_all(
            senders
                .iter()
                .map(|(place, ids)| async move { (*place, self.role_id(place, ids).await) }),
        )
        .await;
        let roles: BTreeMap<&Place, Result<Read, Unchecked>> = read.into_iter().collect();
        records
            .iter()
            .map(|(place, sender)| {
                if !member(home, place) {
                    return Ok(Err(Foreign::NotAMember {
                        scope: place.scope.to_string(),
                        region: home.region.to_string(),
                    }));
                }
                let Some(sender) = sender else {
                    return Ok(Err(Foreign::NoSender));
                };
                let account = place.scope.account.to_string();
                let read = roles.get(place).cloned().unwrap_or(Ok(Read {
                    role_id: None,
                    fresh: true,
                }))?;
                match read.role_id {
                    Some(id) if *id == *role_id_of(sender) => Ok(Ok(())),
                    _ if !read.fresh => Err(Unchecked::NotReadAgain {
                        sender: (*sender).to_owned(),
                        account,
                        role: self.role_name.clone(),
                    }),
                    None => Ok(Err(Foreign::NoRole {
                        account,
                        role: self.role_name.clone(),
                    })),
                    Some(id) => Ok(Err(Foreign::NotTheRole {
                        sender: (*sender).to_owned(),
                        account,
                        role: self.role_name.clone(),
                        role_id: id.to_string(),
                    })),
                }
            })
            .collect()
    }

    /// The direct role in `place`'s account as `senders` need it: kept while every sender
    /// matches it; read now when nothing is kept, or when a sender that does not match has not
    /// had a read made for it in the last [`REREAD_AFTER`].
    async fn role_id(&self, place: &Place, senders: &[&str]) -> Result<Read, Unchecked> {
        let account = place.scope.account.clone();
        let known = self.known.lock().unwrap().get(&account).cloned();
        let now = Instant::now();
        let due: Vec<Arc<str>> = {
            let asked = self.asked.lock().unwrap();
            senders
                .iter()
                .filter(|s| {
                    known
                        .as_ref()
                        .is_none_or(|k| k.role_id.as_deref() != Some(**s))
                })
                .filter(|s| {
                    asked
                        .get(&(account.clone(), Arc::from(**s)))
                        .is_none_or(|at| now.duration_since(*at) >= REREAD_AFTER)
                })
                .map(|s| Arc::from(*s))
                .collect()
        };
        if let Some(known) = &known
            && due.is_empty()
        {
            return Ok(Read {
                role_id: known.role_id.clone(),
                fresh: false,
            });
        }
        let session = self.accounts.session(place).await?;
        let role_id = match self.aws.get_role_id(&session, &self.role_name).await {
            Ok(id) => Some(Arc::from(id)),
            Err(error) if error.code == crate::aws::missing::ROLE => None,
            Err(error) => {
                return Err(Unchecked::Call {
                    account: account.to_string(),
                    role: self.role_name.clone(),
                    error,
                });
            }
        };
        // Only a read that answered counts against its senders: a failed one is tried again on
        // the record's next receive.
        {
            let mut asked = self.asked.lock().unwrap();
            asked.retain(|_, at| now.duration_since(*at) < REREAD_AFTER);
            asked.extend(due.into_iter().map(|s| ((account.clone(), s), now)));
        }
        self.known.lock().unwrap().insert(
            account,
            Known {
                role_id: role_id.clone(),
            },
        );
        Ok(Read {
            role_id,
            fresh: true,
        })
    }
}

/// Whether `place` is a member account's, in the hub's region: the only events a direct rule
/// delivers.
fn member(home: &Home, place: &Place) -> bool {
    matches!(place.sender, Sender::Spoke { .. })
        && home.account.as_deref() != Some(&*place.scope.account)
        && place.scope.region == home.region
}

/// The role id of a role session's `SenderId` (`AROA…:<session>`); a user's id is all of it.
fn role_id_of(sender: &str) -> &str {
    sender.split_once(':').map_or(sender, |(id, _)| id)
}
