//! Configuration: the function's environment, validated once at init.
//!
//! Every variable has a default that suits a standard Karpenter install, so an empty environment is
//! a valid configuration. A bad value stops start-up with a [`ConfigError`] that names the variable,
//! the value, what is wrong and how to fix it: a router that starts with a typo in its queue
//! template would send every interruption to the DLQ, which is worse than not starting.

mod direct;
#[cfg(test)]
mod tests;

pub use self::direct::DIRECT_ROLE_SUFFIX;

use sha2::{Digest, Sha256};
use std::time::Duration;

use crate::{
    accounts::{Served, is_account_id},
    resolve::{CacheConfig, ClusterTagKey, HedgeDelay, LookupConfig, TagRules},
};

/// The validated configuration of one router process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub queue_names: QueueNameTemplate,
    pub tags: TagRules,
    /// Where permanently failed records go (with a `reason` attribute); `None` reports them as
    /// failures instead, so the ingest queue's redrive or Lambda's async DLQ keeps them.
    pub dead_letter_queue_url: Option<String>,
    pub cache: CacheConfig,
    /// How lookups hedge to the Tagging API and when EC2 is suspected.
    pub lookup: LookupConfig,
    pub metrics_namespace: String,
    /// The accounts whose events are routed, besides the function's own.
    pub served: Served,
    /// The role a member account creates for the router (its name; the account comes from the
    /// event).
    pub spoke_role_name: String,
    /// That role's IAM path (`SPOKE_ROLE_PATH`, `/` unless the accounts put their roles under
    /// one), part of its ARN.
    pub spoke_role_path: String,
    /// The function's own execution role (`ROUTER_ROLE_ARN`, set by base.yaml): the sender a
    /// tenant queue made before the tenant tag existed admits at home ([`crate::tenancy`]).
    pub router_role_arn: Option<String>,
    /// The ingest queue's redrive `maxReceiveCount` (`MAX_RECEIVE_COUNT`, set by base.yaml from
    /// the value it gives the queue): on that receive a record still failing is dead-lettered with
    /// its reason. `None`: no receive is the last, and SQS's redrive keeps what still fails.
    pub max_receive_count: Option<u32>,
    /// The hub's direct queue (`DIRECT_QUEUE_ARN`): its records were sent by a member's direct
    /// role, and are routed only as that role's account's events ([`crate::direct`]).
    pub direct_queue_arn: Option<String>,
}

/// Turns a cluster name into its Karpenter queue name, e.g. `karpenter-{cluster}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueNameTemplate {
    prefix: String,
    suffix: String,
}

/// The longest SQS queue name AWS accepts.
const MAX_QUEUE_NAME: usize = 80;
/// The longest cluster name EKS accepts (CreateCluster: 1-100 characters).
pub const MAX_CLUSTER_NAME: usize = 100;
const PLACEHOLDER: &str = "{cluster}";

impl QueueNameTemplate {
    pub fn parse(template: &str) -> Result<Self, String> {
        let Some((prefix, suffix)) = template.split_once(PLACEHOLDER) else {
            return Err(format!("it does not contain {PLACEHOLDER}"));
        };
        if suffix.contains(PLACEHOLDER) {
            return Err(format!("it contains {PLACEHOLDER} more than once"));
        }
        if let Some(bad) = prefix
            .chars()
            .chain(suffix.chars())
            .find(|c| !is_queue_name_char(*c))
        {
            return Err(format!(
                "{bad:?} is not allowed in an SQS queue name (letters, digits, '-' and '_' only)"
            ));
        }
        if prefix.len() + suffix.len() >= MAX_QUEUE_NAME {
            return Err(format!(
                "it leaves no room for a cluster name in {MAX_QUEUE_NAME} characters"
            ));
        }
        Ok(Self {
            prefix: prefix.to_owned(),
            suffix: suffix.to_owned(),
        })
    }

