//! The inbox for programs: answers in JSON, refusals with a stable code, and
//! the decision endpoint beside the form, `POST
//! /api/approvals/{id}/decision`, which decides through the same
//! [`life::decide`](toolcall_core::life::decide) as the form.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use toolcall_core::life::{Answer, Decided, QuestionKind, Refusal as LifeRefusal};
use toolcall_core::store::Store as _;
use toolcall_core::store::{ApprovalEntry, StoreError, now_ms};

use crate::body::{self, MAX_DEPTH, Unread};
use crate::decide::{
    Closed, DECISIONS, SAY_WHAT_HAPPENED, SAY_WHETHER_IT_RUNS, UNKNOWN_TOOL, answer_of, answers,
    closed_as, decided_word, note_within, state_of, through_life,
};
use crate::page::{ALREADY_USED, EXPIRED, UNKNOWN, already_decided};
use crate::pending::reason;
use crate::security::{Refusal, Via, Who, same_origin_form};
use crate::{App, Backend, MAX_BODY, MAX_NOTE};

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
impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Problem {
        let code = match &refusal {
            Refusal::Unauthorized { .. } => "unauthorized",
            Refusal::Forbidden => "forbidden",
            Refusal::NotAdmin => "admin_only",
            Refusal::TooManyAttempts { .. } => "too_many_attempts",
            Refusal::NoRandomness(_) => "unavailable",
            Refusal::Twice(_) => "duplicate_member",
        };
        let mut problem = Problem::new(refusal.status(), code, refusal.to_string());
        if let Refusal::Twice(name) = &refusal {
            problem = problem.with("field", name.as_str());
        }
        if let Refusal::TooManyAttempts { retry_after } = refusal {
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

fn unknown() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "unknown_approval", UNKNOWN)
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

/// `POST /api/approvals/{id}/decision`: a decision posted as JSON, answered
/// with the decision's state, or with why nothing was decided; in JSON
/// whatever happens.
pub(crate) async fn decision<B: Backend>(
    State(app): State<Arc<App<B>>>,
    request: Request,
) -> Response {
    match decide(&app, request).await {
        Ok(state) => json(StatusCode::OK, &state),
        Err(problem) => problem.into_response(),
    }
}

/// A decision as a program posts it, read field by field (each problem
/// names its field).
struct Posted<'a> {
    decision: &'a str,
    note: &'a str,
    arguments: Option<&'a Value>,
}

/// Who asks (sign-in first, as everywhere), then the body (JSON, within
/// the bound), then a browser's CSRF token, then the fields, then an edit's
/// arguments; and the decision, recorded through [`through_life`] only.
async fn decide<B: Backend>(app: &Arc<App<B>>, request: Request) -> Result<Value, Problem> {
    let (mut parts, body) = request.into_parts();
    let who = Who::from_request_parts(&mut parts, app).await?;
    let Path(id) = Path::<String>::from_request_parts(&mut parts, app)
        .await
        .map_err(|rejection| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                rejection.body_text(),
            )
        })?;
    let fields = json_fields(app, &who, parts, body, &DECISION).await?;
    let posted = read(&fields)?;
    let now = now_ms();
    let edited = match posted.arguments {
        Some(arguments) => edited(app, &id, arguments, now).await?,
        None => None,
    };
    let answer = answer_of(posted.decision, edited.as_ref())
        .ok_or_else(|| invalid("decision", "not a decision"))?;
    match through_life(app, &who, &id, &answer, posted.note, now).await {
        Ok(decided) => Ok(decided_state(app, &id, &who, &answer, decided).await),
        Err(refusal) => Err(refused_by_life(app, &id, refusal).await),
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

/// A decision's body.
const DECISION: Posting = Posting {
    what: "A decision",
    example: "{\"decision\": \"approve\"}",
    nothing: "Nothing was decided.",
    members: &["decision", "note", "arguments", "csrf"],
};

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
        return Err(Refusal::Forbidden.into());
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

/// A field that is missing, unknown or wrong: a 400 that names it.
fn invalid(field: &str, error: &str) -> Problem {
    invalid_field(field, error, &DECISION)
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

/// The posted decision's fields, checked as the form's are: a decision
/// word, a note of at most [`MAX_NOTE`] characters (trimmed), arguments
/// with an edit and only with one.
fn read(fields: &Map<String, Value>) -> Result<Posted<'_>, Problem> {
    let decision = match fields.get("decision") {
        Some(Value::String(decision)) if DECISIONS.contains(&decision.as_str()) => decision,
        _ => {
            return Err(invalid(
                "decision",
                "\"decision\" is \"approve\", \"deny\" or \"edit\" (a question whether the call \
                 may run), or \"happened\" or \"not_happened\" (a question whether an earlier \
                 attempt took effect)",
            ));
        }
    };
    let note = match fields.get("note") {
        None | Some(Value::Null) => "",
        Some(Value::String(note)) => note_within(note)
            .ok_or_else(|| invalid("note", &format!("A note has at most {MAX_NOTE} characters")))?,
        Some(_) => return Err(invalid("note", "\"note\" is a string")),
    };
    let arguments = fields.get("arguments").filter(|a| !a.is_null());
    match (decision.as_str(), arguments) {
        ("edit", None) => Err(invalid(
            "arguments",
            "An edit carries \"arguments\": the object the call runs with instead of the model's",
        )),
        ("edit", _) | (_, None) => Ok(Posted {
            decision,
            note,
            arguments,
        }),
        (_, Some(_)) => Err(invalid("arguments", "Only an edit carries \"arguments\"")),
    }
}

/// The arguments an edit decides with: `None` when they are the model's
/// own (a plain approval, as the form takes it), else the given ones,
/// validated against the tool's schema when the question is an open
/// approval question. Any other [`life`](toolcall_core::life) refuses (an
/// edit of a question about an unknown outcome, of a closed question), or
/// finds it the decision already recorded, validated then: nothing
/// unvalidated is recorded.
async fn edited<B: Backend>(
    app: &App<B>,
    id: &str,
    given: &Value,
    now: u64,
) -> Result<Option<Value>, Problem> {
    let entry = match app.backend.store().approval(id).await {
        Ok(Some(entry)) => entry,
        Ok(None) => return Err(unknown()),
        Err(error) => return Err(store_unavailable(&error)),
    };
    let question = &entry.approval;
    if *given == question.arguments {
        return Ok(None);
    }
    if question.kind() == QuestionKind::Approval && entry.is_open(now) {
        let Some(spec) = app.backend.registry().get(&question.tool) else {
            return Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown_tool",
                UNKNOWN_TOOL,
            ));
        };
        if let Err(errors) = spec.validate_arguments(given) {
            let problems: Vec<Value> = errors
                .problems()
                .iter()
                .map(|p| json!({"field": p.path(), "problem": p.problem()}))
                .collect();
            let said: Vec<String> = errors.problems().iter().map(ToString::to_string).collect();
            return Err(Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_arguments",
                format!(
                    "The edited arguments are not valid ({}). Nothing was decided.",
                    said.join("; ")
                ),
            )
            .with("field", "arguments")
            .with("problems", problems));
        }
    }
    Ok(Some(given.clone()))
}

