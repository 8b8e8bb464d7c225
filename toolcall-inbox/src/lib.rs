//! The approval inbox of [toolcall](https://docs.rs/toolcall): one page
//! where the person on duty sees every pending high-risk call with its
//! exact arguments, approves, denies or edits it, and later sees what came
//! of it, over the same [`Store`] the agents use, so that an approval asked
//! in one process is decided here and runs in another.
//!
//! ```no_run
//! # async fn demo(store: toolcall_core::store::MemoryStore, registry: toolcall_core::Registry)
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
//! | `GET /` | the inbox, a page at a time: how many calls wait (the true count, whatever the page size), then each pending call of the page, newest (or oldest) first, grouped by conversation (each conversation where its first call on the page falls, with a link that lists only it), with its tool, description, flags, why it asks when untrusted output is the reason (the session read it; which call's output, and what it said, quoted, escaped and bounded; the arguments that carry its values are flagged), validated arguments beside their descriptions, session, caller, when it was asked and a countdown to its expiry; approve or deny with a note, or edit (each card's `data-reason` says why it asks, as the JSON's `reason`) |
//! | `GET /approvals/{id}/edit` | the arguments as a form: the edited call is validated here, and checked and policed again by the agent's dispatcher, as a new call; it takes the listing's query, and its form and its Cancel link carry it on |
//! | `POST /approvals/{id}/decide` | `action` = `approve`, `deny` or `edit` (with `arg:NAME` fields) for an approval question, `happened` or `not_happened` for a question about an unknown outcome; `note`, `csrf`, and the listing the form was shown in (hidden fields named as the query's: `session`, `tool`, `caller`, `kind`, `order`, `limit`, `cursor`). Recorded as a person's decision through [`toolcall_core::life::decide`]; the answer (303) returns to the same list, with a notice. An answer of the other kind is a 422, a listing that makes no sense a 400, and neither decides anything |
//! | `GET /history` | each decision, who took it, and what came of it |
//! | `GET /metrics` | the audit log's metrics (`report`'s), as inline SVG charts: rejections by code, and by tool and by code over time (in buckets of wall time, UTC; in slices of the log's order for a log whose records carry no time) |
//! | `GET /sessions` | the signed-in person's sign-ins (when and from where each began, when it ends, which is this browser), and a button that signs them all out |
//! | `POST /sessions/revoke` | deletes every sign-in of the person (`csrf` from a browser); a program (bearer token) is answered `{"revoked": N}`, and may post a JSON object (`{}`, read as every JSON body is) |
//! | `GET /api/sessions` | the same list as JSON: `{"name": ..., "sign_ins": [{"id", "from", "created_ms", "expires_ms", "current"}]}` (`id` is a label, not the cookie) |
//! | `POST /sign-out` | deletes this browser's sign-in and clears its cookie (`csrf`) |
//! | `GET /api/pending` | a page of pending approvals as JSON: `{"items": [...], "total": N, "next": "/api/pending?...&cursor=..."}` (`next` is `null` on the last page); each item as the store keeps it, with its `reason` (`high_risk`, `untrusted_context` or `in_doubt`), where untrusted output that is the reason came from (`provenance`: the tool, the call id, when, and its texts, bounded, as kept: a client escapes them) and the decisions that answer it (`answers`) |
//! | `POST /api/approvals/{id}/decision` | a decision as JSON, for programs: see [below](#deciding-from-a-program) |
//!
//! `/` and `/api/pending` take the same query: `session` (only this
//! conversation's calls), `tool` (only this tool's), `caller` (only this
//! caller's), `kind` (`approval`, the questions whether a call may run, or
//! `in_doubt`, those about an unknown outcome: the kind
//! [`life`](toolcall_core::life) derives), `order` (`newest` or `oldest`:
//! the page lists the newest first unless asked, the JSON the oldest
//! first, as it always has), `limit` (the page size, 1 to [`MAX_PAGE`])
//! and `cursor` (where the next page starts, as a `next` link gives it).
//! An unknown order or kind, a malformed cursor, a page size out of bounds
//! or a filter longer than 1024 characters is a 400 that says which. The
//! store filters by conversation and tool; the inbox filters by caller and
//! kind over every open question of those it reads (a page of
//! [`MAX_PAGE`] at a time), so that the count is true and the pages follow
//! one another. The page has a form for the filters, a link that flips
//! the order, and a "Next page" link; every decision's form carries the
//! listing, so that after a decision the person is back on the same list,
//! at the same page. The JSON lists a page's items in the store's order,
//! not grouped.
//!
//! A call whose earlier attempt may have taken effect (its outcome is
//! unknown, and its backend cannot be asked) waits here too, with the
//! reason `in_doubt`: its card asks what happened, with two answers,
//! "It did not happen: run it once" (`not_happened`) and "It happened: do
//! not run it again" (`happened`), and no edit; neither an approval nor a
//! denial answers it. The history says "settled: it did not happen" or
//! "settled: it happened". Before it lists, the inbox asks about every
//! unknown outcome a process left without a question
//! ([`toolcall_core::life::surface`]): a call whose process died after its
//! claim, or could not record what came of it, is listed without waiting
//! for an identical call.
//!
//! # Deciding from a program
//!
//! `POST /api/approvals/{id}/decision` takes what the form takes, as a
//! JSON object (`Content-Type: application/json`), and records it through
//! the same [`toolcall_core::life::decide`], as the decision of the person
//! whose token signs the request:
//!
//! ```text
//! POST /api/approvals/ap-7f3c/decision
//! Authorization: Bearer TOKEN
//! Content-Type: application/json
//!
//! {"decision": "edit", "arguments": {"to": "acme", "amount_cents": 1000}, "note": "half now"}
//! ```
//!
//! `decision` is `approve`, `deny` or `edit` for a question whether a call
//! may run, `happened` or `not_happened` for a question about an unknown
//! outcome (reason `in_doubt`): the item's `answers` in `/api/pending`.
//! `note` is optional (at most [`MAX_NOTE`] characters, trimmed, stored as
//! the form's is); `arguments` goes with an `edit` and only with one, is
//! validated against the tool's schema, and, when it is the model's own,
//! makes the edit a plain approval. A browser's request (the sign-in
//! cookie) also carries `"csrf"`, its sign-in's token, and passes the
//! form's `Origin` and `Sec-Fetch-Site` checks; a bearer token's needs
//! none. The answer is JSON whatever happens. A recorded decision is `200`
//! with its state as the store keeps it (`again` is `true` when the same
//! person's same decision was recorded before: a retry decides nothing
//! twice; `edited_arguments` only for an edit):
//!
//! ```json
//! {"id": "ap-7f3c", "state": "edited", "by": "ana", "note": "half now",
//!  "decided_ms": 1767225600000, "tool": "pay", "session": "s-1",
//!  "caller": "default", "reason": "high_risk", "digest": "9b1c…",
//!  "edited_arguments": {"to": "acme", "amount_cents": 1000}, "again": false}
//! ```
//!
//! `state` is `approved`, `edited`, `denied`, `happened` or
//! `not_happened`. Anything else decides nothing and is
//! `{"code": "...", "error": "..."}`, with more where it helps:
//!
//! | status | `code` | when |
//! |---|---|---|
//! | 400 | `invalid_json` | the body is not a JSON object |
//! | 400 | `duplicate_member` | the body names a member twice, at any depth (`field` is the body's member it is, or is inside; the error names it) |
//! | 400 | `too_deep` | the body nests more than 33 levels of arrays and objects (an edit's arguments as deep as the pipeline takes a model's) |
//! | 400 | `invalid_request` | a field is missing, unknown or wrong (`field` names it; an unknown one lists the members `allowed`): no such `decision`, a note too long, a `csrf` that is not a string, `arguments` without an `edit` or an `edit` without them |
//! | 401 | `unauthorized` | no token or sign-in, or a wrong one (`WWW-Authenticate`) |
//! | 403 | `forbidden` | a cookie's request without its sign-in's CSRF token, or from another origin |
//! | 404 | `unknown_approval` | nothing waits under the id |
//! | 409 | `already_decided` | decided before, otherwise or by someone else: `decision` is the state that stands, `refusal` life's words |
//! | 409 | `already_used` | the agent's host decided and used it |
//! | 409 | `wrong_kind` | an answer of the other kind (an approval, denial or edit of a question about an unknown outcome, a settlement of an approval question), as life refuses it: `answers` lists the ones that answer it, `refusal` says why |
//! | 410 | `expired` | it ran out of time before anyone decided |
//! | 413 | `body_too_large` | a body over 256 KiB |
//! | 415 | `unsupported_media_type` | a body that does not say it is JSON |
//! | 422 | `invalid_arguments` | an edit's arguments are not valid: `problems`, each `{"field", "problem"}` |
//! | 422 | `unknown_tool` | an edit of a call whose tool this inbox does not know |
//! | 429 | `too_many_attempts` | too many wrong tokens from this address (`retry_after`, and `Retry-After`) |
//! | 503 | `store_unavailable` | the store cannot be reached: try again |
//!
//! The other routes under `/api/` refuse in JSON too (`unauthorized`,
//! `too_many_attempts`; `/api/pending`'s bad listing is `invalid_listing`).
//!
//! Every JSON body the inbox takes (a decision, a stop and an enable of
//! `/api/controls`, a program's revocation) is read by one reader, as
//! strictly as the pipeline reads a model's arguments: at most 256 KiB
//! (413), one JSON object (`invalid_json`), no member named twice at any
//! depth (`duplicate_member`: a reader that kept the last of
//! `{"decision": "deny", "decision": "approve"}` would approve it), at
//! most 33 levels deep (`too_deep`), only the endpoint's members
//! (`invalid_request`, with `field` and `allowed`), each of its type. A
//! form that gives a field twice is a 400 too, never read as its first or
//! its last. A refused body changes nothing.
//!
//! # Security
//!
//! The page can move money. What it defends against, and how:
//!
//! * **No token, no data.** Every request needs a token ([`Access`]):
//!   `Authorization: Bearer TOKEN`, or the cookie a browser gets by opening
//!   `/?token=TOKEN` once (a redirect then takes the token out of the
//!   address bar and the history); without one, no page shows any data
//!   (401).
//! * **Guessing tokens.** A client address (an IPv4 address, or an IPv6
//!   address's /64) that sends [`MAX_FAILURES`] wrong tokens, or unknown
//!   sign-in cookies, within [`FAILURE_WINDOW`] (10 a minute, counted from
//!   its first failure; [`Options::sign_in_limit`]) gets `429 Too Many
//!   Requests` with `Retry-After` (seconds) for every sign-in, by address,
//!   bearer token or cookie, until its window passes: **a right token from
//!   that address is refused too** while it is limited. Another address's
//!   count is its own, and a success lifts no count. The limiter remembers
//!   at most [`MAX_TRACKED_ADDRESSES`] addresses (when full, the one whose
//!   window began first is forgotten). The address is the connection's
//!   peer ([`serve`] records it; a [`router`] served without
//!   `ConnectInfo` counts every client as one); `X-Forwarded-For` is not
//!   read, so behind a proxy every client shares the proxy's count (a
//!   flood of wrong tokens through it delays everyone's sign-in by up to a
//!   window).
//! * **Timing.** A token is compared in constant time whatever its length:
//!   the SHA-256 digests of both are compared with no early exit, and every
//!   person's token is compared on each attempt.
//! * **Stolen or copied cookies.** The cookie holds no token and nothing
//!   derived from one: it is the random id (128 bits) of a sign-in record
//!   kept by the server, with its person, its client address, when it
//!   began and when it ends ([`DEFAULT_SIGN_IN_TTL`], 12 hours;
//!   [`Options::sign_in_ttl`]; the cookie's `Max-Age` says the same).
//!   Signing out deletes the record, so a copy of the cookie stops working
//!   at once; `GET /sessions` lists the person's sign-ins and signs them
//!   all out (`POST /sessions/revoke`); an expired record is refused and
//!   deleted. A person has at most [`MAX_SIGN_INS_PER_PERSON`] sign-ins (a
//!   new one deletes their oldest). The records live in the inbox
//!   process's memory: **a restart signs everyone out, and each replica of
//!   the inbox keeps its own** (a browser signs in to each; behind a load
//!   balancer, pin a person to one replica).
//! * **Cookie attributes.** `HttpOnly` (no script reads it), `SameSite=Strict`
//!   (no other site's page sends it), and `Secure` (only sent over TLS) when
//!   the operator says so ([`Options::cookie_secure`], the command line's
//!   `--cookie-secure`) or the sign-in request shows it came over TLS: an
//!   `Origin` of `https://…`, `X-Forwarded-Proto: https` or `Forwarded:
//!   proto=https`. Those headers are trusted only to add `Secure`: a
//!   client that claims TLS falsely gets a cookie its browser will not send
//!   back over plain HTTP.
//! * **Forged forms (CSRF).** A decision, a sign-out and a revocation are
//!   `POST`s that carry the CSRF token of the sign-in record (random, 256
//!   bits: another sign-in's token, even the same person's, is refused),
//!   and whose `Origin` and `Sec-Fetch-Site` (when the browser sends them)
//!   are the inbox itself; 403 otherwise. A JSON decision sent with the
//!   cookie carries it as its `csrf` field, under the same checks. A bearer
//!   token's requests are a program's, and carry none.
//! * **Injected markup.** Every piece of text from a model, a person or the
//!   store is escaped by one function ([`esc`]), in elements and
//!   attributes alike; the content security policy allows no inline script
//!   or style, only this server's own files; no framing, no caching.
//! * **Text that reorders or hides itself.** What a person, a model or the
//!   store supplied and a person reads (a person's name, a principal, a
//!   caller, a session, a reason, a note, an argument) is shown with its
//!   control characters and the characters that reorder or hide text (a
//!   bidirectional override such as U+202E, a zero-width space) written as
//!   their escapes (`\u{202e}`), on every page: a name cannot read
//!   backwards or hide a part of itself. A form's fields keep the values
//!   they send back as they are; the JSON API serves the values as stored.
//! * **Double decisions.** A decision is atomic in the store
//!   ([`QuestionStore::decide_approval`](toolcall_core::store::QuestionStore::decide_approval)): a double click is one decision, and a
//!   decided, expired or unknown approval cannot be decided (409, 410,
//!   404), from the form or from a program. Each decision records the name
//!   of the person whose token made it.
//! * **Bounds.** A request body is at most 256 KiB (413); a note at most
//!   [`MAX_NOTE`] characters (400), and what is stored of it at most
//!   2 KiB (a longer one is kept as its head and its SHA-256, as everywhere
//!   the pipeline keeps a host's text); a page lists at most [`MAX_PAGE`]
//!   approvals.
//!
//! What the operator must add: bind the inbox to a loopback address (the
//! command line's default is `127.0.0.1:8080`) and put a TLS proxy in front
//! of it to reach it from elsewhere, with `--cookie-secure`
//! ([`Options::cookie_secure`]) so the cookie never travels in the clear;
//! keep the token file readable only by the inbox; hand each person their
//! own token (decisions record the name).

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod access;
mod api;
mod body;
mod chart;
mod decide;
#[cfg(feature = "metrics")]
mod exposition;
mod history;
mod html;
mod metrics;
mod operators;
mod page;
mod pending;
mod problem;
mod security;
mod sessions;
mod signin;
mod timeline;

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use serde_json::Value;
use toolcall_core::store::Store;
use toolcall_core::{AuditRecord, Caller, Dispatcher, Registry};

