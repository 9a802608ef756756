//! An HTTP proxy in front of the emulator that counts AWS API calls and can make them fail.
//!
//! The router is pointed at the proxy (`AWS_ENDPOINT_URL`), the proxy forwards to moto. It:
//!
//! * counts calls per API action (`DescribeInstances`, `SendMessageBatch`, …), which is how the
//!   demo and the benchmarks report AWS calls per event, measured from outside the router; and
//!   keeps a log of who made each call (the SigV4 credential's key and region), which is how a
//!   test tells which principal the router used where;
//! * injects faults at a configurable rate per action ([`FaultPlan`]): 500/503 and throttling
//!   errors in each protocol's real error shape (EC2's XML query errors, SQS's JSON errors),
//!   connection resets, slow responses that arrive after the SDK's attempt timeout (the work is
//!   done upstream first, so the retry produces a real duplicate), and SendMessageBatch answers
//!   that report some entries failed (those entries are withheld from the emulator, as SQS would);
//! * records every call the emulator itself answered late ([`LATE_ANSWER`] or more, faults aside),
//!   so a verdict can tell a delay the emulator caused under load from one a fault plan caused;
//! * plays outages: every call of an action fails for its next `n` calls, or for a window of time
//!   (optionally only calls whose request names something, e.g. one cluster's queue or one
//!   account's role).
//!
//! Decisions come from a seeded generator, so a scenario is repeatable.

mod faults;
mod plan;
#[cfg(test)]
mod tests;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Result;

use super::http::LoopbackServer;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode, body::Incoming, header};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};

use self::faults::{
    add_failed_entries, error_response, has_entries, next_f64, next_u64, withhold_entries,
};
pub use self::plan::{Fault, FaultPlan, Window};
#[derive(Default)]
struct Counters {
    calls: BTreeMap<String, u64>,
    faults: BTreeMap<String, u64>,
    /// Calls answered with upstream's response (a slow one once its delay is over).
    answered: BTreeMap<String, u64>,
    log: Vec<Call>,
    late: Vec<LateAnswer>,
}

/// How long the emulator may take to answer before the call is recorded as late: a third of the
/// router's 3-s attempt timeout, so every call the router gave up on is among them.
pub const LATE_ANSWER: Duration = Duration::from_secs(1);

/// A call the emulator answered [`LATE_ANSWER`] or more after the proxy received it (an injected
/// [`Fault::Slow`] delay not counted: that one is the plan's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateAnswer {
    pub action: String,
    /// Path, query and body, as text, whole (what it names: a queue, instance ids).
    pub request: String,
    pub took: Duration,
}

/// One call the proxy saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub action: String,
    /// The access key id of the SigV4 credential that signed it.
    pub access_key: String,
    /// The region of its SigV4 scope.
    pub region: String,
    /// Path, query and body, as text (at most [`LOGGED_REQUEST_BYTES`]).
    pub request: String,
}

/// How much of each request the log keeps.
pub const LOGGED_REQUEST_BYTES: usize = 2048;

struct State {
    upstream: String,
    client: Client<HttpConnector, Full<Bytes>>,
    counters: Mutex<Counters>,
    plan: Mutex<Plan>,
}

/// The plan in force, its generator state, and when it was set.
struct Plan {
    plan: FaultPlan,
    rng: u64,
    since: Instant,
}

pub struct AwsProxy {
    server: LoopbackServer,
    state: Arc<State>,
}

impl AwsProxy {
    /// Starts a proxy to `upstream` (e.g. `http://127.0.0.1:5000`).
    pub async fn start(upstream: &str) -> Result<Self> {
        let state = Arc::new(State {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
            counters: Mutex::default(),
            plan: Mutex::new(Plan {
                plan: FaultPlan::none(),
                rng: 1,
                since: Instant::now(),
            }),
        });
        let handler_state = state.clone();
        let server = LoopbackServer::start(move |req| handle(handler_state.clone(), req)).await?;
        Ok(Self { server, state })
    }

