//! Tenant queue names and policies, on recorded inputs.

use interruption_router::config::QueueNameTemplate;

use super::cluster_of;

#[test]
fn tenant_queue_names_map_back_to_clusters() {
    let t = QueueNameTemplate::parse("karpenter-{cluster}").unwrap();
    assert_eq!(cluster_of(&t, "karpenter-alpha").as_deref(), Some("alpha"));
    assert_eq!(cluster_of(&t, "other-alpha"), None);
    assert_eq!(cluster_of(&t, "karpenter-"), None);
    let t = QueueNameTemplate::parse("{cluster}_interruptions").unwrap();
    assert_eq!(
        cluster_of(&t, "beta_interruptions").as_deref(),
        Some("beta")
    );
    assert_eq!(cluster_of(&t, "beta_other"), None);
}
