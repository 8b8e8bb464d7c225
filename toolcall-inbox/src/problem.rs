//! The inbox's answers to programs: JSON bodies and refusals with a stable
//! code ([`Problem`]), and the one reader of every JSON body it takes
//! ([`json_fields`]), shared by the decision endpoint and the operators'.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use toolcall_core::store::StoreError;

use crate::body::{self, MAX_DEPTH, Unread};
use crate::security::{RequestRefusal, Via, Who, same_origin_form};
use crate::{App, MAX_BODY};

/// `value` as the answer, with `status`.
pub(crate) fn json(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// Why nothing was done, in JSON: `{"code": ..., "error": ...}`, the code
/// stable for a program, the error in words for a person, and the fields
/// that say more (`field`, `problems`, `refusal`, `decision`, `answers`,
/// `retry_after`).
pub(crate) struct Problem {
    status: StatusCode,
    body: Map<String, Value>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, code: &str, error: impl Into<String>) -> Problem {
        let mut body = Map::new();
        body.insert("code".into(), code.into());
        body.insert("error".into(), error.into().into());
        Problem {
            status,
            body,
            headers: Vec::new(),
        }
    }

    /// Says more in the field `name`.
    pub(crate) fn with(mut self, name: &str, value: impl Into<Value>) -> Problem {
        self.body.insert(name.into(), value.into());
        self
    }

    /// Adds a header to the answer.
    fn header(mut self, name: HeaderName, value: HeaderValue) -> Problem {
        self.headers.push((name, value));
        self
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = json(self.status, &Value::Object(self.body));
        let headers = response.headers_mut();
        for (name, value) in self.headers {
            headers.insert(name, value);
        }
        response
    }
}

/// A request refused before it is served (no sign-in, a wrong token, too
/// many wrong ones, no CSRF token), with the headers the page's refusal
/// has.
impl From<RequestRefusal> for Problem {
    fn from(refusal: RequestRefusal) -> Problem {
        let code = match &refusal {
            RequestRefusal::Unauthorized { .. } => "unauthorized",
            RequestRefusal::Forbidden => "forbidden",
            RequestRefusal::NotAdmin => "admin_only",
            RequestRefusal::TooManyAttempts { .. } => "too_many_attempts",
            RequestRefusal::NoRandomness(_) => "unavailable",
            RequestRefusal::Twice(_) => "duplicate_member",
        };
        let mut problem = Problem::new(refusal.status(), code, refusal.to_string());
        if let RequestRefusal::Twice(name) = &refusal {
            problem = problem.with("field", name.as_str());
        }
        if let RequestRefusal::TooManyAttempts { retry_after } = refusal {
            problem = problem.with("retry_after", retry_after);
        }
        for (name, value) in &refusal.headers() {
            problem = problem.header(name.clone(), value.clone());
        }
        problem
    }
}

pub(crate) fn store_unavailable(error: &StoreError) -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        format!("The store cannot be reached ({error}): nothing was done; try again."),
    )
}

/// The person a program's request comes from, as [`Who`]; refused in JSON.
pub(crate) struct ApiWho(pub(crate) Who);

impl<B: Send + Sync + 'static> FromRequestParts<Arc<App<B>>> for ApiWho {
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App<B>>,
    ) -> Result<Self, Self::Rejection> {
        Ok(ApiWho(Who::from_request_parts(parts, app).await?))
    }
}

/// What a JSON endpoint takes, in the words of its refusals.
pub(crate) struct Posting {
    /// What the body is: `A decision`.
    pub(crate) what: &'static str,
    /// A body that would do: `{"decision": "approve"}`.
    pub(crate) example: &'static str,
    /// What a refusal leaves undone: `Nothing was decided.`
    pub(crate) nothing: &'static str,
    /// The members it may have (`csrf` among them: a browser's request
    /// carries it).
    pub(crate) members: &'static [&'static str],
}

