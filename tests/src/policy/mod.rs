//! Security checks over the CloudFormation templates, each returning the violations it found.
//!
//! moto creates queues, roles and functions but ignores queue policies and never evaluates IAM,
//! and cfn-lint/checkov know nothing of this system's guarantees (the router may send only to
//! `<QueuePrefix>*`, only the router may write a tenant queue, …). These checks read the
//! templates and state those guarantees directly; `tests/tests/e2e/policy/` shows each one
//! failing on a deliberately broken copy.
//!
//! Templates are parsed by [`Template::parse`] (`aws-model/src/template/mod.rs`, which says why it
//! uses `serde_norway`): CloudFormation's short-form tags (`!Sub`, `!GetAtt`, `!If`, …) are
//! rewritten to the long form (`Fn::Sub`, …) so a check sees one shape whichever form the template
//! uses.
//!
//! Where a value depends on a condition (`Fn::If`), a check looks at every branch: a template
//! passes only if it is safe whatever its parameters are (`values.rs`). `statements.rs` reads the
//! policies; the checks themselves are grouped by what they hold: `grants.rs` (every Allow),
//! `router.rs` (the router's role), `queues.rs`, `spoke.rs` (spoke.yaml's role). This file lists
//! them ([`Check`]) and reports what they find ([`Violation`]).

use std::{collections::BTreeSet, fmt};

pub use aws_model::template::Template;

mod grants;
mod queues;
mod router;
mod spoke;
mod statements;
mod values;

pub use grants::{KEY_SOURCE_ARN_EXCEPTION, SOURCE_ARN_EXCEPTION, TOPIC_KEY_SOURCE_ARN_EXCEPTION};
pub use router::{path_pattern_admits_no_wildcard, pattern_admits_only_names};
pub use statements::{
    PolicyKind, Principal, Statement, assumable_roles, dead_letter_queues, direct_queues,
    execution_roles, ingest_queues, statements,
};
pub use values::{action_matches, alternatives, branches, items, list_branches};

use grants::{
    no_unscoped_wildcard_principals, no_wildcard_actions, service_principals_pinned_to_source,
};
use queues::{
    direct_queue_writable_only_by_direct_roles, ingest_visibility_timeout,
    queue_policies_require_tls, queues_encrypted, report_batch_item_failures,
    tenant_queue_writable_only_by_router,
};
use router::{
    router_assumes_only_spoke_roles, router_has_needed_permissions, router_reads_only_ingest_queue,
    router_sends_only_to_prefix_and_dlq,
};
use spoke::{spoke_role_exact_permissions, spoke_role_trusts_only_router};

/// A check's finding: which guarantee, where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub check: Check,
    pub template: String,
    pub at: String,
    pub problem: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {}: {}: {}",
            self.check.name(),
            self.template,
            self.at,
            self.problem
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    NoWildcardActions,
    RouterSendsOnlyToPrefixAndDlq,
    RouterReadsOnlyIngestQueue,
    TenantQueueWritableOnlyByRouter,
    DirectQueueWritableOnlyByDirectRoles,
    QueuesEncrypted,
    QueuePoliciesRequireTls,
    ServicePrincipalsPinnedToSource,
    IngestVisibilityTimeout,
    ReportBatchItemFailures,
    NoUnscopedWildcardPrincipals,
    RouterHasNeededPermissions,
    RouterAssumesOnlySpokeRoles,
    SpokeRoleTrustsOnlyRouter,
    SpokeRoleExactPermissions,
}

impl Check {
    pub const ALL: [Check; 15] = [
        Check::NoWildcardActions,
        Check::RouterSendsOnlyToPrefixAndDlq,
        Check::RouterReadsOnlyIngestQueue,
        Check::TenantQueueWritableOnlyByRouter,
        Check::DirectQueueWritableOnlyByDirectRoles,
        Check::QueuesEncrypted,
        Check::QueuePoliciesRequireTls,
        Check::ServicePrincipalsPinnedToSource,
        Check::IngestVisibilityTimeout,
        Check::ReportBatchItemFailures,
        Check::NoUnscopedWildcardPrincipals,
        Check::RouterHasNeededPermissions,
        Check::RouterAssumesOnlySpokeRoles,
        Check::SpokeRoleTrustsOnlyRouter,
        Check::SpokeRoleExactPermissions,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Check::NoWildcardActions => "no-wildcard-actions",
            Check::RouterSendsOnlyToPrefixAndDlq => "router-sends-only-to-prefix-and-dlq",
            Check::RouterReadsOnlyIngestQueue => "router-reads-only-ingest-queue",
            Check::TenantQueueWritableOnlyByRouter => "tenant-queue-writable-only-by-router",
            Check::DirectQueueWritableOnlyByDirectRoles => {
                "direct-queue-writable-only-by-direct-roles"
            }
            Check::QueuesEncrypted => "queues-encrypted",
            Check::QueuePoliciesRequireTls => "queue-policies-require-tls",
            Check::ServicePrincipalsPinnedToSource => "service-principals-pinned-to-source",
            Check::IngestVisibilityTimeout => "ingest-visibility-timeout",
            Check::ReportBatchItemFailures => "report-batch-item-failures",
            Check::NoUnscopedWildcardPrincipals => "no-unscoped-wildcard-principals",
            Check::RouterHasNeededPermissions => "router-has-needed-permissions",
            Check::RouterAssumesOnlySpokeRoles => "router-assumes-only-spoke-roles",
            Check::SpokeRoleTrustsOnlyRouter => "spoke-role-trusts-only-router",
            Check::SpokeRoleExactPermissions => "spoke-role-exact-permissions",
        }
    }

    pub fn run(self, t: &Template) -> Vec<Violation> {
        let found = match self {
            Check::NoWildcardActions => no_wildcard_actions(t),
            Check::RouterSendsOnlyToPrefixAndDlq => router_sends_only_to_prefix_and_dlq(t),
            Check::RouterReadsOnlyIngestQueue => router_reads_only_ingest_queue(t),
            Check::TenantQueueWritableOnlyByRouter => tenant_queue_writable_only_by_router(t),
            Check::DirectQueueWritableOnlyByDirectRoles => {
                direct_queue_writable_only_by_direct_roles(t)
            }
            Check::QueuesEncrypted => queues_encrypted(t),
            Check::QueuePoliciesRequireTls => queue_policies_require_tls(t),
            Check::ServicePrincipalsPinnedToSource => service_principals_pinned_to_source(t),
            Check::IngestVisibilityTimeout => ingest_visibility_timeout(t),
            Check::ReportBatchItemFailures => report_batch_item_failures(t),
            Check::NoUnscopedWildcardPrincipals => no_unscoped_wildcard_principals(t),
            Check::RouterHasNeededPermissions => router_has_needed_permissions(t),
            Check::RouterAssumesOnlySpokeRoles => router_assumes_only_spoke_roles(t),
            Check::SpokeRoleTrustsOnlyRouter => spoke_role_trusts_only_router(t),
            Check::SpokeRoleExactPermissions => spoke_role_exact_permissions(t),
        };
        // A finding repeated in several branches of an Fn::If is reported once.
        let found: BTreeSet<(String, String)> = found.into_iter().collect();
        found
            .into_iter()
            .map(|(at, problem)| Violation {
                check: self,
                template: t.name.clone(),
                at,
                problem,
            })
            .collect()
    }
}

/// Every check's violations.
pub fn evaluate(t: &Template) -> Vec<Violation> {
    Check::ALL.into_iter().flat_map(|c| c.run(t)).collect()
}

type Found = Vec<(String, String)>;
