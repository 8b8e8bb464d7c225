//! The page around every answer, the assets, and the answers that say why
//! nothing was done.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use toolcall_core::store::{ApprovalEntry, StoreError, now_ms};

use crate::App;
use crate::html::{Html, utc};
use crate::security::{Refusal, Who};

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
        for (path, name) in [
            ("/", "Inbox"),
            ("/history", "History"),
            ("/metrics", "Metrics"),
            ("/sessions", "Sign-ins"),
        ] {
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
            .text(user.csrf())
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
impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let lead = |text: &str| {
            let mut body = Html::default();
            body.raw("<p class=\"lead\">").text(text).raw("</p>");
            body.finish()
        };
        match self {
            Refusal::Unauthorized { clear } => {
                let body = "<p class=\"lead\">Sign in with the address the inbox printed when it \
                            started (<code>http://…/?token=…</code>), or send \
                            <code>Authorization: Bearer TOKEN</code>.</p>";
                let mut response = html_response(
                    StatusCode::UNAUTHORIZED,
                    layout("Sign in", "toolcall", None, "", body),
                );
                let headers = response.headers_mut();
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"toolcall inbox\""),
                );
                if let Some(value) = clear.and_then(|clear| HeaderValue::from_str(&clear).ok()) {
                    headers.insert(header::SET_COOKIE, value);
                }
                response
            }
            Refusal::Forbidden => html_response(
                StatusCode::FORBIDDEN,
                layout(
                    "Refused",
                    "toolcall",
                    None,
                    "",
                    "<p class=\"lead\">This form did not come from the inbox's own page \
                     (no valid CSRF token, or another origin): nothing was decided. \
                     Reload the inbox and decide there.</p>",
                ),
            ),
            Refusal::TooManyAttempts { retry_after } => {
                let body = lead(&format!(
                    "Too many wrong tokens from this address: no sign-in from it is accepted, \
                     not even a right one, for {retry_after} s."
                ));
                let mut response = html_response(
                    StatusCode::TOO_MANY_REQUESTS,
                    layout("Too many attempts", "toolcall", None, "", &body),
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
                response
            }
            Refusal::NoRandomness(error) => html_response(
                StatusCode::SERVICE_UNAVAILABLE,
                layout(
                    "Not signed in",
                    "toolcall",
                    None,
                    "",
                    &lead(&format!(
                        "No randomness for a sign-in ({error}): try again."
                    )),
                ),
            ),
        }
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

pub(crate) async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

pub(crate) fn unknown<B>(app: &App<B>, user: &Who) -> Response {
    message(
        app,
        user,
        StatusCode::NOT_FOUND,
        "No such approval",
        "Nothing waits under this id: it was never asked, or it is gone (used, or expired and purged).",
    )
}

/// The answer for an approval that can no longer be decided, if it cannot.
pub(crate) fn closed<B>(app: &App<B>, user: &Who, entry: &ApprovalEntry) -> Option<Response> {
    if let Some(decision) = &entry.approval.decision {
        let verb = if decision.approved {
            "approved"
        } else {
            "denied"
        };
        return Some(message(
            app,
            user,
            StatusCode::CONFLICT,
            "Already decided",
            &format!(
                "{} {verb} it at {}; a decision is final.",
                decision.by,
                utc(decision.decided_ms)
            ),
        ));
    }
    if entry.used_ms.is_some() {
        return Some(message(
            app,
            user,
            StatusCode::CONFLICT,
            "Already used",
            "The agent's host already decided and used this approval.",
        ));
    }
    if entry.approval.expires_ms <= now_ms() {
        return Some(expired(app, user));
    }
    None
}

pub(crate) fn expired<B>(app: &App<B>, user: &Who) -> Response {
    message(
        app,
        user,
        StatusCode::GONE,
        "Expired",
        "This approval ran out of time before anyone decided: the call will not run. The model has to ask again.",
    )
}
