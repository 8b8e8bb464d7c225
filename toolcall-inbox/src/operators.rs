//! The operators' controls from the inbox, an admin's only: what is
//! stopped and why, the controls' history, and stopping or enabling a
//! tool, a caller or everything, from the page's forms and from programs
//! (`/api/controls`). Every change goes through
//! [`toolcall_core::controls::stop`] or [`toolcall_core::controls::resume`],
//! as the signed-in person, whom the history names. And, for the inbox's
//! cards, what the controls say of a pending question: stopped, and who
//! signed it of the people it needs.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use toolcall_core::controls::{self, ChangeError, Controls, Stop, Target};
use toolcall_core::life::QuestionKind;
use toolcall_core::store::Store;
use toolcall_core::store::{ControlsChange, PendingApproval, Signature, StoreError};
use toolcall_core::{Caller, Registry};

use crate::html::{Html, rfc3339, utc};
use crate::page::{html_response, layout, message, store_down};
use crate::problem::{Posting, Problem, invalid_field, json_fields, store_unavailable};
use crate::security::{FormPost, RequestRefusal, Who, field};
use crate::{App, Backend, MAX_NOTE};
use toolcall_core::store::prelude::*;

/// The words a target is given by, in the form and in JSON.
const TARGETS: [&str; 3] = ["tool", "caller", "everything"];

/// The longest name of a tool or a caller the inbox takes, in characters.
const MAX_NAME: usize = 200;

/// A change an admin asks for.
#[derive(Debug)]
enum Change {
    /// Stop `target`, for `reason`.
    Stop { target: Target, reason: String },
    /// Lift the stop of the target.
    Enable(Target),
}

impl Change {
    /// The change, in the words the history keeps.
    fn words(&self) -> String {
        match self {
            Change::Stop { target, reason } => format!("stopped {target}: {reason}"),
            Change::Enable(target) => format!("enabled {target}"),
        }
    }
}

/// Why a change cannot be read: the field, and what is wrong (400, or 422
/// for a tool the inbox does not know).
struct Bad {
    status: StatusCode,
    code: &'static str,
    field: &'static str,
    error: String,
}

fn bad(field: &'static str, error: impl Into<String>) -> Bad {
    Bad {
        status: StatusCode::BAD_REQUEST,
        code: "invalid_request",
        field,
        error: error.into(),
    }
}

/// The change the fields ask for (`target`, `name`, and a stop's
/// `reason`), as the form and the JSON give them alike; `given` reads a
/// field. Whether the name is one the application has is [`checked`]'s.
fn change_of<'a>(stopping: bool, given: impl Fn(&str) -> Option<&'a str>) -> Result<Change, Bad> {
    let name = given("name").map(str::trim).filter(|name| !name.is_empty());
    if name.is_some_and(|name| name.chars().count() > MAX_NAME) {
        return Err(bad(
            "name",
            format!("A name has at most {MAX_NAME} characters"),
        ));
    }
    let named = |what: &str| {
        name.map(str::to_owned)
            .ok_or_else(|| bad("name", format!("Stopping a {what} needs its \"name\"")))
    };
    let target = match given("target") {
        Some("tool") => Target::Tool(named("tool")?),
        Some("caller") => Target::Caller(named("caller")?),
        Some("everything") if name.is_none() => Target::Everything,
        Some("everything") => {
            return Err(bad(
                "name",
                "\"everything\" stops every call and names nothing: leave \"name\" out",
            ));
        }
        _ => {
            return Err(bad(
                "target",
                "\"target\" is \"tool\", \"caller\" or \"everything\"",
            ));
        }
    };
    if !stopping {
        return Ok(Change::Enable(target));
    }
    let reason = given("reason").map(str::trim).unwrap_or("");
    if reason.is_empty() {
        return Err(bad(
            "reason",
            "A stop needs a \"reason\": the model and the people on duty are told it",
        ));
    }
    if reason.chars().count() > MAX_NOTE {
        return Err(bad(
            "reason",
            format!("A reason has at most {MAX_NOTE} characters"),
        ));
    }
    Ok(Change::Stop {
        target,
        reason: reason.to_owned(),
    })
}

