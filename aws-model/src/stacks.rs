//! The project's CloudFormation templates and a small deployer for them: what the demo and the
//! tests use to stand the real stacks up in the emulator (and what works against an account too).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use router_core::event::Kinds;

/// The templates, compiled in so the demo always deploys exactly what is in `cloudformation/`.
pub const BASE_TEMPLATE: &str = include_str!("../../cloudformation/base.yaml");
pub const TENANT_TEMPLATE: &str = include_str!("../../cloudformation/tenant.yaml");
pub const FIS_TEMPLATE: &str = include_str!("../../cloudformation/fis.yaml");
pub const SPOKE_TEMPLATE: &str = include_str!("../../cloudformation/spoke.yaml");
/// The deployer's least-privilege policy and CloudFormation's service role (deployed once per
/// account by an administrator).
pub const DEPLOYER_TEMPLATE: &str = include_str!("../../cloudformation/deployer.yaml");

/// The release a template belongs to: its `Release` mapping's `Version` (base.yaml's `Router`
/// entry, spoke.yaml's `Spoke`), which its `Version` output and version tags carry.
pub fn template_version(template: &str) -> Result<String> {
    let doc = crate::template::Template::parse("template", template)?.doc;
    let release = &doc["Mappings"]["Release"];
    ["Router", "Spoke"]
        .iter()
        .find_map(|entry| release[entry]["Version"].as_str())
        .map(str::to_owned)
        .context("no Release mapping with a Version")
}

/// Where base.yaml's function finds its code when `CodeS3Key` is empty: the release's zip for
/// `architecture`, `<CodePrefix>/bootstrap-<architecture>.zip` (what `make release` lays out).
pub fn release_code_key(architecture: &str) -> String {
    let doc = crate::template::Template::parse("base.yaml", BASE_TEMPLATE)
        .expect("base.yaml parses")
        .doc;
    let prefix = doc["Mappings"]["Release"]["Router"]["CodePrefix"]
        .as_str()
        .expect("base.yaml has Release.Router.CodePrefix");
    format!("{prefix}/bootstrap-{architecture}.zip")
}

/// The tenant stack `make deploy-tenant` deploys for `cluster` next to the base stack `base`:
/// `<base>-tenant-<cluster>`, with each `_` (which EKS allows in cluster names and CloudFormation
/// does not allow in stack names) written as `-`. The Makefile computes the same name.
pub fn tenant_stack_name(base: &str, cluster: &str) -> String {
    format!("{base}-tenant-{}", cluster.replace('_', "-"))
}

/// What a cluster's tenant stack takes from the base stack of its account and region, unless the
/// operator gives it: the alarm topic its unread-message alarm notifies, the locked-down setting
/// of its queue's key (`Create`), so a tenant in a locked-down account is locked down too, and
/// the `RouterName` whose exports it imports. In a member account (no base stack) a tenant takes
/// what the operator gives. `routerctl adopt` deploys tenants with
/// [`tenant_parameters`]; `make deploy-tenant` inherits the same list (its `TENANT_INHERITS`,
/// which a test holds equal to this one).
pub const TENANT_INHERITS: [&str; 3] = ["AlarmTopicArn", "KmsKey", "RouterName"];

/// The parameters of `cluster`'s tenant stack next to the base stack whose parameters are
/// `connecting`: the cluster, Karpenter's role, what [`TENANT_INHERITS`] names, where set,
/// `QueueName` when `<QueuePrefix><cluster>` passes SQS's 80 characters (the name the router
/// derives for the cluster: [`router_core::config::QueueNameTemplate::queue_name`]), and
/// `EventKinds` when the cluster takes fewer than all five kinds.
pub fn tenant_parameters(
    connecting: &BTreeMap<String, String>,
    cluster: &str,
    karpenter_role: &str,
    kinds: Kinds,
) -> Vec<(String, String)> {
    let mut parameters = vec![
        ("ClusterName".to_owned(), cluster.to_owned()),
        ("KarpenterRoleName".to_owned(), karpenter_role.to_owned()),
    ];
    if kinds != Kinds::ALL {
        parameters.push(("EventKinds".to_owned(), event_kinds(kinds)));
    }
    let prefix = connecting
        .get("QueuePrefix")
        .filter(|p| !p.is_empty())
        .map_or("karpenter-", String::as_str);
    let derived = router_core::config::QueueNameTemplate::parse(&format!("{prefix}{{cluster}}"))
        .ok()
        .and_then(|t| t.queue_name(cluster));
    if let Some(queue) = derived.filter(|q| *q != format!("{prefix}{cluster}")) {
        parameters.push(("QueueName".to_owned(), queue));
    }
    for key in TENANT_INHERITS {
        if let Some(value) = connecting.get(key).filter(|v| !v.is_empty()) {
            parameters.push((key.to_owned(), value.clone()));
        }
    }
    parameters
}

/// tenant.yaml's `EventKinds` value for `kinds`: their labels, comma-separated.
pub fn event_kinds(kinds: Kinds) -> String {
    kinds
        .iter()
        .map(|k| k.label())
        .collect::<Vec<_>>()
        .join(",")
}