    /// The queue name for `cluster`, or `None` when the cluster name is not one EKS accepts
    /// (empty, over [`MAX_CLUSTER_NAME`] characters, or characters SQS refuses).
    ///
    /// A name that fits SQS's 80 characters is `<prefix><cluster><suffix>`. A longer one (EKS
    /// names reach 100) keeps as much of the cluster name as fits, then `-` and the first 8 hex
    /// digits of the SHA-256 of the whole cluster name: `karpenter-<61 characters>-1a2b3c4d`. The
    /// tenant stack is given that name (`QueueName`) by `make deploy-tenant` and `routerctl
    /// adopt`, which compute it the same way (tests hold them equal).
    pub fn queue_name(&self, cluster: &str) -> Option<String> {
        let valid = !cluster.is_empty()
            && cluster.len() <= MAX_CLUSTER_NAME
            && cluster.chars().all(is_queue_name_char);
        if !valid {
            return None;
        }
        let (prefix, suffix) = (&self.prefix, &self.suffix);
        let room = MAX_QUEUE_NAME - prefix.len() - suffix.len();
        if cluster.len() <= room {
            return Some(format!("{prefix}{cluster}{suffix}"));
        }
        // One character of the name, "-" and 8 hex digits at least.
        let kept = room.checked_sub(9).filter(|k| *k >= 1)?;
        let digest = Sha256::digest(cluster.as_bytes());
        let hash: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        Some(format!("{prefix}{}-{hash}{suffix}", &cluster[..kept]))
    }

