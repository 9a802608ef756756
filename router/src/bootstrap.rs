//! Bootstrap: everything `main` does, so the binary stays a few lines.
//!
//! Reads and validates the configuration, builds the AWS side of the seam once ([`SdkAws`]: its
//! clients' connection pools and the router's caches live as long as the execution environment),
//! then hands the router to the Lambda runtime. A configuration error is reported to the Runtime API's `/init/error`, so
//! Lambda shows the message (variable, value, fix) to whoever invokes the function, and the process
//! exits non-zero.

use std::{sync::Arc, time::Duration};

use aws_config::{BehaviorVersion, retry::RetryConfig, timeout::TimeoutConfig};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use lambda_runtime_api_client::{body::Body, build_request};
use serde_json::{Value, value::RawValue};
use tracing::Instrument;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};

use crate::{
    aws::sdk::SdkAws,
    config::{Config, ConfigError},
    handler::{Invocation, Router},
    logging::LogSettings,
    retry::ATTEMPT_TIMEOUT,
};

/// SDK limits per call. Generous next to normal latencies (EC2 ~100 ms, SQS ~20 ms), tight next to
/// the two minutes a spot warning gives. One attempt per call: every retry is the router's own
/// (another lookup path, jittered backoff within the invocation's budget, a short hand-back; see
/// [`crate::retry`]), so none waits on the SDK's backoff and the whole ladder is in one place.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn run() -> Result<(), lambda_runtime::Error> {
    let logging = LogSettings::from_env();
    init_logging(&logging);
    // Every line the process writes carries the release as a field of this span (JSON: in
    // `spans`), so a log search finds which version handled an event. An ERROR-level span is
    // enabled at every LogLevel but FATAL, which writes no line at all.
    let release = tracing::error_span!("router", version = crate::VERSION);
    start(logging).instrument(release).await
}

async fn start(logging: LogSettings) -> Result<(), lambda_runtime::Error> {
    tracing::info!("interruption-router {} starting", crate::VERSION);
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(error) => return Err(init_failed(error).await),
    };
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(ATTEMPT_TIMEOUT)
                .build(),
        )
        .retry_config(RetryConfig::disabled())
        .load()
        .await;
    let Some(region) = sdk.region().map(|r| r.to_string()) else {
        return Err(init_failed(ConfigError {
            var: "AWS_REGION",
            value: String::new(),
            problem: "no AWS region is configured".into(),
            fix: "Lambda sets it; when running elsewhere, export AWS_REGION".into(),
        })
        .await);
    };

    let function_name =
        std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "interruption-router".into());
    let router = Router::new(&config, Arc::new(SdkAws::new(sdk)), &region, function_name)
        .with_metrics_level(logging.metrics_level());
    tracing::info!(
        version = crate::VERSION,
        queue_name_template = ?config.queue_names,
        cluster_tag_keys = ?config.tags.cluster_keys,
        managed_tag_key = ?config.tags.managed_key,
        dead_letter_queue = config.dead_letter_queue_url.is_some(),
        served_accounts = ?config.served,
        spoke_role_name = %config.spoke_role_name,
        spoke_role_path = %config.spoke_role_path,
        max_receive_count = ?config.max_receive_count,
        "router ready"
    );
    lambda_runtime::run(service_fn(|event| handle(&router, event))).await
}

/// One invocation as the runtime hands it over, answered by the router.
async fn handle(
    router: &Router<SdkAws>,
    event: LambdaEvent<Box<RawValue>>,
) -> Result<Value, Diagnostic> {
    let invocation = Invocation {
        request_id: &event.context.request_id,
        function_arn: &event.context.invoked_function_arn,
        deadline_ms: event.context.deadline,
    };
    router
        .handle(&event.payload, invocation)
        .await
        .map_err(|error| Diagnostic {
            error_type: error.error_type().into(),
            error_message: error.to_string(),
        })
}

/// Installs the process's `tracing` subscriber (once, at start-up): at the level Lambda's filter
/// keeps when it filters (JSON), else as `RUST_LOG` says, INFO by default.
fn init_logging(settings: &LogSettings) {
    let filter = match settings.lambda_level {
        Some(level) => EnvFilter::builder()
            .with_default_directive(level.tracing_filter().into())
            .parse_lossy(""),
        None => EnvFilter::builder()
            .with_default_directive(LevelFilter::INFO.into())
            .from_env_lossy(),
    };
    // The default timer writes RFC 3339 in UTC with microseconds: what Lambda accepts.
    let builder = tracing_subscriber::fmt()
        .with_target(false)
        .with_env_filter(filter);
    if settings.json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Logs the error and reports it to the Runtime API's `/init/error`, then returns it for `main`.
async fn init_failed(error: ConfigError) -> lambda_runtime::Error {
    tracing::error!(variable = error.var, "{error}");
    let diagnostic = Diagnostic {
        error_type: "Runtime.ConfigError".into(),
        error_message: error.to_string(),
    };
    if std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some() {
        let client = lambda_runtime_api_client::PooledClient::builder().build();
        let request = build_request()
            .method("POST")
            .uri("/2018-06-01/runtime/init/error")
            .header("lambda-runtime-function-error-type", "Runtime.ConfigError")
            .body(Body::from(
                serde_json::to_vec(&diagnostic).unwrap_or_default(),
            ));
        match request {
            Ok(request) => {
                if let Err(e) = client.call(request).await {
                    tracing::error!(error = %e, "could not report the init error to the Runtime API");
                }
            }
            Err(e) => tracing::error!(error = %e, "could not build the init error report"),
        }
    }
    error.into()
}
