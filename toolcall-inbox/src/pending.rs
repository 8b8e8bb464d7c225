//! The inbox itself: every pending call with its arguments and its decision
//! form, and the same list as JSON.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use toolcall_core::store::{PendingApproval, now_ms};
use toolcall_core::{Store as _, ToolSpec};

use crate::access::User;
use crate::html::{Html, duration, rfc3339, segment, utc};
use crate::page::{html_response, layout, store_down};
use crate::security::{sign_in, signed_in, unauthorized};
use crate::{App, Backend, MAX_NOTE};

pub(crate) async fn index<B: Backend>(
    State(app): State<Arc<App<B>>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(token) = query.get("token") {
        return match app.options.access.by_token(token) {
            Some(user) => sign_in(user),
            None => unauthorized(),
        };
    }
    let Some((user, _)) = signed_in(&app, &headers) else {
        return unauthorized();
    };
    let now = now_ms();
    let pending = match app
        .backend
        .store()
        .pending_approvals(now, app.options.limit)
        .await
    {
        Ok(pending) => pending,
        Err(error) => return store_down(&app, user, &error),
    };
    let mut body = Html::default();
    if let Some(notice) = query.get("notice") {
        let id = query.get("id").map_or("", String::as_str);
        let text = match notice.as_str() {
            "approved" => "Approved: the agent runs it, once, on its next call with the id",
            "edited" => {
                "Approved with your edits: the agent's next call runs the edited call, checked again"
            }
            "denied" => "Denied: the agent's next call with the id is told so, with your note",
            _ => "",
        };
        if !text.is_empty() {
            body.raw("<p class=\"notice\" role=\"status\">")
                .text(text)
                .raw(" (")
                .el("<code>", id, "</code>")
                .raw(").</p>");
        }
    }
    body.raw("<p id=\"changed\" class=\"notice hidden\">The inbox changed: <a href=\"/\">reload</a>.</p>");
    let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
    body.raw("<div data-pending-ids=\"")
        .text(&ids.join(" "))
        .raw("\">");
    if pending.is_empty() {
        body.raw("<p class=\"empty\">Nothing waits for a decision.</p>");
    } else {
        body.el(
            "<p class=\"lead\">",
            &format!(
                "{} call(s) wait for a person, oldest first. Each runs only once an agent calls again with its id, after your approval.",
                pending.len()
            ),
            "</p>",
        );
    }
    for approval in &pending {
        let spec = app.backend.registry().get(&approval.tool);
        card(&mut body, approval, spec, user, now);
    }
    body.raw("</div>");
    html_response(
        StatusCode::OK,
        layout(
            &format!("Inbox ({})", pending.len()),
            &app.options.title,
            Some(user),
            "Inbox",
            &body.finish(),
        ),
    )
}

/// One pending call, with its decision form.
fn card(
    body: &mut Html,
    approval: &PendingApproval,
    spec: Option<&ToolSpec>,
    user: &User,
    now: u64,
) {
    let id = &approval.id;
    body.raw("<article class=\"approval\" data-id=\"")
        .text(id)
        .raw("\"><header>")
        .el("<h2><code class=\"tool\">", &approval.tool, "</code></h2>");
    match spec {
        Some(spec) => {
            if spec.high_risk() {
                body.raw("<span class=\"flag high-risk\">high risk</span>");
            }
            if spec.side_effect() {
                body.raw("<span class=\"flag side-effect\">side effect</span>");
            }
        }
        None => {
            body.raw("<span class=\"flag\">a tool this inbox does not know</span>");
        }
    }
    body.raw("</header>");
    if let Some(spec) = spec {
        body.el("<p class=\"desc\">", spec.description(), "</p>");
    }
    why(body, approval);
    body.raw("<dl class=\"meta\">")
        .el(
            "<dt>Session</dt><dd><code class=\"session\">",
            &approval.session,
            "</code></dd>",
        )
        .el(
            "<dt>Caller</dt><dd><code>",
            &approval.caller,
            "</code></dd>",
        )
        .raw("<dt>Asked</dt><dd><time datetime=\"")
        .text(&rfc3339(approval.created_ms))
        .raw("\">")
        .text(&utc(approval.created_ms))
        .raw("</time></dd><dt>Expires</dt><dd>")
        .text(&utc(approval.expires_ms))
        .raw(", <time class=\"countdown\" data-expires=\"")
        .text(&approval.expires_ms.to_string())
        .raw("\" datetime=\"")
        .text(&rfc3339(approval.expires_ms))
        .raw("\">in ")
        .text(&duration(approval.expires_ms.saturating_sub(now)))
        .raw("</time></dd>")
        .el("<dt>Id</dt><dd><code>", id, "</code></dd>")
        .el("<dt>Step</dt><dd>", &approval.step.to_string(), "</dd>")
        .raw("</dl>");
    arguments_table(body, &approval.arguments, spec, &approval.tainted);
    let action = format!("/approvals/{}/decide", segment(id));
    body.raw("<form method=\"post\" class=\"decide\" action=\"")
        .text(&action)
        .raw("\"><input type=\"hidden\" name=\"csrf\" value=\"")
        .text(user.csrf())
        .raw("\"><label>Note (optional, shown to the model on a denial)")
        .raw(&format!(
            "<input type=\"text\" name=\"note\" maxlength=\"{MAX_NOTE}\"></label>"
        ))
        .raw("<button type=\"submit\" name=\"action\" value=\"approve\" class=\"approve\">Approve</button>")
        .raw("<button type=\"submit\" name=\"action\" value=\"deny\" class=\"deny\">Deny</button>");
    if spec.is_some() {
        body.raw("<a class=\"edit\" href=\"")
            .text(&format!("/approvals/{}/edit", segment(id)))
            .raw("\">Approve with edits…</a>");
    }
    body.raw("</form></article>");
}

