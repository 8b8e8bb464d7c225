//! The page around every answer, the assets, and the answers that say why
//! nothing was done.

use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use toolcall_core::life::{QuestionState, Verdict};
use toolcall_core::store::{ApprovalDecision, ApprovalEntry, PendingApproval, StoreError, now_ms};

use crate::App;
use crate::html::{Html, utc};
use crate::problem::{Problem, is_api};
use crate::security::{RequestRefusal, Who};

/// The whole page around `body`. `title` and `app` are escaped here.
pub(crate) fn layout(
    title: &str,
    app: &str,
    user: Option<&Who>,
    current: &str,
    body: &str,
) -> Html {
    let mut page = Html::default();
    page.raw("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        .el("<title>", &format!("{title} · {app} approvals"), "</title>")
        .raw("<link rel=\"stylesheet\" href=\"/assets/inbox.css\"></head><body>")
        .raw("<header class=\"top\">")
        .el("<h1>", &format!("{app} · approvals"), "</h1>");
    if let Some(user) = user {
        page.raw("<nav>");
        let admin = user.is_admin().then_some(("/admin", "Operators"));
        for (path, name) in [
            ("/", "Inbox"),
            ("/history", "History"),
            ("/metrics", "Metrics"),
            ("/sessions", "Sign-ins"),
        ]
        .into_iter()
        .chain(admin)
        {
            let class = if name == current {
                " class=\"current\""
            } else {
                ""
            };
            page.raw(&format!("<a href=\"{path}\"{class}>{name}</a>"));
        }
        page.raw("</nav><span class=\"who\">signed in as ")
            .el("<b>", user.name(), "</b>")
            .raw(" <form method=\"post\" action=\"/sign-out\">")
            .raw("<input type=\"hidden\" name=\"csrf\" value=\"")
            .value(user.csrf())
            .raw("\"><button class=\"link\">sign out</button></form></span>");
    }
    page.raw("</header><main>")
        .raw(body)
        .raw("</main><script src=\"/assets/inbox.js\"></script></body></html>");
    page
}

pub(crate) fn html_response(status: StatusCode, page: Html) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page.finish(),
    )
        .into_response()
}

/// The page of each refusal: what happened, and what to do.
impl IntoResponse for RequestRefusal {
    fn into_response(self) -> Response {
        let lead = |text: &str| {
            let mut body = Html::default();
            body.raw("<p class=\"lead\">").text(text).raw("</p>");
            body.finish()
        };
        let (title, body) = match &self {
            RequestRefusal::Unauthorized { .. } => (
                "Sign in",
                "<p class=\"lead\">Sign in with the address the inbox printed when it \
                 started (<code>http://…/?token=…</code>), or send \
                 <code>Authorization: Bearer TOKEN</code>.</p>"
                    .to_owned(),
            ),
            RequestRefusal::Forbidden => (
                "Refused",
                "<p class=\"lead\">This form did not come from the inbox's own page \
                 (no valid CSRF token, or another origin): nothing was decided. \
                 Reload the inbox and decide there.</p>"
                    .to_owned(),
            ),
            RequestRefusal::NotAdmin => ("Admins only", lead(&self.to_string())),
            RequestRefusal::TooManyAttempts { .. } => {
                ("Too many attempts", lead(&self.to_string()))
            }
            RequestRefusal::NoRandomness(_) => ("Not signed in", lead(&self.to_string())),
            RequestRefusal::Twice(_) => ("Nothing done", lead(&self.to_string())),
        };
        let mut response = html_response(self.status(), layout(title, "toolcall", None, "", &body));
        response.headers_mut().extend(self.headers());
        response
    }
}

pub(crate) fn message<B>(
    app: &App<B>,
    user: &Who,
    status: StatusCode,
    title: &str,
    text: &str,
) -> Response {
    let mut body = Html::default();
    body.el("<h2>", title, "</h2>")
        .el("<p class=\"lead\">", text, "</p>")
        .raw("<p><a href=\"/\">Back to the inbox</a></p>");
    html_response(
        status,
        layout(title, &app.options.title, Some(user), "", &body.finish()),
    )
}

