//! The approval inbox of [toolcall](https://docs.rs/toolcall): one page
//! where the person on duty sees every pending high-risk call with its
//! exact arguments, approves, denies or edits it, and later sees what came
//! of it, over the same [`Store`] the agents use, so that an approval asked
//! in one process is decided here and runs in another.
//!
//! ```no_run
//! # async fn demo(store: toolcall_core::MemoryStore, registry: toolcall_core::Registry)
//! # -> std::io::Result<()> {
//! use std::sync::Arc;
//! use toolcall_inbox::{Access, Options, Parts};
//!
//! let access = Access::generate("operator").expect("randomness");
//! let url = format!("http://127.0.0.1:8080/?token={}", access.users()[0].token());
//! println!("sign in at {url}");
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! toolcall_inbox::serve(Arc::new(Parts { store, registry }), Options::new(access), listener)
//!     .await
//! # }
//! ```
//!
//! The command line's `serve` (`toolcall-cli`) runs it for an application.
//!
//! # Pages
//!
//! | path | what |
//! |---|---|
//! | `GET /` | the inbox: every pending call, oldest first, with its tool, description, flags, validated arguments beside their descriptions, session, caller, when it was asked and a countdown to its expiry; approve or deny with a note, or edit |
//! | `GET /approvals/{id}/edit` | the arguments as a form: the edited call is validated here, and checked and policed again by the agent's dispatcher, as a new call |
//! | `POST /approvals/{id}/decide` | `action` = `approve`, `deny` or `edit` (with `arg:NAME` fields), `note`, `csrf` |
//! | `GET /history` | each decision, who took it, and what came of it |
//! | `GET /metrics` | the audit log's metrics (`report`'s), as inline SVG charts |
//! | `GET /api/pending` | the pending approvals as JSON |
//!
//! # Security
//!
//! The page can move money, so:
//!
//! * every request needs a token ([`Access`]): `Authorization: Bearer
//!   TOKEN`, or the cookie a browser gets by opening `/?token=TOKEN` once
//!   (`HttpOnly`, `SameSite=Strict`, and a redirect takes the token out of
//!   the address bar); without one, no page shows any data (401);
//! * a decision is a `POST` that carries the person's CSRF token, and whose
//!   `Origin` (when the browser sends one) is the inbox itself (403
//!   otherwise);
//! * every piece of text from a model, a person or the store is escaped by
//!   one function ([`esc`]), in elements and attributes alike; the content
//!   security policy allows no inline script or style, only this server's
//!   own files;
//! * a decision is atomic in the store ([`Store::decide_approval`]): a
//!   double click is one decision, and a decided, expired or unknown
//!   approval cannot be decided (409, 410, 404);
//! * each decision records the name of the person whose token made it.
//!
//! Bind it to a loopback address (the command line's default is
//! `127.0.0.1:8080`); put it behind a TLS proxy to reach it from elsewhere.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod access;
mod chart;
mod html;

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};
use toolcall_core::store::{
    ApprovalDecision, ApprovalEntry, DecideOutcome, PendingApproval, StoreError, now_ms,
};
use toolcall_core::{AuditRecord, Dispatcher, Registry, Store, ToolSpec};

pub use access::{Access, AccessError, DEFAULT_NAME, MIN_TOKEN_LEN, User};
pub use html::esc;

use html::{Html, duration, rfc3339, segment, utc};

/// What the inbox reads and decides through: a store and the tools.
pub trait Backend: Send + Sync + 'static {
    /// The store the agents share.
    type Store: Store;
    /// The store.
    fn store(&self) -> &Self::Store;
    /// The tools, for their descriptions, flags and validation.
    fn registry(&self) -> &Registry;
}

/// An application's dispatcher: its store and its tools.
impl<S: Any + Send + Sync, St: Store> Backend for Dispatcher<S, St> {
    type Store = St;

    fn store(&self) -> &St {
        Dispatcher::store(self)
    }

    fn registry(&self) -> &Registry {
        Dispatcher::registry(self)
    }
}

/// A store and the tools, without a dispatcher.
#[derive(Debug)]
pub struct Parts<St> {
    /// The store the agents share.
    pub store: St,
    /// The tools.
    pub registry: Registry,
}

