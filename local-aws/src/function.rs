//! The router binary running as a Lambda function: a child process wired to its own
//! [`RuntimeApi`], with a hermetic environment (only what Lambda would set, plus what the caller
//! passes) and its output kept, so callers can read its JSON logs and EMF metric documents.
//!
//! As in Lambda with `LogFormat: JSON`, the function gets `AWS_LAMBDA_LOG_FORMAT=JSON` and
//! `AWS_LAMBDA_LOG_LEVEL` (INFO unless the caller passes another), and what it prints goes through
//! Lambda's log-level filter ([`super::lambda_logs`]): [`Function::stdout_lines`] is what
//! CloudWatch Logs would receive.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use router_core::logging::Level;

use super::{
    lambda_logs,
    runtime_api::{Invocation, RuntimeApi},
};

pub const FUNCTION_NAME: &str = "interruption-router";

pub struct Function {
    child: Child,
    api: RuntimeApi,
    stdout: Arc<Mutex<Output>>,
    stderr: Arc<Mutex<Output>>,
    spawned_at: Instant,
}

/// What a stream printed, and the part Lambda's log filter keeps.
#[derive(Default)]
struct Output {
    printed: Vec<String>,
    kept: Vec<String>,
}

impl Function {
    /// Starts `binary` against a fresh Runtime API with `env` on top of Lambda's own variables.
    pub async fn start(binary: &Path, env: &[(String, String)]) -> Result<Self> {
        let api = RuntimeApi::start().await?;
        let lambda_env = [
            ("AWS_LAMBDA_RUNTIME_API", api.endpoint()),
            ("AWS_LAMBDA_FUNCTION_NAME", FUNCTION_NAME.to_owned()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128".to_owned()),
            ("AWS_LAMBDA_LOG_FORMAT", "JSON".to_owned()),
            ("AWS_LAMBDA_LOG_LEVEL", "INFO".to_owned()),
        ];
        let log_level = env
            .iter()
            .rev()
            .find(|(k, _)| k == "AWS_LAMBDA_LOG_LEVEL")
            .and_then(|(_, v)| Level::parse(v))
            .unwrap_or(Level::Info);
        let spawned_at = Instant::now();
        let mut child = Command::new(binary)
            .env_clear()
            .envs(lambda_env)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| {
                format!(
                    "starting {} (build it with `cargo build -p interruption-router`)",
                    binary.display()
                )
            })?;
        let stdout = collect(child.stdout.take(), log_level);
        let stderr = collect(child.stderr.take(), log_level);
        Ok(Self {
            child,
            api,
            stdout,
            stderr,
            spawned_at,
        })
    }

    /// Starts the function and waits until it polls for work; fails with its init error if it
    /// reported one, or with its output if it exited.
    pub async fn start_ready(binary: &Path, env: &[(String, String)]) -> Result<Self> {
        let mut function = Self::start(binary, env).await?;
        if function
            .api
            .wait_first_poll(Duration::from_secs(30))
            .await
            .is_none()
        {
            let status = tokio::time::timeout(Duration::from_secs(2), function.child.wait()).await;
            bail!(
                "the function did not start (init error: {:?}, exit: {status:?})\nstdout:\n{}\nstderr:\n{}",
                function.api.init_error(),
                function.printed_lines().join("\n"),
                function.stderr.lock().unwrap().printed.join("\n")
            );
        }
        Ok(function)
    }

    pub async fn invoke(&self, payload: impl Into<Bytes>, budget: Duration) -> Invocation {
        self.api.invoke(payload, budget).await
    }

    pub fn api(&self) -> &RuntimeApi {
        &self.api
    }

    /// Time from spawning the process to its first poll of the Runtime API.
    pub fn init_duration(&self) -> Option<Duration> {
        self.api
            .first_poll()
            .map(|at| at.duration_since(self.spawned_at))
    }

    /// What Lambda would send to CloudWatch Logs from stdout: the lines its log filter keeps.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().kept.clone()
    }

    /// Everything the process printed to stdout, before Lambda's filter.
    pub fn printed_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().printed.clone()
    }

    /// The EMF documents printed so far, one per finished invocation.
    pub fn emf_documents(&self) -> Vec<Value> {
        self.json_lines()
            .into_iter()
            .filter(|v| v.get("_aws").is_some())
            .collect()
    }

    /// The EMF documents once there are at least `n` (the process prints them before it answers,
    /// but its stdout is read here a moment later), or those there are after `limit`.
    pub async fn emf_documents_at_least(&self, n: usize, limit: Duration) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let documents = self.emf_documents();
            if documents.len() >= n || tokio::time::Instant::now() >= deadline {
                return documents;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The structured log lines (JSON, not EMF, not interruption records) printed so far.
    pub fn log_records(&self) -> Vec<Value> {
        self.json_lines()
            .into_iter()
            .filter(|v| v.get("_aws").is_none() && v.get("record").is_none())
            .collect()
    }

    /// The interruption records printed so far (`record`: `interruption`), data the router
    /// prints beside its EMF documents.
    pub fn interruption_records(&self) -> Vec<Value> {
        self.json_lines()
            .into_iter()
            .filter(|v| v["record"] == "interruption")
            .collect()
    }

    fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lock()
            .unwrap()
            .kept
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Peak resident memory of the process so far (Linux `VmHWM`), in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let pid = self.child.id()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }

    /// Waits for the process to exit (e.g. after an init error).
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()?
            .ok()
    }
}

fn collect(
    stream: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>,
    log_level: Level,
) -> Arc<Mutex<Output>> {
    let output = Arc::new(Mutex::new(Output::default()));
    if let Some(stream) = stream {
        let sink = output.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stream).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let mut sink = sink.lock().unwrap();
                if lambda_logs::kept(&line, log_level) {
                    sink.kept.push(line.clone());
                }
                sink.printed.push(line);
            }
        });
    }
    output
}

/// Where the router binary is: `$ROUTER_BIN`, or next to the running executable in the same
/// cargo target directory (`target/<profile>/interruption-router`), which is where
/// `cargo build -p interruption-router` puts it.
pub fn router_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("ROUTER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join("interruption-router");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "interruption-router binary not found next to {}; build it with `cargo build -p interruption-router` \
         (same profile) or set ROUTER_BIN",
        exe.display()
    )
}