    /// The fixed text before the cluster name, e.g. `karpenter-`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

fn is_queue_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// A value that stopped start-up. Its message is written for the operator reading the init error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid configuration: {var}={value:?}: {problem}. Fix: {fix}")]
pub struct ConfigError {
    pub var: &'static str,
    pub value: String,
    pub problem: String,
    pub fix: String,
}

/// Every variable [`Config::from_lookup`] reads, in the order docs/operating.md's Configuration
/// table lists them (a test holds the three together: this list, what is read, the table).
pub const VARIABLES: [&str; 19] = [
    "QUEUE_NAME_TEMPLATE",
    "CLUSTER_TAG_KEYS",
    "MANAGED_TAG_KEY",
    "DEAD_LETTER_QUEUE_URL",
    "CACHE_TTL_SECONDS",
    "NEGATIVE_CACHE_TTL_SECONDS",
    "CACHE_MAX_ENTRIES",
    "SWEEP_INTERVAL_SECONDS",
    "LOOKUP_HEDGE_DELAY_MS",
    "EC2_SUSPECT_AFTER_FAILURES",
    "EC2_SUSPECT_SECONDS",
    "METRICS_NAMESPACE",
    "SERVED_ACCOUNTS",
    "SPOKE_ROLE_NAME",
    "SPOKE_ROLE_PATH",
    "MAX_RECEIVE_COUNT",
    "ROUTER_ROLE_ARN",
    "ROUTING_MODE",
    "DIRECT_QUEUE_ARN",
];

pub const DEFAULT_QUEUE_NAME_TEMPLATE: &str = "karpenter-{cluster}";
pub const DEFAULT_CLUSTER_TAG_KEYS: &str =
    "eks:eks-cluster-name,kubernetes.io/cluster/*,aws:eks:cluster-name";
pub const DEFAULT_MANAGED_TAG_KEY: &str = "karpenter.sh/nodepool";
pub const DEFAULT_METRICS_NAMESPACE: &str = "InterruptionRouter";
pub const DEFAULT_SPOKE_ROLE_NAME: &str = "interruption-router-spoke";
/// `SERVED_ACCOUNTS` value for "every account whose events reach the router".
pub const ANY_ACCOUNT: &str = "*";

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Builds the configuration from any variable source (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let queue_names = {
            let var = "QUEUE_NAME_TEMPLATE";
            let value = get(var).unwrap_or_else(|| DEFAULT_QUEUE_NAME_TEMPLATE.to_owned());
            QueueNameTemplate::parse(&value).map_err(|problem| ConfigError {
                var,
                value,
                problem,
                fix: format!(
                    "set it to the Karpenter queue naming scheme with {PLACEHOLDER} where the \
                     cluster name goes, e.g. {DEFAULT_QUEUE_NAME_TEMPLATE}, or unset it for that default"
                ),
            })?
        };

        let cluster_keys = {
            let var = "CLUSTER_TAG_KEYS";
            let value = get(var).unwrap_or_else(|| DEFAULT_CLUSTER_TAG_KEYS.to_owned());
            parse_cluster_tag_keys(&value).map_err(|problem| ConfigError {
                var,
                value,
                problem,
                fix: format!(
                    "give a comma-separated list of tag keys in priority order; a key ending in '*' \
                     takes the cluster name from the rest of the key (value owned or shared), e.g. \
                     {DEFAULT_CLUSTER_TAG_KEYS}"
                ),
            })?
        };

        // Unset means the default; set-but-empty deliberately routes any instance with a cluster tag.
        let managed_key = match get("MANAGED_TAG_KEY") {
            None => Some(DEFAULT_MANAGED_TAG_KEY.to_owned()),
            Some(v) if v.trim().is_empty() => None,
            Some(v) => Some(v.trim().to_owned()),
        };

        let dead_letter_queue_url = match get("DEAD_LETTER_QUEUE_URL") {
            None => None,
            Some(v) if v.trim().is_empty() => None,
            Some(v) => {
                let url = v.trim();
                if !is_queue_url(url) {
                    return Err(ConfigError {
                        var: "DEAD_LETTER_QUEUE_URL",
                        value: v.clone(),
                        problem: "it is not an SQS queue URL".into(),
                        fix: "set it to the URL of the dead-letter queue (https://sqs.<region>.amazonaws.com/<account>/<name>, \
                              as GetQueueUrl returns it), or unset it to report permanent failures as retries"
                            .into(),
                    });
                }
                Some(url.to_owned())
            }
        };

        let ttl = seconds(&get, "CACHE_TTL_SECONDS", 3600, 1)?;
        let negative_ttl = seconds(&get, "NEGATIVE_CACHE_TTL_SECONDS", 60, 0)?;
        if negative_ttl > ttl {
            return Err(ConfigError {
                var: "NEGATIVE_CACHE_TTL_SECONDS",
                value: negative_ttl.as_secs().to_string(),
                problem: format!("it is longer than CACHE_TTL_SECONDS ({})", ttl.as_secs()),
                fix: "keep the negative TTL short (default 60): it decides how soon a newly tagged instance is seen".into(),
            });
        }
        let max_entries = integer(&get, "CACHE_MAX_ENTRIES", 100_000, 1)?;
        let sweep_every = seconds(&get, "SWEEP_INTERVAL_SECONDS", 600, 0)?;
        let lookup = lookup_config(&get)?;

        let metrics_namespace = {
            let var = "METRICS_NAMESPACE";
            let value = get(var).unwrap_or_else(|| DEFAULT_METRICS_NAMESPACE.to_owned());
            let ok = !value.is_empty()
                && value.len() <= 255
                && !value.starts_with("AWS/")
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-_/#: ".contains(c));
            if !ok {
                return Err(ConfigError {
                    var,
                    value,
                    problem: "it is not a valid custom CloudWatch namespace".into(),
                    fix: format!(
                        "use 1-255 letters, digits or . - _ / # : (not starting with AWS/), e.g. {DEFAULT_METRICS_NAMESPACE}"
                    ),
                });
            }
            value
        };

        let served = {
            let var = "SERVED_ACCOUNTS";
            let value = get(var).unwrap_or_default();
            parse_served(&value).map_err(|problem| ConfigError {
                var,
                value,
                problem,
                fix: format!(
                    "leave it empty for the function's own account only, list 12-digit account ids \
                     separated by commas, or set {ANY_ACCOUNT} to serve every account whose events \
                     reach the router (the central event bus's policy decides which)"
                ),
            })?
        };

        let spoke_role_name = {
            let var = "SPOKE_ROLE_NAME";
            let value = get(var)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| DEFAULT_SPOKE_ROLE_NAME.to_owned());
            let ok = value.len() <= 64
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c));
            if !ok {
                return Err(ConfigError {
                    var,
                    value,
                    problem: "it is not an IAM role name".into(),
                    fix: format!(
                        "give the name (not the ARN) of the role spoke.yaml creates in each member \
                         account, 1-64 of letters, digits and +=,.@_-, e.g. {DEFAULT_SPOKE_ROLE_NAME}"
                    ),
                });
            }
            value
        };
        let spoke_role_path = spoke_role_path(get("SPOKE_ROLE_PATH"))?;

        // Shadow mode is gone: it sent nothing, not even to clusters already reading the router's
        // queue. A function still configured for it must not start and silence them.
        if let Some(value) = get("ROUTING_MODE")
            .filter(|v| !v.trim().eq_ignore_ascii_case("forward") && !v.trim().is_empty())
        {
            return Err(ConfigError {
                var: "ROUTING_MODE",
                value,
                problem: "shadow mode was removed: it silenced every cluster already on the router"
                    .into(),
                fix: "unset it (or set forward): the router forwards to clusters with a tenant queue \
                      and counts the others per cluster (NoTenantQueue.<cluster>), which is what \
                      shadow mode measured"
                    .into(),
            });
        }

        let router_role_arn = match get("ROUTER_ROLE_ARN").map(|v| v.trim().to_owned()) {
            None => None,
            Some(v) if v.is_empty() => None,
            Some(v) if is_role_arn(&v) => Some(v),
            Some(v) => {
                return Err(ConfigError {
                    var: "ROUTER_ROLE_ARN",
                    value: v,
                    problem: "it is not an IAM role ARN".into(),
                    fix: "set it to the function's execution role ARN \
                          (arn:<partition>:iam::<account>:role/<name>; base.yaml sets it), or unset it"
                        .into(),
                });
            }
        };

        let max_receive_count = match get("MAX_RECEIVE_COUNT").map(|v| v.trim().to_owned()) {
            None => None,
            Some(v) if v.is_empty() => None,
            Some(v) => {
                match v.parse::<u32>() {
                    Ok(n) if (1..=1000).contains(&n) => Some(n),
                    _ => {
                        return Err(ConfigError {
                        var: "MAX_RECEIVE_COUNT",
                        value: v,
                        problem: "it is not a redrive maxReceiveCount (a whole number from 1 to 1000)"
                            .into(),
                        fix: "set it to the ingest queue's redrive maxReceiveCount (base.yaml sets \
                              both from one value), or unset it to leave the last receive to SQS's \
                              redrive"
                            .into(),
                    });
                    }
                }
            }
        };

        Ok(Self {
            queue_names,
            tags: TagRules {
                cluster_keys,
                managed_key,
            },
            dead_letter_queue_url,
            cache: CacheConfig {
                ttl,
                negative_ttl,
                max_entries,
                sweep_every,
            },
            lookup,
            metrics_namespace,
            served,
            spoke_role_name,
            spoke_role_path,
            router_role_arn,
            max_receive_count,
            direct_queue_arn: direct::direct_queue_arn(get("DIRECT_QUEUE_ARN"))?,
        })
    }

    /// The spoke role as its ARN ends after `role/`: its path (without the leading `/`) and
    /// name, e.g. `platform/interruption-router-spoke`.
    pub fn spoke_role(&self) -> String {
        format!("{}{}", &self.spoke_role_path[1..], self.spoke_role_name)
    }

    /// The name of a member account's direct role for a hub in `region` (IAM's GetRole takes
    /// the name alone).
    pub fn direct_role_name(&self, region: &str) -> String {
        format!("{}{DIRECT_ROLE_SUFFIX}-{region}", self.spoke_role_name)
    }
}