    /// `http://127.0.0.1:<port>`, the value for `AWS_ENDPOINT_URL`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    pub fn set_plan(&self, plan: FaultPlan) {
        let rng = plan.seed.max(1);
        *self.state.plan.lock().unwrap() = Plan {
            plan,
            rng,
            since: Instant::now(),
        };
    }

    /// Calls seen per action (failed ones included).
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.state.counters.lock().unwrap().calls.clone()
    }

    /// Per action, the calls answered with upstream's response so far: a call held by a
    /// [`Fault::Slow`] is counted in [`calls`](Self::calls) at once and here only once its answer
    /// goes out (never, if the client gave up first); an injected error is not counted here.
    pub fn answered(&self) -> BTreeMap<String, u64> {
        self.state.counters.lock().unwrap().answered.clone()
    }

    /// Every call seen, in order.
    pub fn log(&self) -> Vec<Call> {
        self.state.counters.lock().unwrap().log.clone()
    }

    /// Every call the emulator answered late, in the order the answers came.
    pub fn late_answers(&self) -> Vec<LateAnswer> {
        self.state.counters.lock().unwrap().late.clone()
    }

    /// Faults injected per action.
    pub fn faults(&self) -> BTreeMap<String, u64> {
        self.state.counters.lock().unwrap().faults.clone()
    }

    /// Forgets the counts and the log.
    pub fn reset_counts(&self) {
        *self.state.counters.lock().unwrap() = Counters::default();
    }
}

#[derive(Debug)]
struct Reset;

impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("injected connection reset")
    }
}

impl std::error::Error for Reset {}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Reset> {
    let received = Instant::now();
    let (mut parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let json_protocol = parts.headers.contains_key("x-amz-target");
    let service = service_of(&parts.headers);
    let action = action_of(&parts.headers, parts.uri.query(), &body);

    let fault = {
        let mut guard = state.plan.lock().unwrap();
        let Plan { plan, rng, since } = &mut *guard;
        let windowed = (!plan.windows.is_empty())
            .then(|| {
                let request = format!(
                    "{} {}",
                    parts.uri.path_and_query().map_or("", |p| p.as_str()),
                    String::from_utf8_lossy(&body)
                );
                let elapsed = since.elapsed();
                plan.windows
                    .iter()
                    .find(|w| w.applies(&action, elapsed, &request))
                    .map(|w| w.fault)
            })
            .flatten();
        if windowed.is_some() {
            windowed
        } else if let Some((left @ 1.., fault)) = plan.outages.get_mut(&action) {
            *left -= 1;
            Some(*fault)
        } else {
            let rate = plan.rate_for(&action);
            let applicable: Vec<Fault> = plan
                .faults
                .iter()
                .copied()
                .filter(|f| *f != Fault::PartialBatch || action == "SendMessageBatch")
                // A denial is a configuration error, never a random fault of a storm.
                .filter(|f| *f != Fault::Denied)
                .collect();
            if rate > 0.0 && !applicable.is_empty() && next_f64(rng) < rate {
                Some(applicable[(next_u64(rng) % applicable.len() as u64) as usize])
            } else {
                None
            }
        }
    };
    {
        let mut counters = state.counters.lock().unwrap();
        *counters.calls.entry(action.clone()).or_default() += 1;
        let (access_key, region) = credential_of(&parts.headers);
        let mut request = format!(
            "{} {}",
            parts.uri.path_and_query().map_or("", |p| p.as_str()),
            String::from_utf8_lossy(&body)
        );
        if request.len() > LOGGED_REQUEST_BYTES {
            let mut end = LOGGED_REQUEST_BYTES;
            while !request.is_char_boundary(end) {
                end -= 1;
            }
            request.truncate(end);
        }
        counters.log.push(Call {
            action: action.clone(),
            access_key,
            region,
            request,
        });
        if fault.is_some() {
            *counters.faults.entry(action.clone()).or_default() += 1;
        }
    }

    let error = |status: StatusCode, code: &str, message: &str| {
        Ok(error_response(
            json_protocol,
            &service,
            status,
            code,
            message,
        ))
    };
    match fault {
        Some(Fault::Unavailable) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "injected: unavailable",
            );
        }
        Some(Fault::InternalError) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "injected: internal error",
            );
        }
        Some(Fault::Throttled) if json_protocol => {
            return error(
                StatusCode::BAD_REQUEST,
                "RequestThrottled",
                "injected: rate exceeded",
            );
        }
        Some(Fault::Throttled) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "RequestLimitExceeded",
                "injected: request limit exceeded",
            );
        }
        Some(Fault::Denied) if json_protocol => {
            return error(
                StatusCode::BAD_REQUEST,
                "AccessDenied",
                "injected: Access to the resource is denied.",
            );
        }
        Some(Fault::Denied) if service == "ec2" => {
            return error(
                StatusCode::FORBIDDEN,
                "UnauthorizedOperation",
                "injected: You are not authorized to perform this operation.",
            );
        }
        Some(Fault::Denied) => {
            return error(
                StatusCode::FORBIDDEN,
                "AccessDenied",
                "injected: not authorized to perform this action",
            );
        }
        Some(Fault::Reset) => return Err(Reset),
        _ => {}
    }

    let mut withheld = Vec::new();
    let mut body = body;
    if fault == Some(Fault::PartialBatch) {
        let mut guard = state.plan.lock().unwrap();
        (body, withheld) = withhold_entries(&body, &mut guard.rng);
    }

    let response = if withheld.is_empty() || has_entries(&body) {
        parts.uri = format!(
            "{}{}",
            state.upstream,
            parts.uri.path_and_query().map_or("/", |p| p.as_str())
        )
        .parse()
        .expect("upstream URI");
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.remove(header::HOST);
        let request = format!(
            "{} {}",
            parts.uri.path_and_query().map_or("", |p| p.as_str()),
            String::from_utf8_lossy(&body)
        );
        let upstream = Request::from_parts(parts, Full::new(body));
        match state.client.request(upstream).await {
            Ok(response) => {
                let (parts, body) = response.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let took = received.elapsed();
                if took >= LATE_ANSWER {
                    state.counters.lock().unwrap().late.push(LateAnswer {
                        action: action.clone(),
                        request,
                        took,
                    });
                }
                Some((parts, body))
            }
            Err(e) => {
                return error(
                    StatusCode::BAD_GATEWAY,
                    "BadGateway",
                    &format!("proxy: upstream unreachable: {e}"),
                );
            }
        }
    } else {
        None
    };

    if let Some(Fault::Slow(delay)) = fault {
        tokio::time::sleep(delay).await;
    }
    *state
        .counters
        .lock()
        .unwrap()
        .answered
        .entry(action.clone())
        .or_default() += 1;

    let (mut parts, mut body) = match response {
        Some(r) => r,
        None => {
            let response = Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/x-amz-json-1.0")
                .body(())
                .unwrap();
            (
                response.into_parts().0,
                Bytes::from_static(b"{\"Successful\":[],\"Failed\":[]}"),
            )
        }
    };
    if !withheld.is_empty() && parts.status == StatusCode::OK {
        body = add_failed_entries(&body, &withheld);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::TRANSFER_ENCODING);
    Ok(Response::from_parts(parts, Full::new(body)))
}

