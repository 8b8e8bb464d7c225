//! The inbox for programs: answers in JSON, refusals with a stable code, and
//! the decision endpoint beside the form, `POST
//! /api/approvals/{id}/decision`, which decides through the same
//! [`life::decide`](toolcall_core::life::decide) as the form.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use toolcall_core::life::{Answer, Decided, QuestionKind, Refusal as LifeRefusal};
use toolcall_core::store::{ApprovalEntry, now_ms};

use crate::decide::{
    DECISIONS, SAY_WHAT_HAPPENED, SAY_WHETHER_IT_RUNS, UNKNOWN_TOOL, answer_of, decided_word,
    note_within, state_of, through_life,
};
use crate::page::{ALREADY_USED, Closed, EXPIRED, UNKNOWN, already_decided, closed_as};
use crate::pending::{answers, reason};
use crate::problem::{Posting, Problem, invalid_field, json, json_fields, store_unavailable};
use crate::security::Who;
use crate::{App, Backend, MAX_NOTE};
use toolcall_core::store::prelude::*;

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
struct DecisionBody<'a> {
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

/// A decision's body.
const DECISION: Posting = Posting {
    what: "A decision",
    example: "{\"decision\": \"approve\"}",
    nothing: "Nothing was decided.",
    members: &["decision", "note", "arguments", "csrf"],
};

/// A field that is missing, unknown or wrong: a 400 that names it.
fn invalid(field: &str, error: &str) -> Problem {
    invalid_field(field, error, &DECISION)
}

fn unknown() -> Problem {
    Problem::new(StatusCode::NOT_FOUND, "unknown_approval", UNKNOWN)
}

/// The posted decision's fields, checked as the form's are: a decision
/// word, a note of at most [`MAX_NOTE`] characters (trimmed), arguments
/// with an edit and only with one.
fn read(fields: &Map<String, Value>) -> Result<DecisionBody<'_>, Problem> {
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
        ("edit", _) | (_, None) => Ok(DecisionBody {
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