pub use access::{ADMIN_ROLE, Access, AccessError, DEFAULT_NAME, MIN_TOKEN_LEN, User};
pub use html::esc;
pub use pending::MAX_PAGE;
pub use signin::{
    DEFAULT_SIGN_IN_TTL, FAILURE_WINDOW, MAX_FAILURES, MAX_SIGN_INS_PER_PERSON,
    MAX_TRACKED_ADDRESSES,
};
pub use toolcall_listen::Limits;

use html::segment;

/// What the inbox reads and decides through: a store and the tools.
pub trait Backend: Send + Sync + 'static {
    /// The store the agents share.
    type Store: Store;
    /// The store.
    fn store(&self) -> &Self::Store;
    /// The tools, for their descriptions, flags and validation.
    fn registry(&self) -> &Registry;
    /// How long a person's denial (or edit) answers the identical calls,
    /// from the decision: a dispatcher's
    /// [`denial_ttl`](toolcall_core::Settings::denial_ttl); a day by
    /// default ([`DENIAL_TTL`](toolcall_core::life::DENIAL_TTL)).
    fn denial_ttl(&self) -> std::time::Duration {
        toolcall_core::life::DENIAL_TTL
    }
    /// The application's callers, which a stop or an enable of a caller
    /// asked in the inbox is checked against (a misspelt one would stop
    /// nothing): a dispatcher's [`callers`](Dispatcher::callers). `None`,
    /// the default, when the backend does not know them: the inbox then
    /// stops no caller by name (it stops everything, and the command
    /// line's `admin disable --caller` stops a caller), and enables a
    /// caller only when a stop of it is there to lift.
    fn callers(&self) -> Option<Vec<&Caller>> {
        None
    }
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

    fn denial_ttl(&self) -> std::time::Duration {
        self.settings().denial_ttl
    }

    fn callers(&self) -> Option<Vec<&Caller>> {
        Some(Dispatcher::callers(self))
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
/// (`toolcall_contract::report::Report::to_json`): the command line passes it in.
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
    /// How many approvals a page lists when its query does not say (100
    /// by default, at most [`MAX_PAGE`]); the decisions the history shows.
    pub limit: usize,
    /// Whether the sign-in cookie always carries `Secure` (the browser then
    /// sends it only over TLS): for an inbox behind a TLS proxy. Off by
    /// default; a sign-in whose request shows it came over TLS gets
    /// `Secure` anyway (see [`Options::cookie_secure`]).
    pub cookie_secure: bool,
    /// How long a sign-in lasts ([`DEFAULT_SIGN_IN_TTL`], 12 hours): then
    /// its record is deleted and the person signs in again.
    pub sign_in_ttl: Duration,
    /// How many wrong tokens one client address may send in
    /// [`failure_window`](Self::failure_window) ([`MAX_FAILURES`]).
    pub max_failures: u32,
    /// The window wrong tokens are counted in ([`FAILURE_WINDOW`]).
    pub failure_window: Duration,
    /// How long one request may take once its head has arrived, its body
    /// included ([`REQUEST_TIMEOUT`]); a slower one is answered `408`.
    /// Applied by [`serve`] and [`serve_with`].
    pub request_timeout: Duration,
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
            cookie_secure: false,
            sign_in_ttl: DEFAULT_SIGN_IN_TTL,
            max_failures: MAX_FAILURES,
            failure_window: FAILURE_WINDOW,
            request_timeout: REQUEST_TIMEOUT,
        }
    }

    /// Sets [`Options::request_timeout`] (at least 1 ms).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout.max(Duration::from_millis(1));
        self
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

    /// Whether the sign-in cookie always carries `Secure`: set it when the
    /// inbox is reached through a TLS proxy (the command line's
    /// `--cookie-secure`). Without it, the cookie still gets `Secure` when
    /// the sign-in request says it came over TLS: an `Origin` starting with
    /// `https://`, `X-Forwarded-Proto: https`, or `Forwarded: proto=https`.
    /// Those headers are trusted only to add `Secure` (a client can make
    /// only its own cookie stricter by them), never to remove it.
    pub fn cookie_secure(mut self, secure: bool) -> Self {
        self.cookie_secure = secure;
        self
    }

    /// How long a sign-in lasts (at least a millisecond).
    pub fn sign_in_ttl(mut self, ttl: Duration) -> Self {
        self.sign_in_ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// How many wrong tokens (at least 1) one client address may send in
    /// `window` before every sign-in from it is refused until the window
    /// passes.
    pub fn sign_in_limit(mut self, max_failures: u32, window: Duration) -> Self {
        self.max_failures = max_failures.max(1);
        self.failure_window = window;
        self
    }
}

