//! A Lambda Runtime API on a loopback port: the real protocol a custom runtime speaks to Lambda,
//! so the unmodified router binary runs here exactly as it does in AWS.
//!
//! The four runtime endpoints (`/2018-06-01/runtime/invocation/next`, `…/{id}/response`,
//! `…/{id}/error`, `/2018-06-01/runtime/init/error`) are served over HTTP/1.1; [`RuntimeApi::invoke`]
//! plays the Lambda service: it queues a payload with a deadline, and waits for the function's
//! response or error. The emulator also records when the function first asked for work, which is
//! how the benchmarks measure cold start.

use std::{
    collections::{HashMap, VecDeque},
    convert::Infallible,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::Result;

use super::http::LoopbackServer;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, Response, StatusCode, body::Incoming};
use tokio::sync::{Notify, oneshot};

/// How an invocation ended, as the Lambda service sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// The function's response body.
    Response(Bytes),
    /// The function reported an error (`errorType`, `errorMessage`).
    Error { error_type: String, message: String },
    /// Nothing came back before the wait ran out (timeout, or the process died).
    NoAnswer,
}

impl Invocation {
    /// The response parsed as JSON, if it was a response.
    pub fn json(&self) -> Option<serde_json::Value> {
        match self {
            Invocation::Response(body) => serde_json::from_slice(body).ok(),
            _ => None,
        }
    }
}

struct Queued {
    id: String,
    payload: Bytes,
    deadline_ms: u64,
}

/// The function ARN the runtime passes unless told otherwise.
pub const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:interruption-router";

#[derive(Default)]
struct State {
    queue: Mutex<VecDeque<Queued>>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Invocation>>>,
    init_error: Mutex<Option<String>>,
    first_poll: Mutex<Option<Instant>>,
    /// `Lambda-Runtime-Invoked-Function-Arn` of every invocation.
    function_arn: Mutex<String>,
    arrived: Notify,
    next_id: AtomicU64,
}

pub struct RuntimeApi {
    server: LoopbackServer,
    state: Arc<State>,
}

impl RuntimeApi {
    pub async fn start() -> Result<Self> {
        let state = Arc::new(State::default());
        *state.function_arn.lock().unwrap() = FUNCTION_ARN.to_owned();
        let handler_state = state.clone();
        let server = LoopbackServer::start(move |req| serve(handler_state.clone(), req)).await?;
        Ok(Self { server, state })
    }

    /// The value for `AWS_LAMBDA_RUNTIME_API`: `host:port`, without a scheme, as real Lambda sets it.
    pub fn endpoint(&self) -> String {
        self.server.addr().to_string()
    }

    /// Invokes the function with `payload`, giving it `budget` until its deadline, and waits up to
    /// `budget` plus a grace period for the answer.
    pub async fn invoke(&self, payload: impl Into<Bytes>, budget: Duration) -> Invocation {
        let id = format!("req-{}", self.state.next_id.fetch_add(1, Ordering::Relaxed));
        let deadline_ms = (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            + budget)
            .as_millis() as u64;
        let (tx, rx) = oneshot::channel();
        self.state.waiting.lock().unwrap().insert(id.clone(), tx);
        self.state.queue.lock().unwrap().push_back(Queued {
            id: id.clone(),
            payload: payload.into(),
            deadline_ms,
        });
        self.state.arrived.notify_one();
        match tokio::time::timeout(budget + Duration::from_secs(5), rx).await {
            Ok(Ok(invocation)) => invocation,
            _ => {
                self.state.waiting.lock().unwrap().remove(&id);
                Invocation::NoAnswer
            }
        }
    }

    /// The invoked function ARN passed with the next invocations.
    pub fn set_function_arn(&self, arn: &str) {
        *self.state.function_arn.lock().unwrap() = arn.to_owned();
    }

    /// The init error the function reported, if any.
    pub fn init_error(&self) -> Option<String> {
        self.state.init_error.lock().unwrap().clone()
    }

    /// When the function first polled for an invocation (it had finished initialising).
    pub fn first_poll(&self) -> Option<Instant> {
        *self.state.first_poll.lock().unwrap()
    }

    /// Waits until the function polls for the first time, or `limit` passes.
    pub async fn wait_first_poll(&self, limit: Duration) -> Option<Instant> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(at) = self.first_poll() {
                return Some(at);
            }
            if self.init_error().is_some() {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        None
    }
}

async fn serve(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let rest = path
        .strip_prefix("/2018-06-01/runtime/")
        .unwrap_or_default();
    let response = match (method, rest.split('/').collect::<Vec<_>>().as_slice()) {
        (Method::GET, ["invocation", "next"]) => return Ok(next(&state).await),
        (Method::POST, ["invocation", id, "response"]) => {
            finish(&state, id, Invocation::Response(body))
        }
        (Method::POST, ["invocation", id, "error"]) => {
            let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let text = |k: &str| {
                value
                    .get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned()
            };
            finish(
                &state,
                id,
                Invocation::Error {
                    error_type: text("errorType"),
                    message: text("errorMessage"),
                },
            )
        }
        (Method::POST, ["init", "error"]) => {
            *state.init_error.lock().unwrap() = Some(String::from_utf8_lossy(&body).into_owned());
            StatusCode::ACCEPTED
        }
        _ => StatusCode::NOT_FOUND,
    };
    Ok(Response::builder()
        .status(response)
        .body(Full::new(Bytes::new()))
        .unwrap())
}

async fn next(state: &State) -> Response<Full<Bytes>> {
    state
        .first_poll
        .lock()
        .unwrap()
        .get_or_insert_with(Instant::now);
    let queued = loop {
        // Register interest before checking, so a notify between the check and the wait is not lost.
        let arrived = state.arrived.notified();
        if let Some(q) = state.queue.lock().unwrap().pop_front() {
            break q;
        }
        arrived.await;
    };
    Response::builder()
        .status(StatusCode::OK)
        .header("Lambda-Runtime-Aws-Request-Id", &queued.id)
        .header("Lambda-Runtime-Deadline-Ms", queued.deadline_ms.to_string())
        .header(
            "Lambda-Runtime-Invoked-Function-Arn",
            state.function_arn.lock().unwrap().clone(),
        )
        .header(
            "Lambda-Runtime-Trace-Id",
            format!("Root=1-00000000-{:024x};Sampled=0", queued.deadline_ms),
        )
        .header("Content-Type", "application/json")
        .body(Full::new(queued.payload))
        .unwrap()
}

fn finish(state: &State, id: &str, invocation: Invocation) -> StatusCode {
    match state.waiting.lock().unwrap().remove(id) {
        Some(tx) => {
            let _ = tx.send(invocation);
            StatusCode::ACCEPTED
        }
        None => StatusCode::BAD_REQUEST,
    }
}