/// Why the call asks a person beyond its tool's risk, when the dispatcher
/// said so: nothing for a plain high-risk call.
pub(crate) fn why(body: &mut Html, approval: &PendingApproval) {
    let Some(reason) = approval.reason.as_deref() else {
        return;
    };
    body.raw("<p class=\"why\" role=\"note\" data-reason=\"")
        .text(reason)
        .raw("\"><b>Asked because</b> ");
    if reason == UNTRUSTED_CONTEXT {
        body.raw("this session read untrusted output (text written by others)");
    } else {
        body.text(reason);
    }
    if !approval.tainted.is_empty() {
        body.raw("; these arguments carry values read there: ");
        for (i, field) in approval.tainted.iter().enumerate() {
            if i > 0 {
                body.raw(", ");
            }
            body.el("<code>", field, "</code>");
        }
    }
    body.raw(".</p>");
}

/// What `data.reason` says when untrusted output taints a call.
const UNTRUSTED_CONTEXT: &str = "untrusted_context";

/// The validated arguments, each beside its description; those `tainted`
/// names (they carry a value read in untrusted output: the argument
/// itself, or a path into it such as `lines[0].sku`) are flagged.
pub(crate) fn arguments_table(
    body: &mut Html,
    arguments: &Value,
    spec: Option<&ToolSpec>,
    tainted: &[String],
) {
    let flag = |body: &mut Html, name: &str| {
        let carries = |path: &String| {
            path.strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        if tainted.iter().any(carries) {
            body.raw(" <span class=\"flag tainted\">read in untrusted output</span>");
        }
    };
    body.raw("<table class=\"args\"><thead><tr><th>Argument</th><th>Value</th><th>What it is</th></tr></thead><tbody>");
    let object = arguments.as_object().cloned().unwrap_or_default();
    let mut shown: Vec<&str> = Vec::new();
    if let Some(spec) = spec {
        for field in spec.fields() {
            shown.push(field.name);
            let value = object.get(field.name);
            body.raw("<tr><th scope=\"row\"><code>")
                .text(field.name)
                .raw("</code>");
            if field.sensitive {
                body.raw(" <span class=\"flag sensitive\">sensitive</span>");
            }
            flag(body, field.name);
            body.raw("</th><td class=\"value\">");
            match value {
                Some(value) => {
                    body.el("<pre>", &pretty(value), "</pre>");
                }
                None => {
                    body.raw("<i>not given</i>");
                }
            }
            body.el("</td><td class=\"about\">", field.description, "</td></tr>");
        }
    }
    for (name, value) in &object {
        if shown.contains(&name.as_str()) {
            continue;
        }
        body.el("<tr><th scope=\"row\"><code>", name, "</code>");
        flag(body, name);
        body.raw("</th>")
            .el("<td class=\"value\"><pre>", &pretty(value), "</pre></td>")
            .raw("<td class=\"about\"></td></tr>");
    }
    if !arguments.is_object() {
        body.el(
            "<tr><td colspan=\"3\"><pre>",
            &pretty(arguments),
            "</pre></td></tr>",
        );
    }
    body.raw("</tbody></table>");
}

pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The arguments as the history shows them: sensitive values redacted.
pub(crate) fn redacted(spec: Option<&ToolSpec>, arguments: &Value) -> Value {
    let mut arguments = arguments.clone();
    if let Some(spec) = spec {
        spec.redact_arguments(&mut arguments);
    }
    arguments
}

pub(crate) async fn api_pending<B: Backend>(
    State(app): State<Arc<App<B>>>,
    headers: HeaderMap,
) -> Response {
    let Some(_) = signed_in(&app, &headers) else {
        return unauthorized();
    };
    match app
        .backend
        .store()
        .pending_approvals(now_ms(), app.options.limit)
        .await
    {
        Ok(pending) => (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string(&pending).unwrap_or_else(|_| "[]".into()),
        )
            .into_response(),
        Err(error) => (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response(),
    }
}