impl<St: Store> Backend for Parts<St> {
    type Store = St;

    fn store(&self) -> &St {
        &self.store
    }

    fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// Computes the metrics of `report` over audit records, as its JSON
/// (`toolcall_cli::report::Report::to_json`): the command line passes it in.
pub type Summarize = Arc<dyn Fn(&[AuditRecord]) -> Value + Send + Sync>;

/// How the inbox is set up.
#[non_exhaustive]
pub struct Options {
    /// Who may sign in.
    pub access: Access,
    /// The application's name, in every page's title.
    pub title: String,
    /// The audit log (JSON lines) whose metrics `/metrics` shows.
    pub audit: Option<PathBuf>,
    /// The metrics of an audit log; without it, `/metrics` counts codes itself.
    pub summarize: Option<Summarize>,
    /// The most approvals a page lists (100 by default).
    pub limit: usize,
}

impl Options {
    /// These people, and the defaults.
    pub fn new(access: Access) -> Self {
        Options {
            access,
            title: "toolcall".into(),
            audit: None,
            summarize: None,
            limit: 100,
        }
    }

    /// The application's name.
    pub fn title(mut self, title: &str) -> Self {
        title.clone_into(&mut self.title);
        self
    }

    /// The audit log `/metrics` reads.
    pub fn audit(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit = Some(path.into());
        self
    }

    /// How `/metrics` computes the report.
    pub fn summarize(mut self, summarize: Summarize) -> Self {
        self.summarize = Some(summarize);
        self
    }
}

/// The longest note a person may write, in characters.
pub const MAX_NOTE: usize = 1000;

struct App<B> {
    backend: Arc<B>,
    options: Options,
}

/// The inbox's routes over `backend`.
pub fn router<B: Backend>(backend: Arc<B>, options: Options) -> Router {
    let app = Arc::new(App { backend, options });
    Router::new()
        .route("/", get(index::<B>))
        .route("/history", get(history::<B>))
        .route("/metrics", get(metrics::<B>))
        .route("/approvals/{id}/edit", get(edit::<B>))
        .route("/approvals/{id}/decide", post(decide::<B>))
        .route("/api/pending", get(api_pending::<B>))
        .route("/sign-out", post(sign_out::<B>))
        .route("/assets/inbox.css", get(css::<B>))
        .route("/assets/inbox.js", get(js::<B>))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(256 * 1024))
        .layer(axum::middleware::map_response(secure))
        .with_state(app)
}

/// Serves the inbox on `listener` until the process ends.
pub async fn serve<B: Backend>(
    backend: Arc<B>,
    options: Options,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    axum::serve(listener, router(backend, options)).await
}

/// The address that signs `user` in, for an inbox listening on `addr`
/// (`127.0.0.1:8080`).
pub fn sign_in_url(addr: &str, user: &User) -> String {
    format!("http://{addr}/?token={}", segment(user.token()))
}

// ---------------------------------------------------------------- security

/// Headers on every answer: nothing but this server's own files runs or
/// styles the page, no framing, no referrer beyond the inbox itself (a
/// browser then still sends `Origin` with a form, which the CSRF check
/// reads), nothing cached.
async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: &'static str, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(headers, "x-frame-options", "DENY");
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "referrer-policy", "same-origin");
    set(headers, "cache-control", "no-store");
    set(headers, "cross-origin-opener-policy", "same-origin");
    set(headers, "cross-origin-resource-policy", "same-origin");
    response
}

/// How a request proved who sent it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// `Authorization: Bearer`: a program, not a browser; no CSRF possible.
    Bearer,
    /// The sign-in cookie: a browser, so forms carry the CSRF token.
    Cookie,
}

fn signed_in<'a, B>(app: &'a App<B>, headers: &HeaderMap) -> Option<(&'a User, Via)> {
    let access = &app.options.access;
    if let Some(token) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return access
            .by_token(token.trim())
            .map(|user| (user, Via::Bearer));
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(access::COOKIE)?.strip_prefix('='))
        .find_map(|value| access.by_cookie(value))
        .map(|user| (user, Via::Cookie))
}

