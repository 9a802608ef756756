//! What `routerctl fis` asks of AWS: FIS's templates and experiments, and log events (the
//! experiment's log, the router's deliveries).

use std::{collections::BTreeMap, future::Future};

use super::{CallError, Cloud};

/// An experiment template as ListExperimentTemplates summarises it.
#[derive(Debug, Clone, Default)]
pub struct TemplateSummary {
    pub id: String,
    pub tags: BTreeMap<String, String>,
}

/// One target of a template as GetExperimentTemplate answers it.
#[derive(Debug, Clone, Default)]
pub struct TemplateTarget {
    pub name: String,
    pub resource_type: String,
    pub resource_tags: BTreeMap<String, String>,
    /// It names its resources by ARN.
    pub by_arn: bool,
}

/// An experiment template as GetExperimentTemplate answers it.
#[derive(Debug, Clone, Default)]
pub struct ExperimentTemplate {
    pub targets: Vec<TemplateTarget>,
    /// Its CloudWatch Logs log group's ARN, when it logs.
    pub log_group_arn: Option<String>,
    /// The `durationBeforeInterruption` of each spot-interruption action (ISO 8601).
    pub spot_notices: Vec<String>,
}

/// An experiment as GetExperiment answers it (times in ms since the epoch).
#[derive(Debug, Clone, Default)]
pub struct ExperimentState {
    pub template_id: String,
    /// `pending`, `initiating`, `running`, `completed`, `stopping`, `stopped`, `failed`,
    /// `cancelled`.
    pub status: Option<String>,
    pub reason: Option<String>,
    pub creation_ms: Option<i64>,
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

/// One log event: its timestamp (ms) and message.
pub type LogEvent = (i64, String);

/// What `routerctl fis` reads and starts (see the module documentation).
pub trait Experiments: Cloud {
    /// FIS ListExperimentTemplates, every page.
    fn experiment_templates(&self)
    -> impl Future<Output = Result<Vec<TemplateSummary>, CallError>>;
    /// FIS GetExperimentTemplate.
    fn experiment_template(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<ExperimentTemplate, CallError>>;
    /// FIS StartExperiment, tagged `started-by=routerctl`: the experiment's id.
    fn start_experiment(
        &self,
        template_id: &str,
    ) -> impl Future<Output = Result<String, CallError>>;
    /// FIS GetExperiment.
    fn experiment(&self, id: &str) -> impl Future<Output = Result<ExperimentState, CallError>>;
    /// FIS ListExperimentResolvedTargets, every page: every value of every target's information.
    fn resolved_targets(&self, id: &str) -> impl Future<Output = Result<Vec<String>, CallError>>;
    /// CloudWatch Logs FilterLogEvents, every page (a missing group:
    /// [`super::missing::RESOURCE`]).
    fn log_events(
        &self,
        group: &str,
        pattern: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> impl Future<Output = Result<Vec<LogEvent>, CallError>>;
}
