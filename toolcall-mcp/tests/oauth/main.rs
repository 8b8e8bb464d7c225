//! The MCP server as an OAuth 2.1 resource server (`HttpOptions::oauth`),
//! against an authorization server each test runs and steers: it publishes
//! its metadata and its keys (Ed25519), can be made to fail (`500`), to hold
//! a read of its keys until the test lets it go, or to rotate its keys, and
//! counts every read of its keys. What is asserted is counts and orderings:
//! reads of the keys, statuses, which request finished first.
//!
//! (The tests against a real authorization server, `oauth2-mock-server`,
//! are `examples/orders/tests/mcp_http/oauth.rs`.)

use std::net::SocketAddr;

use std::sync::{Arc, Mutex, OnceLock};

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;

use axum::response::{IntoResponse as _, Response};

use jsonwebtoken::{Algorithm, EncodingKey, Header};

use proptest::prelude::*;

use serde_json::{Value, json};

use tokio::sync::watch;

use toolcall::{Dispatcher, Rejection, tool, tools};

use toolcall_mcp::Options;

use toolcall_mcp::http::{HttpOptions, MAX_SESSIONS_PER_PRINCIPAL, OAuth, router, serve};

use toolcall_testkit::mcp_http::{Answer, send_bytes};

/// The resource the servers here are (their tokens' `aud`).
const AUDIENCE: &str = "https://mcp.example.com/mcp";

// ------------------------------------------------------------------ keys

/// An Ed25519 key of the authorization server: its seed (to sign) and its
/// public half (to publish).
struct TestKey {
    kid: &'static str,
    seed_hex: &'static str,
    x: &'static str,
}

const KEY_1: TestKey = TestKey {
    kid: "key-1",
    seed_hex: "dfb866ddc775dda0c7644a3ed5deb39d75487a4862f8146311e4351a6167fb8e",
    x: "M5PHEwxp-RurdSz3HnolrVPcywjtylkH-vH3O8LIE2k",
};

const KEY_2: TestKey = TestKey {
    kid: "key-2",
    seed_hex: "c1d0dac81ad1b573f3c909eca69712602b7e9b5fb1cc1fd3649eba006337d2ff",
    x: "kALRH8Vahs_U2xyEvez9eYuKniZs4yQlqYAmBQdV59w",
};

impl TestKey {
    /// The private key as PKCS#8 DER: the fixed prefix of an Ed25519 key,
    /// then its seed.
    fn encoding(&self) -> EncodingKey {
        let mut der = hex("302e020100300506032b657004220420");
        der.extend(hex(self.seed_hex));
        EncodingKey::from_ed_der(&der)
    }

    fn jwk(&self) -> Value {
        json!({"kty": "OKP", "crv": "Ed25519", "x": self.x, "kid": self.kid,
               "alg": "EdDSA", "use": "sig"})
    }

    /// `claims` signed with this key, its header naming `kid`.
    fn sign(&self, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &self.encoding()).unwrap()
    }
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
        .collect()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The claims of a good token of `issuer` for `sub`, through `desk`.
fn claims(issuer: &str, sub: &str) -> Value {
    json!({"iss": issuer, "sub": sub, "aud": AUDIENCE, "client_id": "desk",
           "scope": "mcp.read mcp.write", "iat": now(), "exp": now() + 3600})
}

// ------------------------------------------------------------------ issuer

/// How the authorization server answers a read of its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// With the keys it publishes.
    Serve,
    /// `500`.
    Fail,
    /// Not until the test lets go ([`Issuer::release`]), then with its keys.
    Hold,
}

struct IssuerState {
    url: String,
    mode: Mutex<Mode>,
    keys: Mutex<Vec<Value>>,
    /// Reads of the keys begun (each counted as it arrives).
    reads: watch::Sender<u64>,
    /// Set to let held reads go.
    released: watch::Sender<bool>,
}

/// The authorization server of a test, on 127.0.0.1.
struct Issuer {
    state: Arc<IssuerState>,
}