/// Whether a browser's form submission comes from the inbox's own page:
/// its CSRF token, and its `Origin` and `Sec-Fetch-Site` when sent.
fn same_origin_form(user: &User, headers: &HeaderMap, csrf: Option<&str>) -> bool {
    let Some(csrf) = csrf else { return false };
    if !access::same(csrf.as_bytes(), user.csrf().as_bytes()) {
        return false;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return false;
    }
    if let Some(origin) = header("origin") {
        let Some(host) = header("host") else {
            return false;
        };
        return origin == format!("http://{host}") || origin == format!("https://{host}");
    }
    true
}

fn unauthorized() -> Response {
    let mut body = Html::default();
    body.raw(
        "<p class=\"lead\">Sign in with the address the inbox printed when it started \
         (<code>http://…/?token=…</code>), or send <code>Authorization: Bearer TOKEN</code>.</p>",
    );
    let page = layout("Sign in", "toolcall", None, "", &body.finish());
    let mut response = html_response(StatusCode::UNAUTHORIZED, page);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"toolcall inbox\""),
    );
    response
}

fn forbidden() -> Response {
    let body = "<p class=\"lead\">This form did not come from the inbox's own page \
                (no valid CSRF token, or another origin): nothing was decided. \
                Reload the inbox and decide there.</p>";
    html_response(
        StatusCode::FORBIDDEN,
        layout("Refused", "toolcall", None, "", body),
    )
}

// ------------------------------------------------------------------ pages

/// The whole page around `body`. `title` and `app` are escaped here.
fn layout(title: &str, app: &str, user: Option<&User>, current: &str, body: &str) -> Html {
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

fn html_response(status: StatusCode, page: Html) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page.finish(),
    )
        .into_response()
}

fn message<B>(app: &App<B>, user: &User, status: StatusCode, title: &str, text: &str) -> Response {
    let mut body = Html::default();
    body.el("<h2>", title, "</h2>")
        .el("<p class=\"lead\">", text, "</p>")
        .raw("<p><a href=\"/\">Back to the inbox</a></p>");
    html_response(
        status,
        layout(title, &app.options.title, Some(user), "", &body.finish()),
    )
}

fn store_down<B>(app: &App<B>, user: &User, error: &StoreError) -> Response {
    message(
        app,
        user,
        StatusCode::SERVICE_UNAVAILABLE,
        "The store cannot be reached",
        &format!("{error}. Nothing was decided; try again."),
    )
}

async fn css<B: Backend>(State(app): State<Arc<App<B>>>, headers: HeaderMap) -> Response {
    if signed_in(&app, &headers).is_none() {
        return unauthorized();
    }
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../assets/inbox.css"),
    )
        .into_response()
}

async fn js<B: Backend>(State(app): State<Arc<App<B>>>, headers: HeaderMap) -> Response {
    if signed_in(&app, &headers).is_none() {
        return unauthorized();
    }
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../assets/inbox.js"),
    )
        .into_response()
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

/// `/?token=...` signs in: a cookie, and a redirect that takes the token
/// out of the address bar and the history.
fn sign_in(user: &User) -> Response {
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        access::COOKIE,
        user.cookie()
    );
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn sign_out<B: Backend>(
    State(app): State<Arc<App<B>>>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let Some((user, via)) = signed_in(&app, &headers) else {
        return unauthorized();
    };
    if via == Via::Cookie && !same_origin_form(user, &headers, field(&form, "csrf")) {
        return forbidden();
    }
    let cookie = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        access::COOKIE
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/".to_owned()),
            (header::SET_COOKIE, cookie),
        ],
    )
        .into_response()
}

fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

