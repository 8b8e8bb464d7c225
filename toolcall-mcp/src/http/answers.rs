//! The answers the router writes itself, in place of rmcp's.

use axum::http::StatusCode;
use axum::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use axum::response::{IntoResponse as _, Response};
use serde_json::Value;

use crate::frame::{self, INVALID_PARAMS, INVALID_REQUEST};

/// `429` to an `initialize` over a bound of sessions.
pub(super) fn too_many_sessions(message: &'static str) -> Response {
    let mut response = refuse(StatusCode::TOO_MANY_REQUESTS, message);
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("60"));
    response
}

pub(super) fn refuse(status: StatusCode, message: &'static str) -> Response {
    (
        status,
        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

pub(super) fn too_large(max: usize) -> Response {
    tracing::warn!(limit = max, "refused a request body over the limit");
    let answer = frame::error_line(
        Value::Null,
        INVALID_REQUEST,
        &format!("Invalid request: the body is over the {max} bytes allowed"),
    );
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        [(CONTENT_TYPE, "application/json")],
        answer,
    )
        .into_response()
}

/// A JSON-RPC error the router writes itself: `400` for a body that is
/// not JSON or not a request, `200` for a request whose params are wrong
/// (as rmcp answers those).
pub(super) fn jsonrpc_error_response(answer: Vec<u8>) -> Response {
    let code = serde_json::from_slice::<Value>(&answer)
        .ok()
        .and_then(|value| value.pointer("/error/code").and_then(Value::as_i64));
    let status = match code {
        Some(code) if code == i64::from(INVALID_PARAMS) => StatusCode::OK,
        _ => StatusCode::BAD_REQUEST,
    };
    (status, [(CONTENT_TYPE, "application/json")], answer).into_response()
}