/// The longest note a person may write, in characters: a longer one is
/// refused (400). What is stored of a note is bounded in bytes too
/// (2 KiB, kept as its head and its SHA-256 beyond).
pub const MAX_NOTE: usize = 1000;

struct App<B> {
    backend: Arc<B>,
    options: Options,
    limiter: signin::Limiter,
    sign_ins: signin::SignIns,
}

/// The inbox's routes over `backend`.
///
/// The limit on wrong tokens counts per client address, which the router
/// reads from axum's [`ConnectInfo`](axum::extract::ConnectInfo): serve it
/// with `into_make_service_with_connect_info::<SocketAddr>()`, as
/// [`serve`] does. Without that, every client shares one count.
pub fn router<B: Backend>(backend: Arc<B>, options: Options) -> Router {
    let limiter = signin::Limiter::new(
        options.max_failures,
        options.failure_window,
        MAX_TRACKED_ADDRESSES,
    );
    let sign_ins = signin::SignIns::new(options.sign_in_ttl, MAX_SIGN_INS_PER_PERSON);
    let app = Arc::new(App {
        backend,
        options,
        limiter,
        sign_ins,
    });
    let routes = Router::new()
        .route("/", get(pending::index::<B>))
        .route("/history", get(history::history::<B>))
        .route("/metrics", get(metrics::metrics::<B>))
        .route("/approvals/{id}/edit", get(decide::edit::<B>))
        .route("/approvals/{id}/decide", post(decide::decide::<B>))
        .route("/api/pending", get(pending::api_pending::<B>))
        .route(
            "/api/approvals/{id}/decision",
            post(api::decision::<B>).fallback(problem::post_only),
        )
        .route("/admin", get(operators::page::<B>))
        .route("/admin/stop", post(operators::stop_posted::<B>))
        .route("/admin/enable", post(operators::enable_posted::<B>))
        .route(
            "/api/controls",
            get(operators::api_read::<B>).fallback(operators::get_only),
        )
        .route(
            "/api/controls/stops",
            post(operators::api_stop::<B>).fallback(operators::post_only),
        )
        .route(
            "/api/controls/enable",
            post(operators::api_enable::<B>).fallback(operators::post_only),
        )
        .route("/sign-out", post(security::sign_out::<B>))
        .route("/sessions", get(sessions::page::<B>))
        .route("/sessions/revoke", post(sessions::revoke::<B>))
        .route("/api/sessions", get(sessions::api::<B>))
        .route("/assets/inbox.css", get(page::css))
        .route("/assets/inbox.js", get(page::js));
    #[cfg(feature = "metrics")]
    let routes = routes.route("/api/metrics", exposition::route(&app));
    routes
        .fallback(page::not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::map_response(security::secure))
        .with_state(app)
}