pub(crate) fn store_down<B>(app: &App<B>, user: &Who, error: &StoreError) -> Response {
    message(
        app,
        user,
        StatusCode::SERVICE_UNAVAILABLE,
        "The store cannot be reached",
        &format!("{error}. Nothing was decided; try again."),
    )
}

pub(crate) async fn css(_signed_in: Who) -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../assets/inbox.css"),
    )
        .into_response()
}

pub(crate) async fn js(_signed_in: Who) -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../assets/inbox.js"),
    )
        .into_response()
}

/// Nothing under this path: in JSON under `/api/`.
pub(crate) async fn not_found(uri: Uri) -> Response {
    if is_api(uri.path()) {
        return Problem::new(StatusCode::NOT_FOUND, "not_found", "No such endpoint.")
            .into_response();
    }
    (StatusCode::NOT_FOUND, "not found").into_response()
}

pub(crate) fn unknown<B>(app: &App<B>, user: &Who) -> Response {
    message(
        app,
        user,
        StatusCode::NOT_FOUND,
        "No such approval",
        UNKNOWN,
    )
}

/// What the answer to an id nothing waits under says.
pub(crate) const UNKNOWN: &str =
    "Nothing waits under this id: it was never asked, or it is gone (used, or expired and purged).";

/// The answer for an approval that can no longer be decided, if it cannot.
pub(crate) fn closed<B>(app: &App<B>, user: &Who, entry: &ApprovalEntry) -> Option<Response> {
    Some(match closed_as(entry, now_ms())? {
        Closed::Decided(decision) => message(
            app,
            user,
            StatusCode::CONFLICT,
            "Already decided",
            &already_decided(&entry.approval, decision),
        ),
        Closed::Used => message(
            app,
            user,
            StatusCode::CONFLICT,
            "Already used",
            ALREADY_USED,
        ),
        Closed::Expired => expired(app, user),
    })
}

/// What the answer to a decided question says.
pub(crate) fn already_decided(question: &PendingApproval, decision: &ApprovalDecision) -> String {
    let verb = match Verdict::of(question.kind(), decision) {
        Verdict::Approve => "approved",
        Verdict::Edit(_) => "approved with edits",
        Verdict::Deny => "denied",
        Verdict::Happened => "said it happened of",
        Verdict::NotHappened => "said it did not happen of",
    };
    format!(
        "{} {verb} it at {}; a decision is final.",
        decision.by,
        utc(decision.decided_ms)
    )
}

/// What the answer to a question the host used says.
pub(crate) const ALREADY_USED: &str = "The agent's host already decided and used this approval.";

/// What the answer to an expired question says.
pub(crate) const EXPIRED: &str = "This approval ran out of time before anyone decided: the call will not run. The model has to ask again.";

pub(crate) fn expired<B>(app: &App<B>, user: &Who) -> Response {
    message(app, user, StatusCode::GONE, "Expired", EXPIRED)
}

/// Why a question can no longer be decided, if it cannot.
pub(crate) enum Closed<'a> {
    /// Someone decided it: this decision stands.
    Decided(&'a ApprovalDecision),
    /// The agent's host decided and used it.
    Used,
    /// It ran out of time before anyone decided.
    Expired,
}

/// Whether `entry` can no longer be decided at `now`, and why, by its
/// [state](ApprovalEntry::state): expired wherever it is read (an approval
/// nobody carried out in time reads expired, decided or not).
pub(crate) fn closed_as(entry: &ApprovalEntry, now: u64) -> Option<Closed<'_>> {
    match entry.state(now) {
        state if state.is_open() => None,
        QuestionState::Expired => Some(Closed::Expired),
        _ => Some(match &entry.approval.decision {
            Some(decision) => Closed::Decided(decision),
            None => Closed::Used,
        }),
    }
}
