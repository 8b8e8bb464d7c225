//! Deciding: the edit form, and the `POST` that approves, denies or edits.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use toolcall_core::__private::echo::{MAX_NOTE_BYTES, bound};
use toolcall_core::ToolSpec;
use toolcall_core::life::{self, Answer, Answerer, Decided, QuestionKind, Refusal, Verdict};
use toolcall_core::store::{ApprovalDecision, PendingApproval, now_ms};

use crate::html::{Html, segment};
use crate::page::{closed, expired, html_response, layout, message, store_down, unknown};
use crate::pending::{Listing, arguments_table, is_in_doubt, not_a_listing, why};
use crate::security::{FormPost, Who, field};
use crate::{App, Backend, MAX_NOTE};
use toolcall_core::store::prelude::*;

/// How a field is typed in the edit form: as plain text (a string in the
/// schema) or as JSON.
fn is_text_field(spec: &ToolSpec, name: &str) -> bool {
    let schema = spec.parameters_schema();
    let kind = &schema["properties"][name]["type"];
    kind == "string"
        || kind
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == "string"))
}

/// The form's text for a value: a string as it is, anything else as JSON.
fn form_text(spec: &ToolSpec, name: &str, value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) if is_text_field(spec, name) => text.clone(),
        Some(value) => serde_json::to_string(value).unwrap_or_default(),
    }
}

