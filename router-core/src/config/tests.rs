//! Every variable's default, its validation, and the message that names the variable and the fix.

use std::{collections::HashMap, time::Duration};

use super::{Config, ConfigError, QueueNameTemplate, VARIABLES};
use crate::{
    accounts::Served,
    resolve::{CacheConfig, ClusterTagKey},
};

fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|k| map.get(k).cloned())
}

/// Each of `values` alone, given to `var`, is refused, naming `var`.
fn refused(var: &str, values: &[&str]) {
    for value in values {
        assert_eq!(config(&[(var, value)]).unwrap_err().var, var, "{value}");
    }
}

#[test]
fn empty_environment_gives_documented_defaults() {
    let c = config(&[]).unwrap();
    assert_eq!(
        c.queue_names.queue_name("prod").as_deref(),
        Some("karpenter-prod")
    );
    assert_eq!(
        c.tags.cluster_keys,
        vec![
            ClusterTagKey::Value("eks:eks-cluster-name".into()),
            ClusterTagKey::Prefix("kubernetes.io/cluster/".into()),
            ClusterTagKey::Value("aws:eks:cluster-name".into()),
        ]
    );
    assert_eq!(c.tags.managed_key.as_deref(), Some("karpenter.sh/nodepool"));
    assert_eq!(c.dead_letter_queue_url, None);
    assert_eq!(
        c.cache,
        CacheConfig {
            ttl: Duration::from_secs(3600),
            negative_ttl: Duration::from_secs(60),
            max_entries: 100_000,
            sweep_every: Duration::from_secs(600),
        }
    );
    assert_eq!(c.metrics_namespace, "InterruptionRouter");
    assert_eq!(c.served, Served::Own);
    assert_eq!(c.spoke_role_name, "interruption-router-spoke");
    assert_eq!(c.router_role_arn, None);
}

#[test]
fn a_function_still_set_for_shadow_mode_does_not_start() {
    assert!(config(&[("ROUTING_MODE", "forward")]).is_ok());
    assert!(config(&[("ROUTING_MODE", "")]).is_ok());
    for value in ["Shadow", "dry-run"] {
        let error = config(&[("ROUTING_MODE", value)]).unwrap_err();
        assert_eq!(error.var, "ROUTING_MODE");
        assert!(error.problem.contains("removed"), "{error}");
        assert!(error.fix.contains("NoTenantQueue"), "{error}");
    }
}

#[test]
fn the_router_role_is_a_role_arn() {
    let c = config(&[(
        "ROUTER_ROLE_ARN",
        "arn:aws:iam::111111111111:role/interruption-router-RouterRole-X",
    )])
    .unwrap();
    assert_eq!(
        c.router_role_arn.as_deref(),
        Some("arn:aws:iam::111111111111:role/interruption-router-RouterRole-X")
    );
    let error = config(&[("ROUTER_ROLE_ARN", "RouterRole")]).unwrap_err();
    assert_eq!(error.var, "ROUTER_ROLE_ARN");
}

#[test]
fn served_accounts_are_a_list_a_star_or_nothing() {
    assert_eq!(
        config(&[("SERVED_ACCOUNTS", " ")]).unwrap().served,
        Served::Own
    );
    assert_eq!(
        config(&[("SERVED_ACCOUNTS", "*")]).unwrap().served,
        Served::Any
    );
    assert_eq!(
        config(&[("SERVED_ACCOUNTS", "111111111111, 222222222222")])
            .unwrap()
            .served,
        Served::Listed(["111111111111".into(), "222222222222".into()].into())
    );
    for bad in [
        "o-abc123",
        "11111111111",
        "111111111111,,222222222222",
        "all",
    ] {
        let err = config(&[("SERVED_ACCOUNTS", bad)]).unwrap_err();
        assert_eq!(err.var, "SERVED_ACCOUNTS", "{bad:?}");
        assert!(err.to_string().contains("Fix: "), "{err}");
    }
}

#[test]
fn spoke_role_path_is_an_iam_path_and_part_of_the_role_s_arn() {
    let c = config(&[]).unwrap();
    assert_eq!(c.spoke_role_path, "/");
    assert_eq!(c.spoke_role(), "interruption-router-spoke");
    let c = config(&[("SPOKE_ROLE_PATH", "/platform/eks/")]).unwrap();
    assert_eq!(c.spoke_role(), "platform/eks/interruption-router-spoke");
    for bad in [
        "platform",
        "/platform",
        "platform/",
        "//",
        "/a//b/",
        "/a b/",
    ] {
        let err = config(&[("SPOKE_ROLE_PATH", bad)]).unwrap_err();
        assert_eq!(err.var, "SPOKE_ROLE_PATH", "{bad:?}");
        assert!(err.to_string().contains("SpokeRolePath"), "{err}");
    }
}

