//! One mapping from the AWS SDK's errors to [`CallError`], the router's vocabulary for a call that
//! did not answer as asked, so the router's adapter (`router/src/aws/sdk.rs`) and routerctl's
//! (`routerctl/src/cloud/sdk/`) name every failure alike:
//!
//! | the SDK's error | `code` | `message` |
//! |---|---|---|
//! | an AWS answer (`ServiceError`) | AWS's code (`Unknown` if it gave none) | AWS's message |
//! | no answer within the attempt timeout (`TimeoutError`, a dispatch that timed out) | [`CallError::TIMEOUT`] | the SDK's text |
//! | the request never reached AWS, or the connection broke | [`CallError::DISPATCH`] | the SDK's text |
//! | an answer that could not be read | [`CallError::RESPONSE`] | the SDK's text |
//!
//! A missing resource's other spellings become the one code [`missing`] names: SQS's query
//! protocol answers every operation on a missing queue `AWS.SimpleQueueService.NonExistentQueue`,
//! its JSON protocol `QueueDoesNotExist`.

use std::{error::Error, fmt};

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::{display::DisplayErrorContext, metadata::ProvideErrorMetadata};
pub use router_core::aws::{CallError, missing};

/// The error of one attempt, as AWS coded it, or the transport failure that left no answer.
pub fn call_error<E, R>(error: SdkError<E, R>) -> CallError
where
    E: ProvideErrorMetadata + Error + 'static,
    R: fmt::Debug,
{
    let text = DisplayErrorContext(&error).to_string();
    let code = match &error {
        SdkError::TimeoutError(_) => CallError::TIMEOUT.to_owned(),
        SdkError::DispatchFailure(failure) if failure.is_timeout() => CallError::TIMEOUT.to_owned(),
        SdkError::DispatchFailure(_) => CallError::DISPATCH.to_owned(),
        SdkError::ResponseError(_) => CallError::RESPONSE.to_owned(),
        // An AWS answer (ServiceError): AWS's code, as the error's metadata carries it.
        _ => error.code().unwrap_or("Unknown").to_owned(),
    };
    let message = error.message().map_or(text, str::to_owned);
    let mut answer = CallError { code, message };
    if answer.is_missing_queue() {
        answer.code = missing::QUEUE.to_owned();
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::{
        client::{orchestrator::HttpResponse, result::ConnectorError},
        http::StatusCode,
    };
    use aws_smithy_types::{body::SdkBody, error::ErrorMetadata};

    /// An operation's error as the SDK builds it: AWS's code and message.
    #[derive(Debug)]
    struct Coded(ErrorMetadata);

    impl fmt::Display for Coded {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{:?}", self.0.code())
        }
    }
    impl Error for Coded {}
    impl ProvideErrorMetadata for Coded {
        fn meta(&self) -> &ErrorMetadata {
            &self.0
        }
    }

    fn answered(code: &str, message: &str) -> SdkError<Coded, HttpResponse> {
        let meta = ErrorMetadata::builder().code(code).message(message).build();
        SdkError::service_error(
            Coded(meta),
            HttpResponse::new(StatusCode::try_from(400).unwrap(), SdkBody::empty()),
        )
    }

    #[test]
    fn an_answer_keeps_aws_code_and_message() {
        let e = call_error(answered("ThrottlingException", "Rate exceeded"));
        assert_eq!(e, CallError::new("ThrottlingException", "Rate exceeded"));
    }

    #[test]
    fn a_missing_queue_has_one_code_whatever_the_protocol() {
        for spelling in ["AWS.SimpleQueueService.NonExistentQueue", missing::QUEUE] {
            let e = call_error(answered(spelling, "The specified queue does not exist."));
            assert_eq!(e.code, missing::QUEUE, "{spelling}");
        }
    }

    #[test]
    fn no_answer_is_a_timeout_a_dispatch_failure_or_an_unreadable_response() {
        let timeout: SdkError<Coded, HttpResponse> =
            SdkError::timeout_error("no answer within the attempt timeout");
        assert_eq!(call_error(timeout).code, CallError::TIMEOUT);
        let timed_out: SdkError<Coded, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::timeout("read timed out".into()));
        assert_eq!(call_error(timed_out).code, CallError::TIMEOUT);
        let reset: SdkError<Coded, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::io("connection reset".into()));
        let reset = call_error(reset);
        assert_eq!(reset.code, CallError::DISPATCH);
        assert!(
            reset.message.contains("connection reset"),
            "{}",
            reset.message
        );
        let unreadable: SdkError<Coded, HttpResponse> = SdkError::response_error(
            "not XML",
            HttpResponse::new(StatusCode::try_from(200).unwrap(), SdkBody::empty()),
        );
        assert_eq!(call_error(unreadable).code, CallError::RESPONSE);
    }
}