/// The fields of a JSON object `who` posted, read by the one reader of
/// the inbox's bodies ([`body::object`]) and checked in this order: the
/// body says it is JSON (415), is within the bound (413), is one object
/// (400 `invalid_json`) nested at most [`MAX_DEPTH`] levels (400
/// `too_deep`) that names no member twice at any depth (400
/// `duplicate_member`); `csrf`, when given, is a string (400); from a
/// browser (the sign-in cookie), it carries its sign-in's CSRF token as
/// `csrf` and passes the form's `Origin` and `Sec-Fetch-Site` checks
/// (403), as its form would; and it has no member `posting` does not take
/// (400 naming it, with the members `allowed`). Who asks is checked
/// before, by the caller; what each member says, after.
pub(crate) async fn json_fields<B: Send + Sync + 'static>(
    app: &Arc<App<B>>,
    who: &Who,
    parts: Parts,
    body: axum::body::Body,
    posting: &Posting,
) -> Result<Map<String, Value>, Problem> {
    if !is_json(&parts.headers) {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "{} is a JSON object, sent with Content-Type: application/json. {}",
                posting.what, posting.nothing
            ),
        ));
    }
    let headers = parts.headers.clone();
    let bytes = Bytes::from_request(Request::from_parts(parts, body), app)
        .await
        .map_err(|rejection| unread(rejection, posting))?;
    let fields = body::object(&bytes).map_err(|unread| refused_body(unread, posting))?;
    let csrf = match fields.get("csrf") {
        None => None,
        Some(Value::String(csrf)) => Some(csrf.as_str()),
        Some(_) => return Err(invalid_field("csrf", "\"csrf\" is a string", posting)),
    };
    // A browser's request carries its sign-in's CSRF token, as its form does.
    if who.via == Via::Cookie && !same_origin_form(who.csrf(), &headers, csrf) {
        return Err(RequestRefusal::Forbidden.into());
    }
    if let Some(name) = fields
        .keys()
        .find(|name| !posting.members.contains(&name.as_str()))
    {
        let allowed: Vec<String> = posting.members.iter().map(|m| format!("{m:?}")).collect();
        return Err(invalid_field(
            name,
            &format!(
                "Unknown member {name:?}: {} has {} (\"csrf\" from a browser)",
                posting.what.to_lowercase(),
                allowed.join(", ")
            ),
            posting,
        )
        .with("allowed", posting.members));
    }
    Ok(fields)
}

/// The refusal of a body the reader does not take.
fn refused_body(unread: Unread, posting: &Posting) -> Problem {
    match unread {
        Unread::NotAnObject(why) => not_json(&why, posting),
        Unread::TooDeep => Problem::new(
            StatusCode::BAD_REQUEST,
            "too_deep",
            format!(
                "{} nests at most {MAX_DEPTH} levels of arrays and objects. {}",
                posting.what, posting.nothing
            ),
        ),
        Unread::Twice { field, why } => Problem::new(
            StatusCode::BAD_REQUEST,
            "duplicate_member",
            format!(
                "{} names a member once ({why}): which one would count is not for the reader \
                 to guess. {}",
                posting.what, posting.nothing
            ),
        )
        .with("field", field),
    }
}

/// Whether the request says its body is JSON (`application/json`, or an
/// `application/...+json`).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    let Some(kind) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
    else {
        return false;
    };
    let kind = kind.trim().to_ascii_lowercase();
    kind == "application/json" || (kind.starts_with("application/") && kind.ends_with("+json"))
}

/// A body that could not be read: over the bound, or cut short.
fn unread(rejection: BytesRejection, posting: &Posting) -> Problem {
    let nothing = posting.nothing;
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "A request body is at most {} KiB. {nothing}",
                MAX_BODY / 1024
            ),
        )
    } else {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("{}. {nothing}", rejection.body_text()),
        )
    }
}

fn not_json(why: &str, posting: &Posting) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "invalid_json",
        format!(
            "{} is a JSON object such as {} ({why}). {}",
            posting.what, posting.example, posting.nothing
        ),
    )
}

/// A field of `posting` that is missing, unknown or wrong: a 400 that
/// names it.
pub(crate) fn invalid_field(field: &str, error: &str, posting: &Posting) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "invalid_request",
        format!("{error}. {}", posting.nothing),
    )
    .with("field", field)
}

/// Another method than `POST` on the decision endpoint: 405, in JSON.
pub(crate) async fn post_only() -> Response {
    method_not_allowed("POST", "A decision is a POST with a JSON body.")
}

/// A method the endpoint does not take: 405, in JSON, with the ones it
/// does (`allow`) and what to send (`said`).
pub(crate) fn method_not_allowed(allow: &'static str, said: &str) -> Response {
    Problem::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", said)
        .header(header::ALLOW, HeaderValue::from_static(allow))
        .into_response()
}

/// Whether `path` is the JSON API's, whose every answer is JSON.
pub(crate) fn is_api(path: &str) -> bool {
    path.starts_with("/api/")
}