/// `SPOKE_ROLE_PATH`: an IAM path ("/", or "/a/b/": 1-512 characters from `!` to `~`, starting
/// and ending with "/", as IAM's CreateRole takes it); empty or unset is "/".
fn spoke_role_path(value: Option<String>) -> Result<String, ConfigError> {
    let value = value
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "/".to_owned());
    let ok = value.len() <= 512
        && value.starts_with('/')
        && value.ends_with('/')
        && !value.contains("//")
        && value.chars().all(|c| ('!'..='~').contains(&c));
    if ok {
        return Ok(value);
    }
    Err(ConfigError {
        var: "SPOKE_ROLE_PATH",
        value,
        problem: "it is not an IAM role path".into(),
        fix: "give the path of the role spoke.yaml creates in each member account (the spoke \
              stacks' SpokeRolePath), starting and ending with /, e.g. /platform/; leave it \
              unset for /"
            .into(),
    })
}

fn parse_served(value: &str) -> Result<Served, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(Served::Own);
    }
    if value == ANY_ACCOUNT {
        return Ok(Served::Any);
    }
    let mut accounts = std::collections::BTreeSet::new();
    for entry in value.split(',').map(str::trim) {
        if !is_account_id(entry) {
            return Err(format!("{entry:?} is not a 12-digit AWS account id"));
        }
        accounts.insert(entry.to_owned());
    }
    Ok(Served::Listed(accounts))
}