#[test]
fn spoke_role_name_is_a_role_name_not_an_arn() {
    assert_eq!(
        config(&[("SPOKE_ROLE_NAME", "ir-spoke")])
            .unwrap()
            .spoke_role_name,
        "ir-spoke"
    );
    assert_eq!(
        config(&[("SPOKE_ROLE_NAME", "arn:aws:iam::111111111111:role/x")])
            .unwrap_err()
            .var,
        "SPOKE_ROLE_NAME"
    );
}

#[test]
fn empty_managed_tag_key_routes_any_cluster_tagged_instance() {
    assert_eq!(
        config(&[("MANAGED_TAG_KEY", "")]).unwrap().tags.managed_key,
        None
    );
}

#[test]
fn template_without_placeholder_names_variable_and_fix() {
    let err = config(&[("QUEUE_NAME_TEMPLATE", "karpenter-queue")]).unwrap_err();
    assert_eq!(err.var, "QUEUE_NAME_TEMPLATE");
    let msg = err.to_string();
    assert!(
        msg.contains("QUEUE_NAME_TEMPLATE=\"karpenter-queue\""),
        "{msg}"
    );
    assert!(msg.contains("does not contain {cluster}"), "{msg}");
    assert!(msg.contains("Fix: "), "{msg}");
}

#[test]
fn template_rejects_characters_sqs_refuses_and_double_placeholders() {
    assert_eq!(
        config(&[("QUEUE_NAME_TEMPLATE", "kp.{cluster}")])
            .unwrap_err()
            .var,
        "QUEUE_NAME_TEMPLATE"
    );
    assert_eq!(
        config(&[("QUEUE_NAME_TEMPLATE", "{cluster}-{cluster}")])
            .unwrap_err()
            .var,
        "QUEUE_NAME_TEMPLATE"
    );
    let c = config(&[("QUEUE_NAME_TEMPLATE", "{cluster}_interruptions")]).unwrap();
    assert_eq!(
        c.queue_names.queue_name("a").as_deref(),
        Some("a_interruptions")
    );
}

#[test]
fn queue_name_refuses_cluster_names_sqs_cannot_hold() {
    let t = QueueNameTemplate::parse("karpenter-{cluster}").unwrap();
    assert_eq!(t.queue_name(""), None);
    assert_eq!(t.queue_name("a/b"), None);
    assert_eq!(
        t.queue_name(&"x".repeat(70)),
        Some(format!("karpenter-{}", "x".repeat(70)))
    );
    // Longer: as much of the name as fits, "-" and 8 hex digits of its SHA-256 (the values from
    // Python's hashlib, as the Makefile computes them), 80 characters in all.
    assert_eq!(
        t.queue_name(&"x".repeat(71)),
        Some(format!("karpenter-{}-87a1e4c1", "x".repeat(61)))
    );
    let longest = t.queue_name(&"a".repeat(100)).unwrap();
    assert_eq!(longest, format!("karpenter-{}-28165978", "a".repeat(61)));
    assert_eq!(longest.len(), 80);
    assert_eq!(t.queue_name(&"a".repeat(101)), None);
    // Two long names alike up to the cut get different queues.
    let (one, two) = ("a".repeat(90) + "1", "a".repeat(90) + "2");
    assert_ne!(t.queue_name(&one), t.queue_name(&two));
    // A prefix that leaves no room for the hash serves short names only.
    let wide = QueueNameTemplate::parse(&format!("{}{{cluster}}", "p".repeat(75))).unwrap();
    assert!(wide.queue_name("abcde").is_some());
    assert_eq!(wide.queue_name("abcdef"), None);
}

#[test]
fn bad_numbers_and_inverted_ttls_fail() {
    assert_eq!(
        config(&[("CACHE_TTL_SECONDS", "1h")]).unwrap_err().var,
        "CACHE_TTL_SECONDS"
    );
    assert_eq!(
        config(&[("CACHE_TTL_SECONDS", "0")]).unwrap_err().var,
        "CACHE_TTL_SECONDS"
    );
    assert_eq!(
        config(&[("CACHE_MAX_ENTRIES", "-5")]).unwrap_err().var,
        "CACHE_MAX_ENTRIES"
    );
    assert_eq!(
        config(&[("SWEEP_INTERVAL_SECONDS", "10m")])
            .unwrap_err()
            .var,
        "SWEEP_INTERVAL_SECONDS"
    );
    assert_eq!(
        config(&[("SWEEP_INTERVAL_SECONDS", "0")])
            .unwrap()
            .cache
            .sweep_every,
        Duration::ZERO,
        "0 turns sweeps off"
    );
    assert_eq!(
        config(&[
            ("CACHE_TTL_SECONDS", "30"),
            ("NEGATIVE_CACHE_TTL_SECONDS", "60")
        ])
        .unwrap_err()
        .var,
        "NEGATIVE_CACHE_TTL_SECONDS"
    );
    assert!(config(&[("NEGATIVE_CACHE_TTL_SECONDS", "0")]).is_ok());
}

