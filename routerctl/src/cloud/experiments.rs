//! What `routerctl fis` asks of AWS: FIS's templates and experiments, and log events (the
//! experiment's log, the router's deliveries).

use std::future::Future;

pub use aws_model::resources::{
    ExperimentState, ExperimentTemplate, LogEvent, TemplateSummary, TemplateTarget,
};

use super::{CallError, Cloud};

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