/// The edited arguments from the form's `arg:NAME` fields: an empty field
/// is left out, a text field is a string, any other is JSON.
fn edited_arguments(spec: &ToolSpec, form: &[(String, String)]) -> Result<Value, Vec<String>> {
    let mut object = Map::new();
    let mut problems = Vec::new();
    for field in spec.fields() {
        let Some(text) = self::field(form, &format!("arg:{}", field.name)) else {
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        if is_text_field(spec, field.name) {
            object.insert(field.name.to_owned(), Value::String(text.to_owned()));
            continue;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(value) => {
                object.insert(field.name.to_owned(), value);
            }
            Err(error) => problems.push(format!("{}: not JSON ({error})", field.name)),
        }
    }
    if problems.is_empty() {
        Ok(Value::Object(object))
    } else {
        Err(problems)
    }
}

/// The edit form, with the values given (the stored ones, or what the
/// person typed) and the problems found; it carries the listing the
/// person came from, to return them to it.
fn edit_page<B>(
    app: &App<B>,
    (user, listing): (&Who, &Listing),
    approval: &PendingApproval,
    spec: &ToolSpec,
    values: &BTreeMap<String, String>,
    note: &str,
    problems: &[String],
) -> Html {
    let mut body = Html::default();
    body.raw("<article class=\"approval\" data-id=\"")
        .text(&approval.id)
        .raw("\"><header>")
        .el("<h2>Edit <code class=\"tool\">", &approval.tool, "</code></h2></header>")
        .raw("<p class=\"desc\">")
        .lines(spec.description())
        .raw("</p>")
        .raw("<p class=\"lead\">The call runs with these arguments instead of the model's: they are validated now, and checked and policed again by the agent, as a new call. The model is told that a person changed them.</p>");
    if !problems.is_empty() {
        body.raw("<div class=\"notice bad problems\" role=\"alert\"><b>Not valid, nothing was decided:</b><ul>");
        for problem in problems {
            body.el("<li>", problem, "</li>");
        }
        body.raw("</ul></div>");
    }
    why(&mut body, approval);
    body.raw("<p>The model asked for:</p>");
    arguments_table(
        &mut body,
        &approval.arguments,
        Some(spec),
        &approval.tainted,
    );
    body.raw("<form method=\"post\" class=\"edit\" action=\"")
        .value(&format!("/approvals/{}/decide", segment(&approval.id)))
        .raw("\"><input type=\"hidden\" name=\"csrf\" value=\"")
        .value(user.csrf())
        .raw("\"><input type=\"hidden\" name=\"action\" value=\"edit\">");
    listing.hidden(&mut body);
    body.raw("<table class=\"args\"><tbody>");
    for field in spec.fields() {
        let value = values.get(field.name).map_or("", String::as_str);
        let kind = if is_text_field(spec, field.name) {
            "text"
        } else {
            "JSON"
        };
        body.raw("<tr><th scope=\"row\"><label for=\"arg-")
            .value(field.name)
            .raw("\"><code>")
            .text(field.name)
            .raw("</code></label></th><td class=\"value\"><textarea rows=\"1\" id=\"arg-")
            .value(field.name)
            .raw("\" name=\"arg:")
            .value(field.name)
            .raw("\">")
            .value(value)
            .raw("</textarea></td>")
            .raw("<td class=\"about\">")
            .lines(&format!("{} ({kind})", field.description))
            .raw("</td></tr>");
    }
    body.raw("</tbody></table><label>Note (optional)<input type=\"text\" name=\"note\" value=\"")
        .value(note)
        .raw(&format!("\" maxlength=\"{MAX_NOTE}\"></label>"))
        .raw("<p><button type=\"submit\" class=\"approve\">Approve with these arguments</button> <a href=\"")
        .value(&listing.here())
        .raw("\">Cancel</a></p></form></article>");
    layout("Edit", &app.options.title, Some(user), "", &body.finish())
}

pub(crate) async fn edit<B: Backend>(
    State(app): State<Arc<App<B>>>,
    who: Who,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let user = &who;
    let listing = match Listing::parse("/", &query, app.options.limit) {
        Ok(listing) => listing,
        Err(problem) => return not_a_listing(&app, user, &problem),
    };
    let entry = match app.backend.store().approval(&id).await {
        Ok(Some(entry)) => entry,
        Ok(None) => return unknown(&app, user),
        Err(error) => return store_down(&app, user, &error),
    };
    if let Some(closed) = closed(&app, user, &entry) {
        return closed;
    }
    if is_in_doubt(&entry.approval) {
        return not_editable(&app, user);
    }
    let Some(spec) = app.backend.registry().get(&entry.approval.tool) else {
        return message(
            &app,
            user,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Cannot edit",
            UNKNOWN_TOOL,
        );
    };
    let values = spec
        .fields()
        .iter()
        .map(|f| {
            (
                f.name.to_owned(),
                form_text(spec, f.name, entry.approval.arguments.get(f.name)),
            )
        })
        .collect();
    html_response(
        StatusCode::OK,
        edit_page(
            &app,
            (user, &listing),
            &entry.approval,
            spec,
            &values,
            "",
            &[],
        ),
    )
}

/// The `POST` that decides: approves, denies or edits an approval
/// question, or says of a question about an unknown outcome whether it
/// happened. Checks the posted form, records the decision as
/// [`life::decide`] takes a person's, and answers with the inbox and a
/// notice.
pub(crate) async fn decide<B: Backend>(
    State(app): State<Arc<App<B>>>,
    Path(id): Path<String>,
    FormPost { who, form }: FormPost,
) -> Response {
    let user = &who;
    // Checked before anything is decided: a decision whose way back makes
    // no sense decides nothing.
    let listing = match Listing::posted(&form, app.options.limit) {
        Ok(listing) => listing,
        Err(problem) => return not_a_listing(&app, user, &problem),
    };
    let note = match posted_note(&app, user, &form) {
        Ok(note) => note,
        Err(answer) => return *answer,
    };
    let action = field(&form, "action").unwrap_or("");
    let now = now_ms();
    let edited = match action {
        "edit" => match edited_decision(&app, (user, &listing), &id, &form, &note).await {
            Ok(edited) => edited,
            Err(answer) => return *answer,
        },
        _ => None,
    };
    let Some(answer) = answer_of(action, edited.as_ref()) else {
        return message(
            &app,
            user,
            StatusCode::BAD_REQUEST,
            "No decision",
            "Approve, deny or edit (or, of a question about an unknown outcome, say whether \
             it happened): nothing was decided.",
        );
    };
    let notice = match decided_word(&answer) {
        "not_happened" => "not-happened",
        word => word,
    };
    let back = Back {
        listing: &listing,
        notice,
    };
    record(&app, user, &id, (&answer, &note, now), back).await
}

/// What `answer` decides, as a word: `approved`, `edited`, `denied`,
/// `happened` or `not_happened` (as [`state_of`] says it once recorded).
pub(crate) fn decided_word(answer: &Answer<'_>) -> &'static str {
    match answer {
        Answer::NotHappened => "not_happened",
        Answer::Happened => "happened",
        Answer::Deny => "denied",
        Answer::Edit(_) => "edited",
        _ => "approved",
    }
}

/// The words a decision is given by, the form's `action` and the JSON
/// endpoint's `decision` alike.
pub(crate) const DECISIONS: [&str; 5] = ["approve", "deny", "edit", "happened", "not_happened"];

/// The answer `decision` (one of [`DECISIONS`]) gives: an `edit` with
/// `edited` arguments is an edit, one with none (the model's own) an
/// approval. `None` for a word that is no decision.
pub(crate) fn answer_of<'a>(decision: &str, edited: Option<&'a Value>) -> Option<Answer<'a>> {
    Some(match (decision, edited) {
        ("approve", _) | ("edit", None) => Answer::Approve,
        ("edit", Some(edited)) => Answer::Edit(edited),
        ("deny", _) => Answer::Deny,
        ("happened", _) => Answer::Happened,
        ("not_happened", _) => Answer::NotHappened,
        _ => return None,
    })
}