#[test]
fn cluster_tag_keys_are_validated() {
    for bad in ["", "a,,b", "*", "a*b", "kubernetes.io/*/x*"] {
        assert_eq!(
            config(&[("CLUSTER_TAG_KEYS", bad)]).unwrap_err().var,
            "CLUSTER_TAG_KEYS",
            "{bad:?}"
        );
    }
    let c = config(&[("CLUSTER_TAG_KEYS", " team/cluster , k8s.io/cluster/* ")]).unwrap();
    assert_eq!(
        c.tags.cluster_keys,
        vec![
            ClusterTagKey::Value("team/cluster".into()),
            ClusterTagKey::Prefix("k8s.io/cluster/".into())
        ]
    );
}

#[test]
fn dead_letter_queue_url_must_be_a_url() {
    assert_eq!(
        config(&[("DEAD_LETTER_QUEUE_URL", "router-dlq")])
            .unwrap_err()
            .var,
        "DEAD_LETTER_QUEUE_URL"
    );
    assert_eq!(
        config(&[(
            "DEAD_LETTER_QUEUE_URL",
            "arn:aws:sqs:us-east-1:123456789012:dlq"
        )])
        .unwrap_err()
        .var,
        "DEAD_LETTER_QUEUE_URL"
    );
    assert_eq!(
        config(&[("DEAD_LETTER_QUEUE_URL", "")])
            .unwrap()
            .dead_letter_queue_url,
        None
    );
    let url = "https://sqs.us-east-1.amazonaws.com/123456789012/router-dlq";
    assert_eq!(
        config(&[("DEAD_LETTER_QUEUE_URL", url)])
            .unwrap()
            .dead_letter_queue_url
            .as_deref(),
        Some(url)
    );
}

#[test]
fn metrics_namespace_is_validated() {
    assert_eq!(
        config(&[("METRICS_NAMESPACE", "")]).unwrap_err().var,
        "METRICS_NAMESPACE"
    );
    assert_eq!(
        config(&[("METRICS_NAMESPACE", "AWS/Lambda")])
            .unwrap_err()
            .var,
        "METRICS_NAMESPACE"
    );
    assert_eq!(
        config(&[("METRICS_NAMESPACE", "Platform/Router")])
            .unwrap()
            .metrics_namespace,
        "Platform/Router"
    );
}

#[test]
fn lookup_hedging_and_ec2_suspicion_have_defaults_and_name_their_variable() {
    use crate::resolve::{HedgeDelay, LookupConfig};
    let c = config(&[]).unwrap();
    assert_eq!(
        c.lookup,
        LookupConfig {
            hedge: HedgeDelay::Auto,
            suspect_after: 2,
            suspect_for: Duration::from_secs(30),
        }
    );
    let c = config(&[
        ("LOOKUP_HEDGE_DELAY_MS", "250"),
        ("EC2_SUSPECT_AFTER_FAILURES", "3"),
        ("EC2_SUSPECT_SECONDS", "0"),
    ])
    .unwrap();
    assert_eq!(
        c.lookup.hedge,
        HedgeDelay::Fixed(Duration::from_millis(250))
    );
    assert_eq!(
        (c.lookup.suspect_after, c.lookup.suspect_for),
        (3, Duration::ZERO)
    );
    assert_eq!(
        config(&[("LOOKUP_HEDGE_DELAY_MS", "Off")])
            .unwrap()
            .lookup
            .hedge,
        HedgeDelay::Off
    );
    for bad in ["0", "5000", "soon", "-1"] {
        let error = config(&[("LOOKUP_HEDGE_DELAY_MS", bad)]).unwrap_err();
        assert_eq!(error.var, "LOOKUP_HEDGE_DELAY_MS");
        assert!(error.problem.contains("3000"), "{error}");
        assert!(error.fix.contains("auto"), "{error}");
    }
    let error = config(&[("EC2_SUSPECT_AFTER_FAILURES", "0")]).unwrap_err();
    assert_eq!(error.var, "EC2_SUSPECT_AFTER_FAILURES");
}