/// The API action of a request: `X-Amz-Target` for JSON protocols, `Action=` for query protocols,
/// else the method and first path segment (REST protocols such as Lambda's).
fn action_of(headers: &hyper::HeaderMap, query: Option<&str>, body: &[u8]) -> String {
    if let Some(target) = headers.get("x-amz-target").and_then(|v| v.to_str().ok()) {
        return target.rsplit('.').next().unwrap_or(target).to_owned();
    }
    let form = |s: &str| {
        s.split('&')
            .find_map(|kv| kv.strip_prefix("Action="))
            .map(str::to_owned)
    };
    if let Some(action) = query.and_then(form) {
        return action;
    }
    if let Some(action) = std::str::from_utf8(body).ok().and_then(form) {
        return action;
    }
    "other".to_owned()
}

/// The access key id and region of a request's SigV4 credential
/// (`Credential=<key>/<date>/<region>/<service>/aws4_request`).
fn credential_of(headers: &hyper::HeaderMap) -> (String, String) {
    let credential = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|auth| auth.split("Credential=").nth(1))
        .unwrap_or_default();
    let mut parts = credential.split('/');
    let key = parts.next().unwrap_or_default().to_owned();
    let region = parts.nth(1).unwrap_or_default().to_owned();
    (key, region)
}

/// The signing name of a request's service (`ec2`, `sts`, `sqs`, …), from its SigV4 scope.
fn service_of(headers: &hyper::HeaderMap) -> String {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|auth| auth.split("Credential=").nth(1))
        .and_then(|credential| credential.split('/').nth(3))
        .unwrap_or_default()
        .to_owned()
}