async fn index<B: Backend>(
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
    arguments_table(body, &approval.arguments, spec);
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

/// The validated arguments, each beside its description.
fn arguments_table(body: &mut Html, arguments: &Value, spec: Option<&ToolSpec>) {
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
        body.el("<tr><th scope=\"row\"><code>", name, "</code></th>")
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

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The arguments as the history shows them: sensitive values redacted.
fn redacted(spec: Option<&ToolSpec>, arguments: &Value) -> Value {
    let mut arguments = arguments.clone();
    if let Some(spec) = spec {
        spec.redact_arguments(&mut arguments);
    }
    arguments
}

async fn api_pending<B: Backend>(State(app): State<Arc<App<B>>>, headers: HeaderMap) -> Response {
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

// ---------------------------------------------------------------- editing

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
/// person typed) and the problems found.
fn edit_page<B>(
    app: &App<B>,
    user: &User,
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
        .el("<p class=\"desc\">", spec.description(), "</p>")
        .raw("<p class=\"lead\">The call runs with these arguments instead of the model's: they are validated now, and checked and policed again by the agent, as a new call. The model is told that a person changed them.</p>");
    if !problems.is_empty() {
        body.raw("<div class=\"notice bad problems\" role=\"alert\"><b>Not valid, nothing was decided:</b><ul>");
        for problem in problems {
            body.el("<li>", problem, "</li>");
        }
        body.raw("</ul></div>");
    }
    body.raw("<p>The model asked for:</p>");
    arguments_table(&mut body, &approval.arguments, Some(spec));
    body.raw("<form method=\"post\" class=\"edit\" action=\"")
        .text(&format!("/approvals/{}/decide", segment(&approval.id)))
        .raw("\"><input type=\"hidden\" name=\"csrf\" value=\"")
        .text(user.csrf())
        .raw("\"><input type=\"hidden\" name=\"action\" value=\"edit\"><table class=\"args\"><tbody>");
    for field in spec.fields() {
        let value = values.get(field.name).map_or("", String::as_str);
        let kind = if is_text_field(spec, field.name) {
            "text"
        } else {
            "JSON"
        };
        body.raw("<tr><th scope=\"row\"><label for=\"arg-")
            .text(field.name)
            .raw("\"><code>")
            .text(field.name)
            .raw("</code></label></th><td class=\"value\"><textarea rows=\"1\" id=\"arg-")
            .text(field.name)
            .raw("\" name=\"arg:")
            .text(field.name)
            .raw("\">")
            .text(value)
            .raw("</textarea></td>")
            .el(
                "<td class=\"about\">",
                &format!("{} ({kind})", field.description),
                "</td></tr>",
            );
    }
    body.raw("</tbody></table><label>Note (optional)<input type=\"text\" name=\"note\" value=\"")
        .text(note)
        .raw(&format!("\" maxlength=\"{MAX_NOTE}\"></label>"))
        .raw("<p><button type=\"submit\" class=\"approve\">Approve with these arguments</button> <a href=\"/\">Cancel</a></p></form></article>");
    layout("Edit", &app.options.title, Some(user), "", &body.finish())
}

async fn edit<B: Backend>(
    State(app): State<Arc<App<B>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some((user, _)) = signed_in(&app, &headers) else {
        return unauthorized();
    };
    let entry = match app.backend.store().approval(&id).await {
        Ok(Some(entry)) => entry,
        Ok(None) => return unknown(&app, user),
        Err(error) => return store_down(&app, user, &error),
    };
    if let Some(closed) = closed(&app, user, &entry) {
        return closed;
    }
    let Some(spec) = app.backend.registry().get(&entry.approval.tool) else {
        return message(
            &app,
            user,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Cannot edit",
            "This inbox does not know the tool, so it cannot validate edited arguments. Approve or deny it as it is.",
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
        edit_page(&app, user, &entry.approval, spec, &values, "", &[]),
    )
}

fn unknown<B>(app: &App<B>, user: &User) -> Response {
    message(
        app,
        user,
        StatusCode::NOT_FOUND,
        "No such approval",
        "Nothing waits under this id: it was never asked, or it is gone (used, or expired and purged).",
    )
}

/// The answer for an approval that can no longer be decided, if it cannot.
fn closed<B>(app: &App<B>, user: &User, entry: &ApprovalEntry) -> Option<Response> {
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

fn expired<B>(app: &App<B>, user: &User) -> Response {
    message(
        app,
        user,
        StatusCode::GONE,
        "Expired",
        "This approval ran out of time before anyone decided: the call will not run. The model has to ask again.",
    )
}

async fn decide<B: Backend>(
    State(app): State<Arc<App<B>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let Some((user, via)) = signed_in(&app, &headers) else {
        return unauthorized();
    };
    if via == Via::Cookie && !same_origin_form(user, &headers, field(&form, "csrf")) {
        return forbidden();
    }
    let note = field(&form, "note").unwrap_or("").trim().to_owned();
    if note.chars().count() > MAX_NOTE {
        return message(
            &app,
            user,
            StatusCode::BAD_REQUEST,
            "Note too long",
            &format!("A note has at most {MAX_NOTE} characters. Nothing was decided."),
        );
    }
    let action = field(&form, "action").unwrap_or("");
    let store = app.backend.store();
    let now = now_ms();
    let mut edited = None;
    match action {
        "approve" | "deny" => {}
        "edit" => {
            let entry = match store.approval(&id).await {
                Ok(Some(entry)) => entry,
                Ok(None) => return unknown(&app, user),
                Err(error) => return store_down(&app, user, &error),
            };
            if let Some(closed) = closed(&app, user, &entry) {
                return closed;
            }
            let Some(spec) = app.backend.registry().get(&entry.approval.tool) else {
                return message(
                    &app,
                    user,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Cannot edit",
                    "This inbox does not know the tool.",
                );
            };
            let checked = edited_arguments(spec, &form).and_then(|arguments| {
                spec.validate_arguments(&arguments)
                    .map(|()| arguments)
                    .map_err(|errors| errors.problems().to_vec())
            });
            match checked {
                Ok(arguments) if arguments == entry.approval.arguments => {}
                Ok(arguments) => edited = Some(arguments),
                Err(problems) => {
                    let values = spec
                        .fields()
                        .iter()
                        .map(|f| {
                            let typed = field(&form, &format!("arg:{}", f.name)).unwrap_or("");
                            (f.name.to_owned(), typed.to_owned())
                        })
                        .collect();
                    return html_response(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        edit_page(&app, user, &entry.approval, spec, &values, &note, &problems),
                    );
                }
            }
        }
        _ => {
            return message(
                &app,
                user,
                StatusCode::BAD_REQUEST,
                "No decision",
                "Approve, deny or edit: nothing was decided.",
            );
        }
    }
    let decision = ApprovalDecision {
        approved: action != "deny",
        by: user.name().to_owned(),
        note,
        edited_arguments: edited,
        decided_ms: now,
    };
    let notice = match (decision.approved, decision.edited_arguments.is_some()) {
        (false, _) => "denied",
        (true, true) => "edited",
        (true, false) => "approved",
    };
    let done = || {
        (
            StatusCode::SEE_OTHER,
            [(
                header::LOCATION,
                format!("/?notice={notice}&id={}", segment(&id)),
            )],
        )
            .into_response()
    };
    match store.decide_approval(&id, &decision, now).await {
        Ok(DecideOutcome::Decided) => done(),
        Ok(DecideOutcome::AlreadyDecided) => match store.approval(&id).await {
            // The same person's same decision again (a double click): one
            // decision, and the same answer.
            Ok(Some(ApprovalEntry {
                approval:
                    PendingApproval {
                        decision: Some(kept),
                        ..
                    },
                ..
            })) if kept.approved == decision.approved
                && kept.by == decision.by
                && kept.note == decision.note
                && kept.edited_arguments == decision.edited_arguments =>
            {
                done()
            }
            Ok(Some(entry)) => closed(&app, user, &entry).unwrap_or_else(|| unknown(&app, user)),
            Ok(None) => unknown(&app, user),
            Err(error) => store_down(&app, user, &error),
        },
        Ok(DecideOutcome::Expired) => expired(&app, user),
        Ok(_) => unknown(&app, user),
        Err(error) => store_down(&app, user, &error),
    }
}

// ---------------------------------------------------------------- history

/// What came of a decided approval: a class for the page and the words.
fn came_of(entry: &ApprovalEntry, now: u64) -> (&'static str, String) {
    let approved = entry.approval.decision.as_ref().is_some_and(|d| d.approved);
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

async fn history<B: Backend>(State(app): State<Arc<App<B>>>, headers: HeaderMap) -> Response {
    let Some((user, _)) = signed_in(&app, &headers) else {
        return unauthorized();
    };
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
            .text(&pretty(&redacted(spec, &entry.approval.arguments)))
            .raw("</pre>")
            .el("<small>session <code>", &entry.approval.session, "</code>")
            .el(
                ", caller <code>",
                &entry.approval.caller,
                "</code></small></td><td>",
            );
        match (&decision.edited_arguments, decision.approved) {
            (_, false) => {
                body.raw("<b class=\"outcome denied\">denied</b>");
            }
            (Some(edited), true) => {
                body.raw("<b class=\"outcome ran\">approved with edits</b><pre>")
                    .text(&pretty(&redacted(spec, edited)))
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

// ---------------------------------------------------------------- metrics

/// Reads an audit log: its records, and how many lines were not records.
async fn read_audit(path: &std::path::Path) -> std::io::Result<(Vec<AuditRecord>, usize)> {
    let text = tokio::fs::read_to_string(path).await?;
    let mut records = Vec::new();
    let mut unreadable = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(line) {
            Ok(record) => records.push(record),
            Err(_) => unreadable += 1,
        }
    }
    Ok((records, unreadable))
}

/// A report without `report`: calls, ok and failures by code and by tool.
fn plain_summary(records: &[AuditRecord]) -> Value {
    let mut by_code: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_tool: BTreeMap<String, u64> = BTreeMap::new();
    for record in records.iter().filter(|r| !r.ok) {
        *by_code.entry(record.code.as_str().to_owned()).or_default() += 1;
        *by_tool.entry(record.tool.clone()).or_default() += 1;
    }
    json!({
        "totals": {"calls": records.len(), "ok": records.iter().filter(|r| r.ok).count()},
        "rejections_by_code": by_code.iter().map(|(code, n)| json!({"code": code, "rejected": n})).collect::<Vec<_>>(),
        "tools": by_tool.iter().map(|(tool, n)| json!({"tool": tool, "rejected": n})).collect::<Vec<_>>(),
    })
}

async fn metrics<B: Backend>(State(app): State<Arc<App<B>>>, headers: HeaderMap) -> Response {
    let Some((user, _)) = signed_in(&app, &headers) else {
        return unauthorized();
    };
    let mut body = Html::default();
    let summarize = |records: &[AuditRecord]| match &app.options.summarize {
        Some(summarize) => summarize(records),
        None => plain_summary(records),
    };
    match &app.options.audit {
        None => {
            body.raw("<p class=\"lead\">No audit log: start the inbox with <code>--audit FILE</code>, the file the agents write with <code>--audit</code>, to see its metrics here.</p>");
        }
        Some(path) => match read_audit(path).await {
            Err(error) => {
                body.el(
                    "<p class=\"notice bad\">",
                    &format!("Cannot read {}: {error}", path.display()),
                    "</p>",
                );
            }
            Ok((records, unreadable)) => {
                body.el(
                    "<p class=\"lead\">",
                    &format!(
                        "{} record(s) of {}{}, counted as the report command counts them.",
                        records.len(),
                        path.display(),
                        if unreadable > 0 {
                            format!(" ({unreadable} unreadable line(s) left out)")
                        } else {
                            String::new()
                        }
                    ),
                    "</p>",
                );
                let summary = summarize(&records);
                metrics_body(&mut body, &records, &summary, &summarize);
            }
        },
    }
    if let Ok(decided) = app
        .backend
        .store()
        .decided_approvals(app.options.limit)
        .await
    {
        let now = now_ms();
        let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
        for entry in &decided {
            *counts.entry(came_of(entry, now).0).or_default() += 1;
        }
        let rows: Vec<(String, u64, &str)> = counts
            .iter()
            .map(|(class, n)| ((*class).to_owned(), *n, outcome_color(class)))
            .collect();
        body.raw("<section class=\"chart\"><h2>What came of the inbox's decisions</h2>")
            .raw(&chart::bars("What came of the inbox's decisions", &rows))
            .raw("</section>");
    }
    html_response(
        StatusCode::OK,
        layout(
            "Metrics",
            &app.options.title,
            Some(user),
            "Metrics",
            &body.finish(),
        ),
    )
}

fn outcome_color(class: &str) -> &'static str {
    match class {
        "ran" => "#009E73",
        "failed" | "denied" => "#D55E00",
        "replayed" => "#56B4E9",
        _ => "#E69F00",
    }
}

fn count(value: &Value, name: &str) -> u64 {
    value[name].as_u64().unwrap_or(0)
}

fn metrics_body(
    body: &mut Html,
    records: &[AuditRecord],
    summary: &Value,
    summarize: &dyn Fn(&[AuditRecord]) -> Value,
) {
    let totals = &summary["totals"];
    let rate = |name: &str| {
        totals[name]
            .as_f64()
            .map_or_else(|| "–".to_owned(), |r| format!("{:.1}%", r * 100.0))
    };
    body.raw("<div class=\"stats\">");
    for (label, value) in [
        ("calls", count(totals, "calls").to_string()),
        ("ok", count(totals, "ok").to_string()),
        ("rejected", count(totals, "rejected").to_string()),
        ("rejection rate", rate("rejection_rate")),
        ("recovery rate", rate("recovery_rate")),
        ("replayed", count(totals, "replayed").to_string()),
        (
            "refused by the host",
            count(totals, "refused_by_host").to_string(),
        ),
        ("failed", count(totals, "failed").to_string()),
    ] {
        body.raw("<div><b>")
            .text(&value)
            .raw("</b>")
            .text(label)
            .raw("</div>");
    }
    body.raw("</div>");

    let by_code: Vec<(String, u64, &str)> = summary["rejections_by_code"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    (
                        row["code"].as_str().unwrap_or("?").to_owned(),
                        count(row, "rejected"),
                        chart::color(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    body.raw("<section class=\"chart\"><h2>Rejections by code</h2>")
        .raw(&chart::bars("Rejections by code", &by_code))
        .raw("</section>");

    // Over the log, in its order (audit records carry no clock): up to ten
    // slices of calls, each counted apart.
    let slices = records.len().clamp(1, 10);
    let size = records.len().div_ceil(slices).max(1);
    let mut labels = Vec::new();
    let mut series: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (i, chunk) in records.chunks(size).enumerate() {
        let start = i * size + 1;
        labels.push(format!("{}–{}", start, start + chunk.len() - 1));
        let part = summarize(chunk);
        for row in part["tools"].as_array().into_iter().flatten() {
            let rejected = count(row, "rejected");
            if rejected == 0 {
                continue;
            }
            let tool = row["tool"].as_str().unwrap_or("?").to_owned();
            let values = series.entry(tool).or_insert_with(|| vec![0; 0]);
            values.resize(i + 1, 0);
            values[i] = rejected;
        }
    }
    let series: Vec<(String, Vec<u64>)> = series.into_iter().collect();
    body.raw("<section class=\"chart\"><h2>Rejections by tool over the log</h2><p class=\"lead\">Calls in the order the log has them, in slices.</p>")
        .raw(&chart::stacked("Rejections by tool over the log", &labels, &series))
        .raw("</section>");

    let c = &summary["confirmations"];
    if c.is_object() {
        let rows: Vec<(String, u64, &str)> = [
            ("asked for approval", "required", "#0072B2"),
            ("approved", "approved", "#009E73"),
            ("approved, then failed", "approved_then_failed", "#D55E00"),
            ("denied", "denied", "#D55E00"),
            ("expired", "expired", "#E69F00"),
            ("invalid", "invalid", "#CC79A7"),
            ("never answered", "unanswered", "#999999"),
        ]
        .into_iter()
        .map(|(label, name, color)| (label.to_owned(), count(c, name), color))
        .collect();
        body.raw("<section class=\"chart\"><h2>Approval outcomes</h2>")
            .raw(&chart::bars("Approval outcomes", &rows))
            .raw("</section>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_from_another_origin_or_without_the_token_is_refused() {
        let access = Access::token("ana", "0123456789abcdef0123").unwrap();
        let user = &access.users()[0];
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin_form(user, &headers, Some(user.csrf())));
        assert!(!same_origin_form(user, &headers, None));
        assert!(!same_origin_form(user, &headers, Some("nope")));
        headers.insert("origin", HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(same_origin_form(user, &headers, Some(user.csrf())));
        headers.insert("origin", HeaderValue::from_static("http://evil.example"));
        assert!(!same_origin_form(user, &headers, Some(user.csrf())));
        headers.remove("origin");
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin_form(user, &headers, Some(user.csrf())));
    }
}