/// Why `target` names no tool or caller of this application (`callers`,
/// when the inbox knows them), with the closest real name, in the words
/// `admin policy check` has for a name the controls do not know; `None`
/// when it names one (or everything).
fn unknown_name(registry: &Registry, callers: Option<&[&Caller]>, target: &Target) -> Option<Bad> {
    let unknown = |code, error: String| Bad {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        code,
        field: "name",
        error,
    };
    let code = match target {
        Target::Tool(_) => "unknown_tool",
        Target::Caller(id) => {
            let Some(callers) = callers else {
                return Some(unknown(
                    "unknown_caller",
                    format!(
                        "This inbox does not know the application's callers, so it cannot tell \
                         `{id}` from a misspelling: stop everything, or the caller with the \
                         command line (`admin disable --caller {id}`)"
                    ),
                ));
            };
            if callers.iter().any(|caller| caller.id() == id) {
                return None;
            }
            "unknown_caller"
        }
        _ => return None,
    };
    let unknown_target =
        toolcall_core::controls::unknown_target(target, registry, callers.unwrap_or_default())?;
    Some(unknown(code, capitalized(&unknown_target.problem)))
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Whether `change` names what this application has: a stop of a tool or
/// caller it does not have is refused (a typo would stop nothing), and an
/// enable too unless a stop of that very target is there to lift (an older
/// version's tool, stopped then). `Ok(Some(bad))` names the field and the
/// closest real name; `Err` when the controls cannot be read.
async fn checked<B: Backend>(app: &App<B>, change: &Change) -> Result<Option<Bad>, StoreError> {
    let backend = &app.backend;
    let callers = backend.callers();
    let (target, enabling) = match change {
        Change::Stop { target, .. } => (target, false),
        Change::Enable(target) => (target, true),
    };
    let Some(bad) = unknown_name(backend.registry(), callers.as_deref(), target) else {
        return Ok(None);
    };
    if enabling {
        let (_, controls) = read_controls(backend.store()).await?;
        if controls.stops.iter().any(|stop| stop.target == *target) {
            return Ok(None);
        }
    }
    Ok(Some(bad))
}

/// Makes `change` as `who`, through [`controls::stop`] or
/// [`controls::resume`]: the version written. Stopping what is stopped
/// already for the same reason changes nothing
/// ([`ChangeError::Unchanged`]); for another reason, the reason is
/// replaced.
async fn apply<B: Backend>(app: &App<B>, who: &Who, change: Change) -> Result<u64, ChangeError> {
    let store = app.backend.store();
    match change {
        Change::Stop { target, reason } => {
            let (_, current) = controls::read(store).await?;
            if current
                .stops
                .iter()
                .any(|stop| stop.target == target && stop.reason == reason)
            {
                return Err(ChangeError::Unchanged(format!(
                    "{target} is stopped already, for this reason"
                )));
            }
            controls::stop(store, target, &reason, who.name()).await
        }
        Change::Enable(target) => controls::resume(store, target, who.name()).await,
    }
}

/// The controls kept in `store`, with their version; controls that cannot
/// be read are a store error (life refuses to decide on them too).
pub(crate) async fn read_controls<St: Store + ?Sized>(
    store: &St,
) -> Result<(u64, Controls), StoreError> {
    match controls::read(store).await {
        Ok(read) => Ok(read),
        Err(ChangeError::Store(error)) => Err(error),
        Err(other) => Err(StoreError::new(other.to_string())),
    }
}

/// What the operators' controls say of a pending question.
#[derive(Debug, Default)]
pub(crate) struct Standing {
    /// The stop that keeps it from being approved (it can be denied).
    pub(crate) stopped: Option<Stop>,
    /// How many distinct people must approve it (1 unless the controls
    /// say more).
    pub(crate) needed: u32,
    /// Who signed it so far, oldest first (when more than one is needed).
    pub(crate) signatures: Vec<Signature>,
}

/// What `controls` say of `question`: a question about an unknown outcome
/// is settled by one person whatever they say, stopped or not.
pub(crate) async fn standing<St: Store + ?Sized>(
    store: &St,
    controls: &Controls,
    question: &PendingApproval,
) -> Result<Standing, StoreError> {
    if question.kind() == QuestionKind::InDoubt {
        return Ok(Standing {
            needed: 1,
            ..Standing::default()
        });
    }
    // The question keeps what it was asked with (a tool's own
    // `approvals = N`); the controls may ask more since.
    let needed = controls
        .people_needed(&question.tool)
        .max(question.answerers.people_needed());
    let signatures = if needed > 1 {
        store.signatures(&question.id).await?
    } else {
        Vec::new()
    };
    Ok(Standing {
        stopped: controls.stopped(&question.tool, &question.caller).cloned(),
        needed,
        signatures,
    })
}

/// The standing of each question, in order.
pub(crate) async fn standings<St: Store + ?Sized>(
    store: &St,
    questions: &[PendingApproval],
) -> Result<Vec<Standing>, StoreError> {
    let (_, controls) = read_controls(store).await?;
    let mut all = Vec::with_capacity(questions.len());
    for question in questions {
        all.push(standing(store, &controls, question).await?);
    }
    Ok(all)
}

/// The words of a target: its kind, and its name (none for everything).
fn target_words(target: &Target) -> (&'static str, Option<&str>) {
    match target {
        Target::Tool(name) => ("tool", Some(name)),
        Target::Caller(id) => ("caller", Some(id)),
        _ => ("everything", None),
    }
}

/// A stop as the JSON says it.
pub(crate) fn stop_json(stop: &Stop) -> Value {
    let (target, name) = target_words(&stop.target);
    json!({
        "target": target,
        "name": name,
        "reason": stop.reason,
        "by": stop.by,
        "at_ms": stop.at_ms,
    })
}

/// The controls as `GET /api/controls` gives them.
fn controls_json(version: u64, controls: &Controls, history: &[ControlsChange]) -> Value {
    json!({
        "version": version,
        "stops": controls.stops.iter().map(stop_json).collect::<Vec<_>>(),
        "approvals": controls.approvals,
        "history": history,
    })
}

/// The controls and their latest changes (at most the page size).
async fn read_all<B: Backend>(
    app: &App<B>,
) -> Result<(u64, Controls, Vec<ControlsChange>), StoreError> {
    let store = app.backend.store();
    let (version, controls) = read_controls(store).await?;
    let history = store.controls_history(app.options.limit).await?;
    Ok((version, controls, history))
}

/// `GET /admin`: what is stopped, the forms to stop and enable, and the
/// history. An admin's only (403).
pub(crate) async fn page<B: Backend>(
    State(app): State<Arc<App<B>>>,
    who: Who,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if !who.is_admin() {
        return RequestRefusal::NotAdmin.into_response();
    }
    let (version, controls, history) = match read_all(&app).await {
        Ok(read) => read,
        Err(error) => return store_down(&app, &who, &error),
    };
    let mut body = Html::default();
    let notice = match query.get("notice").map(String::as_str) {
        Some("stopped") => {
            "Stopped: every process that shares the store refuses it from its next call on"
        }
        Some("enabled") => "Enabled: its calls run again from each process's next call on",
        _ => "",
    };
    if !notice.is_empty() {
        body.el("<p class=\"notice\" role=\"status\">", notice, ".</p>");
    }
    body.raw("<h2>Stopped</h2>");
    if controls.stops.is_empty() {
        body.raw("<p class=\"empty\">Nothing is stopped.</p>");
    } else {
        body.raw("<table class=\"stops\"><thead><tr><th>What</th><th>Why</th><th>Who</th><th>Since</th><th></th></tr></thead><tbody>");
        for stop in &controls.stops {
            stopped_row(&mut body, stop, &who);
        }
        body.raw("</tbody></table>");
    }
    stop_form(&mut body, app.backend.registry(), &who);
    if !controls.approvals.is_empty() {
        body.raw("<h2>Approved by several people</h2><ul class=\"approvals\">");
        for (tool, people) in &controls.approvals {
            body.el("<li><code>", tool, "</code>: ")
                .text(&format!("{people} people"))
                .raw("</li>");
        }
        body.raw("</ul>");
    }
    body.raw("<h2>History</h2>").el(
        "<p class=\"lead\">",
        &format!("The controls are at version {version}; the latest changes first."),
        "</p>",
    );
    if history.is_empty() {
        body.raw("<p class=\"empty\">Nobody changed the controls yet.</p>");
    } else {
        body.raw("<table class=\"controls-history\"><thead><tr><th>Version</th><th>When</th><th>Who</th><th>What</th></tr></thead><tbody>");
        for change in &history {
            body.el("<tr><td>", &change.version.to_string(), "</td>");
            time(&mut body, change.at_ms);
            body.el("<td class=\"by\">", &change.by, "</td>").el(
                "<td>",
                &change.summary,
                "</td></tr>",
            );
        }
        body.raw("</tbody></table>");
    }
    html_response(
        StatusCode::OK,
        layout(
            "Operators",
            &app.options.title,
            Some(&who),
            "Operators",
            &body.finish(),
        ),
    )
}

/// A table cell with a time.
fn time(body: &mut Html, ms: u64) {
    body.raw("<td><time datetime=\"")
        .value(&rfc3339(ms))
        .raw("\">")
        .text(&utc(ms))
        .raw("</time></td>");
}

/// One stop, with the button that enables it again.
fn stopped_row(body: &mut Html, stop: &Stop, who: &Who) {
    let (target, name) = target_words(&stop.target);
    body.raw("<tr data-target=\"")
        .text(target)
        .raw("\" data-name=\"")
        .text(name.unwrap_or(""))
        .raw("\">")
        .el("<td>", &stop.target.to_string(), "</td>")
        .el("<td>", &stop.reason, "</td>")
        .el("<td class=\"by\">", &stop.by, "</td>");
    time(body, stop.at_ms);
    body.raw("<td><form method=\"post\" action=\"/admin/enable\"><input type=\"hidden\" name=\"csrf\" value=\"")
        .value(who.csrf())
        .raw("\"><input type=\"hidden\" name=\"target\" value=\"")
        .value(target)
        .raw("\"><input type=\"hidden\" name=\"name\" value=\"")
        .value(name.unwrap_or(""))
        .raw("\"><button type=\"submit\" class=\"approve\">Enable</button></form></td></tr>");
}

/// The form that stops a tool, a caller or everything, with a reason.
fn stop_form(body: &mut Html, registry: &Registry, who: &Who) {
    body.raw("<h2>Stop</h2><form method=\"post\" action=\"/admin/stop\" class=\"stop\"><input type=\"hidden\" name=\"csrf\" value=\"")
        .value(who.csrf())
        .raw("\"><label>What<select name=\"target\">");
    for target in TARGETS {
        body.raw("<option value=\"")
            .value(target)
            .raw("\">")
            .text(target)
            .raw("</option>");
    }
    body.raw("</select></label><label>Name (of the tool or caller)<input type=\"text\" name=\"name\" list=\"tools\" maxlength=\"")
        .text(&MAX_NAME.to_string())
        .raw("\"></label><datalist id=\"tools\">");
    for spec in registry.iter() {
        body.raw("<option value=\"").value(spec.name()).raw("\">");
    }
    body.raw("</datalist><label>Reason (required: the model and the people on duty are told it)<input type=\"text\" name=\"reason\" required maxlength=\"")
        .text(&MAX_NOTE.to_string())
        .raw("\"></label><button type=\"submit\" class=\"deny\">Stop</button></form>")
        .raw("<p class=\"lead\">Every process that shares the store refuses its calls (<code>STOPPED</code>) from its next call on, and its pending calls cannot be approved (they can be denied) until it is enabled again.</p>");
}

/// `POST /admin/stop`: the form that stops.
pub(crate) async fn stop_posted<B: Backend>(
    State(app): State<Arc<App<B>>>,
    posted: FormPost,
) -> Response {
    from_form(&app, posted, true).await
}

/// `POST /admin/enable`: the form that enables.
pub(crate) async fn enable_posted<B: Backend>(
    State(app): State<Arc<App<B>>>,
    posted: FormPost,
) -> Response {
    from_form(&app, posted, false).await
}

/// A change posted from the page (its CSRF and origin checked by
/// [`FormPost`]), by an admin: back to the page with a notice, or a page
/// that says why nothing changed.
async fn from_form<B: Backend>(
    app: &App<B>,
    FormPost { who, form }: FormPost,
    stopping: bool,
) -> Response {
    if !who.is_admin() {
        return RequestRefusal::NotAdmin.into_response();
    }
    let refused = |bad: Bad| {
        message(
            app,
            &who,
            bad.status,
            "Nothing changed",
            &format!("{} ({}). Nothing was changed.", bad.error, bad.field),
        )
    };
    let change = match change_of(stopping, |name| field(&form, name)) {
        Ok(change) => change,
        Err(bad) => return refused(bad),
    };
    match checked(app, &change).await {
        Ok(None) => {}
        Ok(Some(bad)) => return refused(bad),
        Err(error) => return store_down(app, &who, &error),
    }
    let notice = if stopping { "stopped" } else { "enabled" };
    match apply(app, &who, change).await {
        Ok(_) => (
            StatusCode::SEE_OTHER,
            [(header::LOCATION, format!("/admin?notice={notice}"))],
        )
            .into_response(),
        Err(ChangeError::Store(error)) => store_down(app, &who, &error),
        Err(error) => message(
            app,
            &who,
            refused_status(&error),
            "Nothing changed",
            &format!("{error}. Nothing was changed."),
        ),
    }
}

/// The status of a change that did not happen: 409 when there was nothing
/// to change, 503 when the controls cannot be read or written, 422 when
/// they do not check.
fn refused_status(error: &ChangeError) -> StatusCode {
    match error {
        ChangeError::Unchanged(_) => StatusCode::CONFLICT,
        ChangeError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// A stop's body, in the words of its refusals.
const STOP: Posting = Posting {
    what: "A stop",
    example: "{\"target\": \"tool\", \"name\": \"refund_order\", \"reason\": \"fraud wave\"}",
    nothing: "Nothing was changed.",
    members: &["target", "name", "reason", "csrf"],
};

/// An enable's body, in the words of its refusals.
const ENABLE: Posting = Posting {
    what: "An enable",
    example: "{\"target\": \"tool\", \"name\": \"refund_order\"}",
    nothing: "Nothing was changed.",
    members: &["target", "name", "csrf"],
};

/// The person a program's request comes from, who must be an admin;
/// refused in JSON (401, 403 `admin_only`).
async fn admin_of<B: Send + Sync + 'static>(
    app: &Arc<App<B>>,
    parts: &mut axum::http::request::Parts,
) -> Result<Who, Problem> {
    let who = Who::from_request_parts(parts, app).await?;
    if who.is_admin() {
        Ok(who)
    } else {
        Err(RequestRefusal::NotAdmin.into())
    }
}

/// `GET /api/controls`: the version, what is stopped, the approvals by
/// several people, and the history; an admin's only.
pub(crate) async fn api_read<B: Backend>(
    State(app): State<Arc<App<B>>>,
    request: Request,
) -> Response {
    let (mut parts, _) = request.into_parts();
    if let Err(problem) = admin_of(&app, &mut parts).await {
        return problem.into_response();
    }
    match read_all(&app).await {
        Ok((version, controls, history)) => {
            crate::problem::json(StatusCode::OK, &controls_json(version, &controls, &history))
        }
        Err(error) => store_unavailable(&error).into_response(),
    }
}

/// `POST /api/controls/stops`: stops a target, as JSON.
pub(crate) async fn api_stop<B: Backend>(
    State(app): State<Arc<App<B>>>,
    request: Request,
) -> Response {
    from_json(&app, request, true).await
}

/// `POST /api/controls/enable`: enables a target, as JSON.
pub(crate) async fn api_enable<B: Backend>(
    State(app): State<Arc<App<B>>>,
    request: Request,
) -> Response {
    from_json(&app, request, false).await
}

/// A change posted as JSON by an admin: who asks (401, 403), the body
/// ([`json_fields`]: 415, 413, 400, 403 for a browser without its CSRF
/// token), the fields (400 naming one, 422 for an unknown tool), then the
/// change (409 `unchanged` when there is nothing to change, 503 when the
/// store fails). Answered with the version written and what is stopped now.
async fn from_json<B: Backend>(app: &Arc<App<B>>, request: Request, stopping: bool) -> Response {
    match changed_by_json(app, request, stopping).await {
        Ok(answer) => crate::problem::json(StatusCode::OK, &answer),
        Err(problem) => problem.into_response(),
    }
}

async fn changed_by_json<B: Backend>(
    app: &Arc<App<B>>,
    request: Request,
    stopping: bool,
) -> Result<Value, Problem> {
    let (mut parts, body) = request.into_parts();
    let who = admin_of(app, &mut parts).await?;
    let posting = if stopping { &STOP } else { &ENABLE };
    let fields = json_fields(app, &who, parts, body, posting).await?;
    strings(&fields, posting)?;
    let refused = |bad: Bad| {
        Problem::new(
            bad.status,
            bad.code,
            format!("{}. Nothing was changed.", bad.error),
        )
        .with("field", bad.field)
    };
    let change =
        change_of(stopping, |name| fields.get(name).and_then(Value::as_str)).map_err(refused)?;
    if let Some(bad) = checked(app, &change)
        .await
        .map_err(|error| store_unavailable(&error))?
    {
        return Err(refused(bad));
    }
    let words = change.words();
    let version = match apply(app, &who, change).await {
        Ok(version) => version,
        Err(ChangeError::Store(error)) => return Err(store_unavailable(&error)),
        Err(error) => {
            let code = match error {
                ChangeError::Unchanged(_) => "unchanged",
                ChangeError::Invalid(_) => "invalid_controls",
                _ => "controls_unreadable",
            };
            return Err(Problem::new(
                refused_status(&error),
                code,
                format!("{error}. Nothing was changed."),
            ));
        }
    };
    let stops = match controls::read(app.backend.store()).await {
        Ok((_, controls)) => controls.stops.iter().map(stop_json).collect(),
        Err(_) => Vec::new(),
    };
    Ok(json!({
        "version": version,
        "change": words,
        "by": who.name(),
        "stops": stops,
    }))
}

/// Each field given is a string (or null): else a 400 that names the
/// first that is not.
fn strings(fields: &Map<String, Value>, posting: &Posting) -> Result<(), Problem> {
    match fields
        .iter()
        .find(|(_, value)| !value.is_string() && !value.is_null())
    {
        Some((name, _)) => Err(invalid_field(
            name,
            &format!("{name:?} is a string"),
            posting,
        )),
        None => Ok(()),
    }
}

/// Another method on the controls' endpoints: 405, in JSON.
pub(crate) async fn get_only() -> Response {
    crate::problem::method_not_allowed("GET", "The controls are read with GET /api/controls.")
}

/// Another method on the endpoints that change the controls: 405, in JSON.
pub(crate) async fn post_only() -> Response {
    crate::problem::method_not_allowed(
        "POST",
        "A change of the controls is a POST with a JSON body.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(stopping: bool, fields: &[(&str, &str)]) -> Result<Change, (&'static str, u16)> {
        change_of(stopping, |name| {
            fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
        })
        .map_err(|bad| (bad.field, bad.status.as_u16()))
    }

    #[test]
    fn a_change_names_the_field_that_is_wrong() {
        let enable = change(false, &[("target", "caller"), ("name", " support ")]).unwrap();
        assert!(matches!(enable, Change::Enable(Target::Caller(id)) if id == "support"));
        let all = change(true, &[("target", "everything"), ("reason", "incident")]).unwrap();
        assert_eq!(all.words(), "stopped every call: incident");
        assert_eq!(
            change(true, &[("target", "all")]).unwrap_err(),
            ("target", 400)
        );
        assert_eq!(
            change(true, &[("target", "caller")]).unwrap_err(),
            ("name", 400)
        );
        assert_eq!(
            change(
                true,
                &[("target", "everything"), ("name", "x"), ("reason", "r")]
            )
            .unwrap_err(),
            ("name", 400)
        );
        assert_eq!(
            change(
                true,
                &[("target", "caller"), ("name", "support"), ("reason", "  ")]
            )
            .unwrap_err(),
            ("reason", 400)
        );
    }

    #[test]
    fn a_name_the_application_does_not_have_is_refused_with_the_closest() {
        let registry = Registry::default();
        let default = Caller::new("default", toolcall_core::Policy::new());
        let support = Caller::new("support", toolcall_core::Policy::new());
        let callers = [&default, &support];
        let unknown = |target: Target, callers: Option<&[&Caller]>| {
            unknown_name(&registry, callers, &target).map(|bad| (bad.code, bad.error))
        };
        assert!(unknown(Target::Caller("support".into()), Some(&callers)).is_none());
        assert!(unknown(Target::Everything, None).is_none());
        let (code, error) = unknown(Target::Caller("suport".into()), Some(&callers)).unwrap();
        assert_eq!(code, "unknown_caller");
        assert!(error.starts_with("No caller `suport`"), "{error}");
        assert!(error.contains("did you mean `support`"), "{error}");
        let (code, error) = unknown(Target::Caller("support".into()), None).unwrap();
        assert_eq!(code, "unknown_caller", "{error}");
        let (code, error) = unknown(Target::Tool("nope".into()), Some(&callers)).unwrap();
        assert_eq!(code, "unknown_tool");
        assert!(error.starts_with("No tool `nope`"), "{error}");
    }
}
