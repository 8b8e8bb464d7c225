//! The history: each decision, who took it, and what came of it.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use toolcall_core::life::{QuestionState, Verdict};
use toolcall_core::store::{ApprovalEntry, now_ms};

use crate::html::{Html, utc};
use crate::page::{html_response, layout, store_down};
use crate::pending::{pretty, redacted};
use crate::security::Who;
use crate::{App, Backend};
use toolcall_core::store::prelude::*;

/// What came of a decided question, by its [state](ApprovalEntry::state):
/// a class for the page and the words.
pub(crate) fn came_of(entry: &ApprovalEntry, now: u64) -> (&'static str, String) {
    match entry.state(now) {
        QuestionState::Done(Verdict::Happened, _) | QuestionState::Decided(Verdict::Happened) => {
            // It happened: nothing runs again, whatever the agent's next call.
            ("settled", "not run again: it had taken effect".into())
        }
        QuestionState::Done(verdict, came) => match came.code.as_str() {
            "CONFIRMATION_EXPIRED" => (
                "expired",
                "expired: the agent came back too late; not run".into(),
            ),
            code if verdict == Verdict::Deny => {
                ("denied", format!("denied: the model was told ({code})"))
            }
            _ if came.replayed => (
                "replayed",
                "replayed: it had run before; not run again".into(),
            ),
            _ if came.ok => ("ran", "ran once".into()),
            code => ("failed", format!("failed: {code}")),
        },
        QuestionState::Running(_) => ("used", "used by the agent's call".into()),
        QuestionState::Expired => (
            "expired",
            "expired: the agent did not come back in time; not run".into(),
        ),
        QuestionState::Decided(Verdict::Deny) => (
            "denied",
            "denied: the model hears it on its next call".into(),
        ),
        QuestionState::Decided(Verdict::NotHappened) => (
            "waiting",
            "it did not happen: runs once on the agent's next call".into(),
        ),
        _ => (
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
        match Verdict::of(entry.approval.kind(), decision) {
            Verdict::Happened => {
                body.raw("<b class=\"outcome settled\">settled: it happened</b>");
            }
            Verdict::NotHappened => {
                body.raw("<b class=\"outcome settled\">settled: it did not happen</b>");
            }
            Verdict::Deny => {
                body.raw("<b class=\"outcome denied\">denied</b>");
            }
            Verdict::Edit(edited) => {
                body.raw("<b class=\"outcome ran\">approved with edits</b><pre>")
                    .lines(&pretty(&redacted(spec, &edited)))
                    .raw("</pre>");
            }
            Verdict::Approve => {
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
