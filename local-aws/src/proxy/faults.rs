//! A fault as AWS would answer it: each protocol's real error shape (EC2's XML query errors, SQS's
//! JSON errors), and SendMessageBatch answers that report some entries failed.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode, header};
use serde_json::{Value, json};

pub(super) fn error_response(
    json_protocol: bool,
    service: &str,
    status: StatusCode,
    code: &str,
    message: &str,
) -> Response<Full<Bytes>> {
    let builder = Response::builder().status(status);
    if json_protocol {
        builder
            .header(header::CONTENT_TYPE, "application/x-amz-json-1.0")
            // SQS is awsQueryCompatible: the SDK reads the query-style code from this header.
            .header(
                "x-amzn-query-error",
                format!(
                    "{code};{}",
                    if status.is_server_error() {
                        "Receiver"
                    } else {
                        "Sender"
                    }
                ),
            )
            .body(Full::new(Bytes::from(
                json!({"__type": format!("com.amazonaws.sqs#{code}"), "message": message})
                    .to_string(),
            )))
            .unwrap()
    } else if service != "ec2" {
        // The awsQuery shape (STS, …); EC2 has its own.
        let kind = if status.is_server_error() {
            "Receiver"
        } else {
            "Sender"
        };
        let xml = format!(
            "<ErrorResponse><Error><Type>{kind}</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>"
        );
        builder
            .header(header::CONTENT_TYPE, "text/xml")
            .body(Full::new(Bytes::from(xml)))
            .unwrap()
    } else {
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
        );
        builder
            .header(header::CONTENT_TYPE, "text/xml")
            .body(Full::new(Bytes::from(xml)))
            .unwrap()
    }
}

/// Takes a random non-empty subset of a SendMessageBatch's entries out of the request.
pub(super) fn withhold_entries(body: &Bytes, rng: &mut u64) -> (Bytes, Vec<String>) {
    let Ok(mut request) = serde_json::from_slice::<Value>(body) else {
        return (body.clone(), Vec::new());
    };
    let Some(entries) = request.get_mut("Entries").and_then(Value::as_array_mut) else {
        return (body.clone(), Vec::new());
    };
    if entries.is_empty() {
        return (body.clone(), Vec::new());
    }
    let forced = (next_u64(rng) % entries.len() as u64) as usize;
    let mut kept = Vec::new();
    let mut withheld = Vec::new();
    for (i, entry) in entries.drain(..).enumerate() {
        if i == forced || next_f64(rng) < 0.3 {
            withheld.push(
                entry
                    .get("Id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            );
        } else {
            kept.push(entry);
        }
    }
    *entries = kept;
    (Bytes::from(request.to_string()), withheld)
}

pub(super) fn has_entries(body: &Bytes) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("Entries")
                .and_then(Value::as_array)
                .map(|e| !e.is_empty())
        })
        .unwrap_or(true)
}

pub(super) fn add_failed_entries(body: &Bytes, ids: &[String]) -> Bytes {
    let Ok(mut response) = serde_json::from_slice::<Value>(body) else {
        return body.clone();
    };
    let failed: Vec<Value> = ids
        .iter()
        .map(|id| json!({"Id": id, "SenderFault": false, "Code": "InternalError", "Message": "injected: entry failed"}))
        .collect();
    match response.get_mut("Failed").and_then(Value::as_array_mut) {
        Some(list) => list.extend(failed),
        None => response["Failed"] = Value::Array(failed),
    }
    Bytes::from(response.to_string())
}

pub(super) fn next_u64(state: &mut u64) -> u64 {
    // xorshift64*: small, seeded, good enough to spread faults.
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

pub(super) fn next_f64(state: &mut u64) -> f64 {
    (next_u64(state) >> 11) as f64 / (1u64 << 53) as f64
}
