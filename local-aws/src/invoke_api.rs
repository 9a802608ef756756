//! Lambda's Invoke API in front of a local [`Function`]: the call `routerctl simulate --to
//! <function>` makes, answered the way Lambda answers it, so that path runs end to end without
//! AWS (moto's Invoke needs Docker).
//!
//! `POST /2015-03-31/functions/{name}/invocations`:
//! * `X-Amz-Invocation-Type: Event`: 202 at once; the payload joins a queue that a worker feeds to
//!   the function one invocation at a time, as Lambda's internal queue feeds an execution
//!   environment;
//! * otherwise (`RequestResponse`): runs it and answers the function's response, or 200 with
//!   `X-Amz-Function-Error: Unhandled` and the error;
//! * a name other than the function's: 404 `ResourceNotFoundException`, as Lambda answers.

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Result;

use super::http::LoopbackServer;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode, body::Incoming};
use tokio::sync::{Notify, mpsc};

use super::{function::Function, runtime_api::Invocation};

struct State {
    name: String,
    function: Arc<Function>,
    budget: Duration,
    queue: mpsc::UnboundedSender<Bytes>,
    finished: Mutex<Vec<Invocation>>,
    progressed: Notify,
}

pub struct InvokeApi {
    server: LoopbackServer,
    state: Arc<State>,
    worker: tokio::task::JoinHandle<()>,
}

impl Drop for InvokeApi {
    fn drop(&mut self) {
        self.worker.abort();
    }
}

impl InvokeApi {
    /// Serves `function` under `name` (also matched as the last part of a function ARN), giving
    /// each invocation `budget` before its deadline.
    pub async fn start(function: Arc<Function>, name: &str, budget: Duration) -> Result<Self> {
        let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
        let state = Arc::new(State {
            name: name.to_owned(),
            function,
            budget,
            queue: tx,
            finished: Mutex::new(Vec::new()),
            progressed: Notify::new(),
        });
        let worker_state = state.clone();
        let worker = tokio::spawn(async move {
            while let Some(payload) = rx.recv().await {
                let result = worker_state
                    .function
                    .invoke(payload, worker_state.budget)
                    .await;
                worker_state.finished.lock().unwrap().push(result);
                worker_state.progressed.notify_waiters();
            }
        });
        let handler_state = state.clone();
        let server = LoopbackServer::start(move |req| serve(handler_state.clone(), req)).await?;
        Ok(Self {
            server,
            state,
            worker,
        })
    }

    /// `http://127.0.0.1:<port>`: the endpoint for a Lambda client.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// Waits until `n` invocations (synchronous or asynchronous) have finished, or `limit` passes;
    /// returns how every finished one ended.
    pub async fn wait_finished(&self, n: usize, limit: Duration) -> Vec<Invocation> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.state.progressed.notified();
            let finished = self.state.finished.lock().unwrap().clone();
            if finished.len() >= n || tokio::time::Instant::now() >= deadline {
                return finished;
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }
}

async fn serve(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let asynchronous = req
        .headers()
        .get("x-amz-invocation-type")
        .is_some_and(|v| v == "Event");
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let requested = path
        .strip_prefix("/2015-03-31/functions/")
        .and_then(|rest| rest.strip_suffix("/invocations"))
        .map(|name| {
            percent_encoding::percent_decode_str(name)
                .decode_utf8_lossy()
                .into_owned()
        });
    let Some(requested) = requested else {
        return Ok(error(
            StatusCode::NOT_FOUND,
            "UnknownOperationException",
            &path,
        ));
    };
    // A name, or an ARN (optionally qualified): arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>].
    let name = requested
        .split_once(":function:")
        .map_or(requested.as_str(), |(_, rest)| {
            rest.split(':').next().unwrap_or(rest)
        });
    if name != state.name {
        return Ok(error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("Function not found: {requested}"),
        ));
    }
    if asynchronous {
        let _ = state.queue.send(body);
        return Ok(Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Full::new(Bytes::new()))
            .unwrap());
    }
    let invocation = state.function.invoke(body, state.budget).await;
    state.finished.lock().unwrap().push(invocation.clone());
    state.progressed.notify_waiters();
    let (function_error, body) = match invocation {
        Invocation::Response(body) => (None, body),
        Invocation::Error {
            error_type,
            message,
        } => (
            Some("Unhandled"),
            Bytes::from(
                serde_json::json!({"errorType": error_type, "errorMessage": message}).to_string(),
            ),
        ),
        Invocation::NoAnswer => (
            Some("Unhandled"),
            Bytes::from_static(br#"{"errorMessage":"Task timed out"}"#),
        ),
    };
    let mut response = Response::builder().status(StatusCode::OK);
    if let Some(kind) = function_error {
        response = response.header("X-Amz-Function-Error", kind);
    }
    Ok(response.body(Full::new(body)).unwrap())
}

/// A Lambda error answer: the type in `x-amzn-ErrorType`, the message in the body.
fn error(status: StatusCode, error_type: &str, message: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("x-amzn-ErrorType", error_type)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            serde_json::json!({"Type": "User", "message": message}).to_string(),
        )))
        .unwrap()
}