fn parse_cluster_tag_keys(value: &str) -> Result<Vec<ClusterTagKey>, String> {
    let mut keys = Vec::new();
    for raw in value.split(',') {
        let key = raw.trim();
        if key.is_empty() {
            return Err("it has an empty entry".into());
        }
        let parsed = match key.strip_suffix('*') {
            Some("") => return Err("'*' alone would match every tag".into()),
            Some(prefix) => ClusterTagKey::Prefix(prefix.to_owned()),
            None => ClusterTagKey::Value(key.to_owned()),
        };
        if key.len() > 128 || key.trim_end_matches('*').contains('*') {
            return Err(format!(
                "{key:?} is not a tag key ('*' may only end a key, 128 characters at most)"
            ));
        }
        keys.push(parsed);
    }
    Ok(keys)
}

/// `arn:<partition>:iam::<12 digits>:role/<path and name>`.
fn is_role_arn(arn: &str) -> bool {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("iam"), Some(""), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return false;
    };
    partition.starts_with("aws")
        && is_account_id(account)
        && resource
            .strip_prefix("role/")
            .is_some_and(|r| !r.is_empty())
}

/// Loose on purpose (any SQS endpoint, including a local emulator), but catches names, ARNs and typos.
fn is_queue_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return false;
    };
    let mut parts = rest.split('/');
    let host = parts.next().unwrap_or_default();
    let account = parts.next().unwrap_or_default();
    let name = parts.next().unwrap_or_default();
    !host.is_empty()
        && !account.is_empty()
        && !name.is_empty()
        && parts.next().is_none()
        && name.chars().all(|c| is_queue_name_char(c) || c == '.')
}

fn integer(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u64,
    min: u64,
) -> Result<u64, ConfigError> {
    let Some(value) = get(var) else {
        return Ok(default);
    };
    match value.trim().parse::<u64>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(ConfigError {
            var,
            value,
            problem: format!("it is not a whole number >= {min}"),
            fix: format!("set a whole number >= {min}, or unset it for the default {default}"),
        }),
    }
}

/// A fixed hedge delay longer than an SDK attempt may take would never hedge on time.
const MAX_HEDGE_DELAY_MS: u64 = crate::retry::ATTEMPT_TIMEOUT.as_millis() as u64;

/// `LOOKUP_HEDGE_DELAY_MS` (auto, a number of ms, or off), `EC2_SUSPECT_AFTER_FAILURES`,
/// `EC2_SUSPECT_SECONDS`.
fn lookup_config(get: &impl Fn(&str) -> Option<String>) -> Result<LookupConfig, ConfigError> {
    let defaults = LookupConfig::default();
    let hedge = match get("LOOKUP_HEDGE_DELAY_MS") {
        None => defaults.hedge,
        Some(value) => match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => HedgeDelay::Auto,
            "off" => HedgeDelay::Off,
            n => match n.parse::<u64>() {
                Ok(ms) if (1..=MAX_HEDGE_DELAY_MS).contains(&ms) => {
                    HedgeDelay::Fixed(Duration::from_millis(ms))
                }
                _ => {
                    return Err(ConfigError {
                        var: "LOOKUP_HEDGE_DELAY_MS",
                        value,
                        problem: format!(
                            "it is not auto, off, or a number of milliseconds from 1 to {MAX_HEDGE_DELAY_MS}"
                        ),
                        fix: "unset it (auto: the p95 of recent DescribeInstances latencies), give a \
                              fixed delay in milliseconds, or off to ask the Tagging API only after \
                              EC2 failed"
                            .into(),
                    });
                }
            },
        },
    };
    let suspect_after = integer(
        get,
        "EC2_SUSPECT_AFTER_FAILURES",
        u64::from(defaults.suspect_after),
        1,
    )?
    .min(u64::from(u32::MAX)) as u32;
    let suspect_for = seconds(
        get,
        "EC2_SUSPECT_SECONDS",
        defaults.suspect_for.as_secs(),
        0,
    )?;
    Ok(LookupConfig {
        hedge,
        suspect_after,
        suspect_for,
    })
}

fn seconds(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: u64,
    min: u64,
) -> Result<Duration, ConfigError> {
    integer(get, var, default, min).map(Duration::from_secs)
}