#[test]
fn variables_lists_every_variable_the_configuration_reads() {
    let asked = std::cell::RefCell::new(Vec::new());
    Config::from_lookup(|name| {
        asked.borrow_mut().push(name.to_owned());
        None
    })
    .unwrap();
    let mut asked = asked.into_inner();
    asked.sort();
    asked.dedup();
    let mut listed: Vec<String> = VARIABLES.iter().map(|v| v.to_string()).collect();
    listed.sort();
    assert_eq!(asked, listed);
}

#[test]
fn a_template_with_a_suffix_keeps_long_names_within_80_characters() {
    let t = QueueNameTemplate::parse("karpenter-{cluster}-irq").unwrap();
    assert_eq!(t.prefix(), "karpenter-");
    let name = t.queue_name(&"b".repeat(100)).unwrap();
    assert_eq!(name.len(), 80, "{name}");
    assert!(
        name.starts_with("karpenter-bbb") && name.ends_with("-irq"),
        "{name}"
    );
    // The fixed text alone may not fill the 80 characters: prefix and suffix count together.
    let full = format!("{}{{cluster}}s", "p".repeat(79));
    assert_eq!(
        config(&[("QUEUE_NAME_TEMPLATE", full.as_str())])
            .unwrap_err()
            .var,
        "QUEUE_NAME_TEMPLATE"
    );
    let roomy = format!("{}{{cluster}}s", "p".repeat(78));
    assert_eq!(
        QueueNameTemplate::parse(&roomy)
            .unwrap()
            .queue_name("c")
            .map(|n| n.len()),
        Some(80)
    );
}

#[test]
fn a_managed_tag_key_that_is_set_is_used_trimmed() {
    assert_eq!(
        config(&[("MANAGED_TAG_KEY", " team/nodes ")])
            .unwrap()
            .tags
            .managed_key
            .as_deref(),
        Some("team/nodes")
    );
}

#[test]
fn a_negative_ttl_as_long_as_the_ttl_is_allowed() {
    let c = config(&[
        ("CACHE_TTL_SECONDS", "60"),
        ("NEGATIVE_CACHE_TTL_SECONDS", "60"),
    ])
    .unwrap();
    assert_eq!(c.cache.negative_ttl, c.cache.ttl);
}

#[test]
fn an_empty_router_role_or_receive_count_is_unset_and_counts_outside_redrive_are_refused() {
    let c = config(&[("ROUTER_ROLE_ARN", " "), ("MAX_RECEIVE_COUNT", "")]).unwrap();
    assert_eq!(c.router_role_arn, None);
    assert_eq!(c.max_receive_count, None);
    refused("MAX_RECEIVE_COUNT", &["0", "1001", "three"]);
    for good in [1, 1000] {
        assert_eq!(
            config(&[("MAX_RECEIVE_COUNT", good.to_string().as_str())])
                .unwrap()
                .max_receive_count,
            Some(good)
        );
    }
}

#[test]
fn each_defect_alone_makes_a_role_arn_or_a_queue_url_refused() {
    refused(
        "ROUTER_ROLE_ARN",
        &[
            "arn:gcp:iam::111111111111:role/r",
            "arn:aws:iam::1111:role/r",
            "arn:aws:iam::111111111111:user/r",
            "arn:aws:iam::111111111111:role/",
        ],
    );
    refused(
        "DEAD_LETTER_QUEUE_URL",
        &[
            "https:///123456789012/dlq",
            "https://sqs.us-east-1.amazonaws.com//dlq",
            "https://sqs.us-east-1.amazonaws.com/123456789012/",
            "https://sqs.us-east-1.amazonaws.com/123456789012/dlq/more",
            "https://sqs.us-east-1.amazonaws.com/123456789012/dl*q",
        ],
    );
    // A FIFO queue's name ends in .fifo; a local emulator's URL is http.
    for good in [
        "https://sqs.us-east-1.amazonaws.com/123456789012/dlq.fifo",
        "http://127.0.0.1:5000/123456789012/dlq",
    ] {
        assert!(config(&[("DEAD_LETTER_QUEUE_URL", good)]).is_ok(), "{good}");
    }
}

#[test]
fn a_cluster_tag_key_may_be_128_characters_not_more() {
    let longest = "k".repeat(128);
    assert!(config(&[("CLUSTER_TAG_KEYS", longest.as_str())]).is_ok());
    let over = "k".repeat(129);
    assert_eq!(
        config(&[("CLUSTER_TAG_KEYS", over.as_str())])
            .unwrap_err()
            .var,
        "CLUSTER_TAG_KEYS"
    );
}