/// The largest request body the inbox reads: 256 KiB (413 beyond).
pub(crate) const MAX_BODY: usize = 256 * 1024;

/// How long one request may take, its body included, once its head has
/// arrived: 30 s. A slower one is answered `408 Request Timeout` (a body
/// sent a byte at a time holds no connection longer).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the inbox on `listener` until the process ends, with the default
/// [`Limits`]: see [`serve_with`].
pub async fn serve<B: Backend>(
    backend: Arc<B>,
    options: Options,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    serve_with(backend, options, listener, Limits::default()).await
}

/// Serves the inbox on `listener` until the process ends: every connection
/// with `TCP_NODELAY` (a kept-alive browser's small answers are not held
/// back for its delayed acknowledgement), a request's head read within
/// [`Limits::header_timeout`] and the rest of it within
/// [`Options::request_timeout`] (`408`), at most [`Limits::max_connections`] open
/// (one more is `503`); all before any sign-in is looked at.
pub async fn serve_with<B: Backend>(
    backend: Arc<B>,
    options: Options,
    listener: tokio::net::TcpListener,
    limits: Limits,
) -> std::io::Result<()> {
    let timeout = options.request_timeout;
    let router = router(backend, options).layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            within_time(timeout, request, next)
        },
    ));
    toolcall_listen::serve(listener, router, limits).await;
    Ok(())
}

/// Answers `408` to a request that takes longer than `timeout` (in JSON
/// to a request of the JSON API).
async fn within_time(
    timeout: Duration,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let status = axum::http::StatusCode::REQUEST_TIMEOUT;
    let api = problem::is_api(request.uri().path());
    match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::info!(?timeout, "refused a request that came too slowly");
            let said = "Request Timeout: the request did not arrive in time";
            if api {
                problem::Problem::new(status, "request_timeout", said).into_response()
            } else {
                (status, said).into_response()
            }
        }
    }
}

/// The address that signs `user` in, for an inbox listening on `addr`
/// (`127.0.0.1:8080`).
pub fn sign_in_url(addr: &str, user: &User) -> String {
    format!("http://{addr}/?token={}", segment(user.token()))
}