impl Issuer {
    async fn start(mode: Mode, keys: &[&TestKey]) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(IssuerState {
            url,
            mode: Mutex::new(mode),
            keys: Mutex::new(keys.iter().map(|key| key.jwk()).collect()),
            reads: watch::Sender::new(0),
            released: watch::Sender::new(false),
        });
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(metadata),
            )
            .route("/jwks", axum::routing::get(jwks))
            .with_state(Arc::clone(&state));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Issuer { state }
    }

    fn url(&self) -> &str {
        &self.state.url
    }

    fn reads(&self) -> u64 {
        *self.state.reads.borrow()
    }

    /// Until `count` reads of the keys have arrived.
    async fn reads_reach(&self, count: u64) {
        let mut reads = self.state.reads.subscribe();
        let reached = tokio::time::timeout(
            Duration::from_secs(30),
            reads.wait_for(|reads| *reads >= count),
        )
        .await;
        assert!(reached.is_ok(), "{count} reads of the keys never came");
    }

    fn set_mode(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = mode;
    }

    fn publish(&self, keys: &[&TestKey]) {
        *self.state.keys.lock().unwrap() = keys.iter().map(|key| key.jwk()).collect();
    }

    /// Lets every held read go, with the keys, and holds no more.
    fn release(&self) {
        self.set_mode(Mode::Serve);
        self.state.released.send_replace(true);
    }

    fn token(&self, key: &TestKey, sub: &str) -> String {
        key.sign(Some(key.kid), &claims(self.url(), sub))
    }
}

async fn metadata(State(state): State<Arc<IssuerState>>) -> Response {
    json_answer(&json!({"issuer": state.url, "jwks_uri": format!("{}/jwks", state.url)}))
}

async fn jwks(State(state): State<Arc<IssuerState>>) -> Response {
    let mode = *state.mode.lock().unwrap();
    state.reads.send_modify(|reads| *reads += 1);
    match mode {
        Mode::Fail => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down").into_response(),
        Mode::Hold => {
            let mut released = state.released.subscribe();
            let _ = released.wait_for(|released| *released).await;
            keys_document(&state)
        }
        Mode::Serve => keys_document(&state),
    }
}

fn keys_document(state: &IssuerState) -> Response {
    let keys = state.keys.lock().unwrap().clone();
    json_answer(&json!({ "keys": keys }))
}

fn json_answer(value: &Value) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

// ------------------------------------------------------------------ server

/// Read something. No side effects.
#[tool]
fn hello() -> Result<Value, Rejection> {
    Ok(json!({"hello": "world"}))
}

/// The MCP server of `issuer`'s tokens, its keys read again no more than
/// once per `refresh`.
async fn start(issuer: &Issuer, refresh: Duration, http: HttpOptions) -> SocketAddr {
    start_with(issuer, refresh, http, Options::new("oauth-test")).await
}

async fn start_with(
    issuer: &Issuer,
    refresh: Duration,
    http: HttpOptions,
    options: Options,
) -> SocketAddr {
    let dispatcher = Dispatcher::builder(tools![hello].unwrap(), Arc::new(()))
        .build()
        .unwrap();
    let oauth = OAuth::new(issuer.url(), AUDIENCE)
        .unwrap()
        .keys_refresh(refresh);
    let app = router(Arc::new(dispatcher), options, http.oauth(oauth)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, app));
    addr
}

// ------------------------------------------------------------------ raw HTTP

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// An `initialize` with `Authorization: Bearer token`.
async fn initialize(addr: SocketAddr, token: &str) -> Answer {
    let auth = format!("Bearer {token}");
    send_bytes(
        addr,
        "POST",
        &[("Authorization", auth.as_bytes())],
        INITIALIZE.as_bytes(),
    )
    .await
}

/// A token of a key the issuer never published.
fn made_up(issuer: &Issuer, n: u64) -> String {
    KEY_1.sign(
        Some(&format!("made-up-{n}")),
        &claims(issuer.url(), "mallory"),
    )
}

/// The status of an `initialize` with `subject`'s token, signed with `key`.
async fn signed_in(addr: SocketAddr, issuer: &Issuer, key: &TestKey, subject: &str) -> u16 {
    initialize(addr, &issuer.token(key, subject)).await.status
}

/// An issuer of [`KEY_1`] and a server that reads its keys again at most
/// every `refresh`, once alice signed in: one read of the keys so far.
async fn alice_signed_in(refresh: Duration) -> (Issuer, SocketAddr) {
    let issuer = Issuer::start(Mode::Serve, &[&KEY_1]).await;
    let addr = start(&issuer, refresh, HttpOptions::new()).await;
    assert_eq!(signed_in(addr, &issuer, &KEY_1, "alice").await, 200);
    assert_eq!(issuer.reads(), 1);
    (issuer, addr)
}

mod headers;
mod keys;
mod principals;