/// The state of a decided question: what was decided, by whom, when, of
/// which call.
fn state(entry: &ApprovalEntry) -> Option<Value> {
    let question = &entry.approval;
    let decision = question.decision.as_ref()?;
    let mut state = json!({
        "id": question.id,
        "state": state_of(question, decision),
        "by": decision.by,
        "note": decision.note,
        "decided_ms": decision.decided_ms,
        "tool": question.tool,
        "session": question.session,
        "caller": question.caller,
        "reason": reason(question),
        "digest": question.digest,
    });
    if let Some(edited) = &decision.edited_arguments {
        state["edited_arguments"] = edited.clone();
    }
    Some(state)
}

/// The answer to a recorded decision: its state as the store now keeps it,
/// and whether it was recorded before (`again`: the same person's same
/// decision, a retry). When the store cannot be read back, what was
/// recorded as this request gave it.
async fn decided_state<B: Backend>(
    app: &App<B>,
    id: &str,
    who: &Who,
    answer: &Answer<'_>,
    decided: Decided,
) -> Value {
    let kept = match app.backend.store().approval(id).await {
        Ok(Some(entry)) => state(&entry),
        _ => None,
    };
    let mut state =
        kept.unwrap_or_else(|| json!({"id": id, "state": decided_word(answer), "by": who.name()}));
    state["again"] = (decided == Decided::Again).into();
    // One signature of several: the question waits for the others.
    if let Decided::Signed { signatures, needed } = decided {
        state["signatures"] = signatures.into();
        state["needed"] = needed.into();
    }
    state
}

/// Why [`life`](toolcall_core::life) took no decision, with its words
/// (`refusal`).
async fn refused_by_life<B: Backend>(app: &App<B>, id: &str, refusal: LifeRefusal) -> Problem {
    let said = refusal.to_string();
    let problem = match refusal {
        LifeRefusal::Unknown => unknown(),
        LifeRefusal::Expired => Problem::new(StatusCode::GONE, "expired", EXPIRED),
        LifeRefusal::Closed => match app.backend.store().approval(id).await {
            Ok(Some(entry)) => closed(&entry),
            Ok(None) => unknown(),
            Err(error) => store_unavailable(&error),
        },
        LifeRefusal::WrongKind(kind) => {
            let error = match kind {
                QuestionKind::InDoubt => SAY_WHAT_HAPPENED,
                _ => SAY_WHETHER_IT_RUNS,
            };
            Problem::new(StatusCode::CONFLICT, "wrong_kind", error).with("answers", answers(kind))
        }
        LifeRefusal::NotPermitted(kind) => Problem::new(
            StatusCode::CONFLICT,
            "not_permitted",
            "This question is not one to answer here. Nothing was decided.",
        )
        .with("answers", answers(kind)),
        LifeRefusal::Controls(_) => {
            Problem::new(StatusCode::CONFLICT, "refused_by_controls", &said)
        }
        LifeRefusal::Store(error) => store_unavailable(&error),
        _ => Problem::new(StatusCode::CONFLICT, "refused", "Nothing was decided."),
    };
    problem.with("refusal", said)
}

/// The answer for a question that can no longer be decided: decided (409,
/// with the decision that stands), used (409) or expired (410).
fn closed(entry: &ApprovalEntry) -> Problem {
    match closed_as(entry, now_ms()) {
        Some(Closed::Decided(decision)) => Problem::new(
            StatusCode::CONFLICT,
            "already_decided",
            already_decided(&entry.approval, decision),
        )
        .with("decision", state(entry)),
        Some(Closed::Used) => Problem::new(StatusCode::CONFLICT, "already_used", ALREADY_USED),
        Some(Closed::Expired) | None => Problem::new(StatusCode::GONE, "expired", EXPIRED),
    }
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
