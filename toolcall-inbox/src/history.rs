//! The history: each decision, who took it, and what came of it.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use toolcall_core::store::Store as _;
use toolcall_core::store::{ApprovalEntry, now_ms};

use crate::html::{Html, utc};
use crate::page::{html_response, layout, store_down};
use crate::pending::{is_in_doubt, pretty, redacted};
use crate::security::Who;
use crate::{App, Backend};

/// What came of a decided approval: a class for the page and the words.
pub(crate) fn came_of(entry: &ApprovalEntry, now: u64) -> (&'static str, String) {
    let approved = entry.approval.decision.as_ref().is_some_and(|d| d.approved);
    if !approved && is_in_doubt(&entry.approval) {
        // It happened: nothing runs again, whatever the agent's next call.
        return ("settled", "not run again: it had taken effect".into());
    }
    match (&entry.result, entry.used_ms) {
        (Some(result), _) if result.code == "CONFIRMATION_EXPIRED" => (
            "expired",
            "expired: the agent came back too late; not run".into(),
        ),
        (Some(result), _) if !approved => (
            "denied",
            format!("denied: the model was told ({})", result.code),
        ),
        (Some(result), _) if result.replayed => (
            "replayed",
            "replayed: it had run before; not run again".into(),
        ),
        (Some(result), _) if result.ok => ("ran", "ran once".into()),
        (Some(result), _) => ("failed", format!("failed: {}", result.code)),
        (None, Some(_)) => ("used", "used by the agent's call".into()),
        (None, None) if entry.approval.expires_ms <= now => (
            "expired",
            "expired: the agent did not come back in time; not run".into(),
        ),
        (None, None) if !approved => (
            "denied",
            "denied: the model hears it on its next call".into(),
        ),
        (None, None) => (
            "waiting",
            "approved: waits for the agent's next call".into(),
        ),
    }
}

pub(crate) async fn history<B: Backend>(State(app): State<Arc<App<B>>>, who: Who) -> Response {
    let user = &who;
    let decided = match app
        .backend
        .store()
        .decided_approvals(app.options.limit)
        .await
    {
        Ok(decided) => decided,
        Err(error) => return store_down(&app, user, &error),
    };
    let now = now_ms();
    let mut body = Html::default();
    if decided.is_empty() {
        body.raw("<p class=\"empty\">No decision yet.</p>");
    } else {
        body.raw("<table class=\"list history\"><thead><tr><th>Decided</th><th>Tool and arguments</th><th>Decision</th><th>By</th><th>What came of it</th></tr></thead><tbody>");
    }
    for entry in &decided {
        let Some(decision) = &entry.approval.decision else {
            continue;
        };
        let spec = app.backend.registry().get(&entry.approval.tool);
        let (class, outcome) = came_of(entry, now);
        body.raw("<tr data-id=\"")
            .text(&entry.approval.id)
            .raw("\"><td>")
            .text(&utc(decision.decided_ms))
            .raw("<br><code>")
            .text(&entry.approval.id)
            .raw("</code></td><td><code class=\"tool\">")
            .text(&entry.approval.tool)
            .raw("</code><pre>")
            .lines(&pretty(&redacted(spec, &entry.approval.arguments)))
            .raw("</pre>")
            .el("<small>session <code>", &entry.approval.session, "</code>")
            .el(", caller <code>", &entry.approval.caller, "</code>");
        if let Some(principal) = &entry.approval.principal {
            body.el(", on behalf of <code>", &principal.to_string(), "</code>");
        }
        body.raw("</small></td><td>");
        match (&decision.edited_arguments, decision.approved) {
            (_, approved) if is_in_doubt(&entry.approval) => {
                if approved {
                    body.raw("<b class=\"outcome settled\">settled: it did not happen</b>");
                } else {
                    body.raw("<b class=\"outcome settled\">settled: it happened</b>");
                }
            }
            (_, false) => {
                body.raw("<b class=\"outcome denied\">denied</b>");
            }
            (Some(edited), true) => {
                body.raw("<b class=\"outcome ran\">approved with edits</b><pre>")
                    .lines(&pretty(&redacted(spec, edited)))
                    .raw("</pre>");
            }
            (None, true) => {
                body.raw("<b class=\"outcome ran\">approved</b>");
            }
        }
        if !decision.note.is_empty() {
            body.el("<p class=\"note\">“", &decision.note, "”</p>");
        }
        body.el("</td><td class=\"by\">", &decision.by, "</td>")
            .raw("<td><span class=\"outcome ")
            .raw(class)
            .raw("\">")
            .text(&outcome)
            .raw("</span></td></tr>");
    }
    if !decided.is_empty() {
        body.raw("</tbody></table>");
    }
    html_response(
        StatusCode::OK,
        layout(
            "History",
            &app.options.title,
            Some(user),
            "History",
            &body.finish(),
        ),
    )
}
