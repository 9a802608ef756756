//! Copies of the real templates broken the ways a careless edit would break them, each meant to
//! fail exactly one check: grouped as the checks are (`tests/src/policy/`), and listed in
//! [`broken_copies`] in the order the checks are.

use e2e_tests::policy::{Check, Template};

mod grants;
mod queues;
mod router;
mod spoke;

pub(super) struct Broken {
    pub(super) check: Check,
    pub(super) what: &'static str,
    pub(super) template: Template,
}

pub(super) fn broken(check: Check, what: &'static str, template: Template) -> Broken {
    Broken {
        check,
        what,
        template,
    }
}

/// Each entry breaks one guarantee the way an edit could.
pub(super) fn broken_copies() -> Vec<Broken> {
    [
        grants::wildcard_actions(),
        router::sends(),
        router::reads(),
        queues::tenant_queue_writers(),
        queues::direct_queue_writers(),
        queues::encryption(),
        queues::tls(),
        grants::service_principals(),
        queues::visibility_timeout(),
        queues::batch_item_failures(),
        grants::wildcard_principals(),
        router::needed_permissions(),
        router::assumes(),
        spoke::trust(),
        spoke::permissions(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
