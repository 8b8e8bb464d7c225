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
//! | `GET /` | the inbox, a page at a time: how many calls wait (the true count, whatever the page size), then each pending call of the page, oldest (or newest) first, with its tool, description, flags, why it asks when untrusted output is the reason (the session read it; the arguments that carry its values are flagged), validated arguments beside their descriptions, session, caller, when it was asked and a countdown to its expiry; approve or deny with a note, or edit |
//! | `GET /approvals/{id}/edit` | the arguments as a form: the edited call is validated here, and checked and policed again by the agent's dispatcher, as a new call |
//! | `POST /approvals/{id}/decide` | `action` = `approve`, `deny` or `edit` (with `arg:NAME` fields), `note`, `csrf` |
//! | `GET /history` | each decision, who took it, and what came of it |
//! | `GET /metrics` | the audit log's metrics (`report`'s), as inline SVG charts: rejections by code, and by tool and by code over time (in buckets of wall time, UTC; in slices of the log's order for a log whose records carry no time) |
//! | `GET /api/pending` | a page of pending approvals as JSON: `{"items": [...], "total": N, "next": "/api/pending?...&cursor=..."}` (`next` is `null` on the last page) |
//!
//! `/` and `/api/pending` take the same query: `session` (only this
//! conversation's calls), `tool` (only this tool's), `order` (`oldest`, the
//! default, or `newest`), `limit` (the page size, 1 to [`MAX_PAGE`]) and
//! `cursor` (where the next page starts, as a `next` link gives it). An
//! unknown order, a malformed cursor or a page size out of bounds is a 400
//! that says which. The page has a form for the filters, a link that flips
//! the order, and a "Next page" link.
//!
//! A call whose earlier attempt may have taken effect (its outcome is
//! unknown, and its backend cannot be asked) waits here too, with the
//! reason `in_doubt`: its card asks what happened, with two answers,
//! "It did not happen: run it once" (an approval) and "It happened: do not
//! run it again" (a denial), and no edit; the history says "settled: it did
//! not happen" or "settled: it happened".
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
mod decide;
mod history;
mod html;
mod metrics;
mod page;
mod pending;
mod security;
mod timeline;

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use serde_json::Value;
use toolcall_core::{AuditRecord, Dispatcher, Registry, Store};

pub use access::{Access, AccessError, DEFAULT_NAME, MIN_TOKEN_LEN, User};
pub use html::esc;
pub use pending::MAX_PAGE;

use html::segment;

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
        .route("/", get(pending::index::<B>))
        .route("/history", get(history::history::<B>))
        .route("/metrics", get(metrics::metrics::<B>))
        .route("/approvals/{id}/edit", get(decide::edit::<B>))
        .route("/approvals/{id}/decide", post(decide::decide::<B>))
        .route("/api/pending", get(pending::api_pending::<B>))
        .route("/sign-out", post(security::sign_out::<B>))
        .route("/assets/inbox.css", get(page::css::<B>))
        .route("/assets/inbox.js", get(page::js::<B>))
        .fallback(page::not_found)
        .layer(DefaultBodyLimit::max(256 * 1024))
        .layer(axum::middleware::map_response(security::secure))
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