/// What a recorded decision decided, as a word ([`Verdict::word`]):
/// `approved`, `edited` or `denied` of an approval question, `happened` or
/// `not_happened` of a question about an unknown outcome.
pub(crate) fn state_of(question: &PendingApproval, decision: &ApprovalDecision) -> &'static str {
    Verdict::of(question.kind(), decision).word()
}

/// A person's note, trimmed; `None` when it is longer than [`MAX_NOTE`]
/// characters (nothing is decided then).
pub(crate) fn note_within(note: &str) -> Option<&str> {
    let note = note.trim();
    (note.chars().count() <= MAX_NOTE).then_some(note)
}

/// The posted note, trimmed; or, when it is longer than [`MAX_NOTE`]
/// characters, the answer that nothing was decided.
fn posted_note<B>(
    app: &App<B>,
    user: &Who,
    form: &[(String, String)],
) -> Result<String, Box<Response>> {
    match note_within(field(form, "note").unwrap_or("")) {
        Some(note) => Ok(note.to_owned()),
        None => Err(Box::new(message(
            app,
            user,
            StatusCode::BAD_REQUEST,
            "Note too long",
            &format!("A note has at most {MAX_NOTE} characters. Nothing was decided."),
        ))),
    }
}

/// Records `who`'s `answer` to the question `id`, with `note`, as
/// [`life::decide`] takes a person's: the one way the inbox decides, from
/// the form and from the JSON endpoint alike. The note is kept bounded, as
/// the dispatcher keeps a host's: at most `MAX_NOTE_BYTES`, a longer one as
/// its head and its SHA-256 (a note of [`MAX_NOTE`] characters can be four
/// times as many bytes).
pub(crate) async fn through_life<B: Backend>(
    app: &App<B>,
    who: &Who,
    id: &str,
    answer: &Answer<'_>,
    note: &str,
    now: u64,
) -> Result<Decided, Refusal> {
    let note = bound(note, MAX_NOTE_BYTES);
    toolcall_core::crash::point(toolcall_core::crash::BEFORE_DECISION);
    let person = Answerer::Person(who.name());
    let at = life::Moment::new(now, app.backend.denial_ttl());
    let outcome = life::decide(app.backend.store(), id, None, &person, answer, &note, at).await;
    toolcall_core::crash::point(toolcall_core::crash::AFTER_DECISION);
    outcome
}

/// The arguments an `edit` decides the call with: `None` when they are the
/// model's own, else the edited ones. The error is the answer when the
/// question is unknown, closed or about an unknown outcome, the tool is
/// unknown, or the edited arguments are not valid (the edit form again,
/// with what was typed and the problems).
async fn edited_decision<B: Backend>(
    app: &App<B>,
    (user, listing): (&Who, &Listing),
    id: &str,
    form: &[(String, String)],
    note: &str,
) -> Result<Option<Value>, Box<Response>> {
    let entry = match app.backend.store().approval(id).await {
        Ok(Some(entry)) => entry,
        Ok(None) => return Err(Box::new(unknown(app, user))),
        Err(error) => return Err(Box::new(store_down(app, user, &error))),
    };
    if let Some(closed) = closed(app, user, &entry) {
        return Err(Box::new(closed));
    }
    if is_in_doubt(&entry.approval) {
        return Err(Box::new(not_editable(app, user)));
    }
    let Some(spec) = app.backend.registry().get(&entry.approval.tool) else {
        return Err(Box::new(message(
            app,
            user,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Cannot edit",
            UNKNOWN_TOOL,
        )));
    };
    let checked = edited_arguments(spec, form).and_then(|arguments| {
        spec.validate_arguments(&arguments)
            .map(|()| arguments)
            .map_err(|errors| errors.problems().iter().map(ToString::to_string).collect())
    });
    match checked {
        Ok(arguments) if arguments == entry.approval.arguments => Ok(None),
        Ok(arguments) => Ok(Some(arguments)),
        Err(problems) => {
            let values = spec
                .fields()
                .iter()
                .map(|f| {
                    let typed = field(form, &format!("arg:{}", f.name)).unwrap_or("");
                    (f.name.to_owned(), typed.to_owned())
                })
                .collect();
            Err(Box::new(html_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                edit_page(
                    app,
                    (user, listing),
                    &entry.approval,
                    spec,
                    &values,
                    note,
                    &problems,
                ),
            )))
        }
    }
}

/// Where a recorded decision returns the person: the list they decided
/// from, and the notice of what was decided.
struct Back<'a> {
    listing: &'a Listing,
    notice: &'a str,
}

/// The answer to a decision that was recorded: back to the inbox's list
/// the person decided from (its filters, order and page, rebuilt from the
/// checked listing, never echoed), with the notice and the question's id.
fn decided(id: &str, listing: &Listing, notice: &str) -> Response {
    let notice = format!("notice={notice}&id={}", segment(id));
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, listing.here_with(&notice))],
    )
        .into_response()
}

/// Records the person's answer and answers: the inbox with the notice when
/// it was recorded, or when the same person's same decision already was (a
/// double click); otherwise why it was not (closed, expired, unknown, an
/// answer of the other kind, store down).
async fn record<B: Backend>(
    app: &App<B>,
    user: &Who,
    id: &str,
    (answer, note, now): (&Answer<'_>, &str, u64),
    back: Back<'_>,
) -> Response {
    let store = app.backend.store();
    match through_life(app, user, id, answer, note, now).await {
        Ok(toolcall_core::life::Decided::Signed { .. }) => decided(id, back.listing, "signed"),
        Ok(_) => decided(id, back.listing, back.notice),
        Err(Refusal::Controls(why)) => message(
            app,
            user,
            StatusCode::CONFLICT,
            "Refused by the operators' controls",
            &why,
        ),
        Err(Refusal::Expired) => expired(app, user),
        Err(Refusal::Closed) => match store.approval(id).await {
            Ok(Some(entry)) => closed(app, user, &entry).unwrap_or_else(|| expired(app, user)),
            Ok(None) => unknown(app, user),
            Err(error) => store_down(app, user, &error),
        },
        Err(Refusal::WrongKind(QuestionKind::InDoubt)) => not_a_settlement(app, user),
        Err(Refusal::WrongKind(_)) => message(
            app,
            user,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Not a question about what happened",
            SAY_WHETHER_IT_RUNS,
        ),
        Err(Refusal::Store(error)) => store_down(app, user, &error),
        Err(_) => unknown(app, user),
    }
}

/// The answer to an approve, deny or edit of a question about an unknown
/// outcome: it asks what happened, not for permission.
fn not_a_settlement<B>(app: &App<B>, user: &Who) -> Response {
    message(
        app,
        user,
        StatusCode::UNPROCESSABLE_ENTITY,
        "Say what happened",
        SAY_WHAT_HAPPENED,
    )
}

/// What an approval, denial or edit of a question about an unknown
/// outcome is told.
pub(crate) const SAY_WHAT_HAPPENED: &str = "This asks whether an earlier attempt of the call took \
     effect, not whether it may run: say whether it happened. Nothing was decided.";

/// What a settlement of an approval question is told.
pub(crate) const SAY_WHETHER_IT_RUNS: &str =
    "This asks whether the call may run: approve, edit or deny it. Nothing was decided.";

/// What an edit of a call whose tool this inbox does not know is told.
pub(crate) const UNKNOWN_TOOL: &str = "This inbox does not know the tool, so it cannot validate \
     edited arguments. Approve or deny it as it is.";

/// The answer to an edit of a question about an unknown outcome: it asks
/// what happened, and has nothing to edit.
fn not_editable<B>(app: &App<B>, user: &Who) -> Response {
    message(
        app,
        user,
        StatusCode::UNPROCESSABLE_ENTITY,
        "Cannot edit",
        "This asks whether an earlier attempt of the call took effect: say whether it happened. \
         Nothing was decided.",
    )
}
