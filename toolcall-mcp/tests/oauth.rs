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

// ------------------------------------------------------------------ keys read at a bounded rate

/// With the issuer's keys endpoint failing from the start, every check finds
/// no keys to use: the first begins a read (it fails), and the others are
/// `503` at once, none reading again within the refresh period, however
/// many ask (before: every request read the keys).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_cannot_be_read_are_read_once_per_refresh_however_many_ask() {
    let issuer = Issuer::start(Mode::Fail, &[&KEY_1]).await;
    let addr = start(&issuer, Duration::from_secs(60), HttpOptions::new()).await;
    let mut statuses = Vec::new();
    for batch in 0..10u64 {
        let answers: Vec<_> = (0..30u64)
            .map(|n| {
                let token = if n % 2 == 0 {
                    issuer.token(&KEY_1, "alice")
                } else {
                    made_up(&issuer, batch * 30 + n)
                };
                tokio::spawn(async move { initialize(addr, &token).await })
            })
            .collect();
        for answer in answers {
            let answer = answer.await.unwrap();
            if answer.status == 503 {
                assert_eq!(answer.header("retry-after"), Some("60"), "{answer:?}");
            }
            statuses.push(answer.status);
        }
    }
    assert!(statuses.iter().all(|&status| status == 503), "{statuses:?}");
    assert_eq!(issuer.reads(), 1, "300 checks, one read of the keys");
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

/// Tokens naming made-up keys, sent while the issuer's keys endpoint fails:
/// once a read was allowed, the keys are read at most once per refresh
/// period during the flood (every attempt counts, failed or not), each
/// other request refused at once; a token of a key in use is still taken.
/// Before, each failed read left the time of the last good one, and every
/// request of the flood read the keys again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_made_up_keys_reads_the_keys_at_most_once_per_refresh() {
    let refresh = Duration::from_secs(1);
    let (issuer, addr) = alice_signed_in(refresh).await;

    issuer.set_mode(Mode::Fail);
    // A read is allowed again.
    tokio::time::sleep(refresh + Duration::from_millis(100)).await;
    let began = Instant::now();
    let mut statuses = Vec::new();
    for batch in 0..10u64 {
        let answers: Vec<_> = (0..30u64)
            .map(|n| {
                let token = made_up(&issuer, batch * 30 + n);
                tokio::spawn(async move { initialize(addr, &token).await })
            })
            .collect();
        for answer in answers {
            statuses.push(answer.await.unwrap().status);
        }
    }
    let took = began.elapsed();
    let reads = issuer.reads() - 1;
    // Reads begin at least `refresh` apart: within `took`, at most this
    // many.
    let bound = 1 + (took.as_millis() / refresh.as_millis()) as u64;
    assert!(
        (1..=bound).contains(&reads),
        "{reads} reads of the keys for 300 made-up keys in {took:?} (at most {bound})"
    );
    assert!(
        statuses
            .iter()
            .all(|&status| status == 401 || status == 503),
        "{statuses:?}"
    );
    let refused_at_once = statuses.iter().filter(|&&status| status == 401).count();
    assert!(refused_at_once >= 300 - 30 * bound as usize, "{statuses:?}");
    // The keys in use still serve.
    assert_eq!(signed_in(addr, &issuer, &KEY_1, "bob").await, 200);
}

/// While a read of the keys is held by a slow issuer, a token of a key in
/// use is checked without waiting for it: its request is answered while
/// the request that began the read still waits. Before, one lock was held
/// across the read, and every check queued behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_of_a_known_key_does_not_wait_for_a_slow_read() {
    let refresh = Duration::from_millis(100);
    let (issuer, addr) = alice_signed_in(refresh).await;

    issuer.set_mode(Mode::Hold);
    tokio::time::sleep(refresh * 2).await;
    let unknown = {
        let token = made_up(&issuer, 1);
        tokio::spawn(async move { initialize(addr, &token).await })
    };
    issuer.reads_reach(2).await;

    let known = initialize(addr, &issuer.token(&KEY_1, "bob")).await;
    assert_eq!(known.status, 200, "{known:?}");
    assert!(
        !unknown.is_finished(),
        "the request that began the read still waits for it"
    );
    assert_eq!(issuer.reads(), 2, "no other read began");

    issuer.release();
    let unknown = unknown.await.unwrap();
    assert_eq!(unknown.status, 401, "{unknown:?}");
    assert!(
        unknown
            .header("www-authenticate")
            .is_some_and(|value| value.contains("does not publish")),
        "{unknown:?}"
    );
}

/// Checks that need the keys while none are in use share the one read
/// under way; a key rotated in just after is refused at once, with no
/// read, until the refresh period has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_waiting_for_the_keys_share_one_read() {
    let issuer = Issuer::start(Mode::Hold, &[&KEY_1]).await;
    let addr = start(&issuer, Duration::from_secs(60), HttpOptions::new()).await;
    let waiting: Vec<_> = (0..20)
        .map(|n| {
            let token = issuer.token(&KEY_1, &format!("user-{n}"));
            tokio::spawn(async move { initialize(addr, &token).await })
        })
        .collect();
    issuer.reads_reach(1).await;
    issuer.release();
    for answer in waiting {
        let answer = answer.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    assert_eq!(issuer.reads(), 1, "twenty checks, one read");

    issuer.publish(&[&KEY_1, &KEY_2]);
    let rotated = initialize(addr, &issuer.token(&KEY_2, "alice")).await;
    assert_eq!(rotated.status, 401, "{rotated:?}");
    assert_eq!(issuer.reads(), 1, "no read within the refresh period");
}

/// A key the issuer rotates in is found by reading the keys again once the
/// refresh period has passed, and then kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_found_once_a_read_is_allowed() {
    let refresh = Duration::from_millis(100);
    let (issuer, addr) = alice_signed_in(refresh).await;
    issuer.publish(&[&KEY_2]);
    tokio::time::sleep(refresh * 2).await;
    assert_eq!(signed_in(addr, &issuer, &KEY_2, "alice").await, 200);
    assert_eq!(issuer.reads(), 2);
    assert_eq!(signed_in(addr, &issuer, &KEY_2, "bob").await, 200);
    assert_eq!(issuer.reads(), 2, "the rotated key is kept");
}

// ------------------------------------------------------------------ the principal's claims

/// A subject or a client a principal would carry that is empty, blank,
/// padded, holds a control character or one that reorders or hides text,
/// or is too long, is `401 invalid_token` with the claim named; a token
/// without `sub`, or with one that is not a string, too. Before, an empty
/// `sub` made a principal with an empty subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_of_empty_or_hidden_text_is_refused() {
    let issuer = Issuer::start(Mode::Serve, &[&KEY_1]).await;
    let addr = start(&issuer, Duration::from_secs(60), HttpOptions::new()).await;
    let good = claims(issuer.url(), "alice");
    let with = |claim: &str, value: Value| {
        let mut claims = good.clone();
        claims[claim] = value;
        claims
    };
    let without = |claim: &str| {
        let mut claims = good.clone();
        claims.as_object_mut().unwrap().remove(claim);
        claims
    };
    let long = "a".repeat(1025);
    let cases = [
        (with("sub", json!("")), "subject (sub) is empty"),
        (with("sub", json!("   ")), "subject (sub) is empty"),
        (
            with("sub", json!(" alice")),
            "subject (sub) begins or ends with whitespace",
        ),
        (
            with("sub", json!("alice\n")),
            "subject (sub) begins or ends with whitespace",
        ),
        (
            with("sub", json!("al\u{1b}[2Jice")),
            "subject (sub) holds a control character",
        ),
        (
            with("sub", json!("ali\u{202e}ce")),
            "subject (sub) holds a control character",
        ),
        (
            with("sub", json!("ali\u{200b}ce")),
            "subject (sub) holds a control character",
        ),
        (with("sub", json!(long)), "subject (sub) is over 1024 bytes"),
        (with("sub", json!(42)), "not of the types expected"),
        (without("sub"), "lacks the claim sub"),
        (with("client_id", json!("")), "client (client_id) is empty"),
        (
            with("client_id", json!("desk\u{7}")),
            "client (client_id) holds a control",
        ),
        (with("azp", json!(" ")), "client (azp) is empty"),
        (
            with("azp", json!("desk\u{2066}")),
            "client (azp) holds a control",
        ),
    ];
    for (claims, why) in cases {
        let token = KEY_1.sign(Some(KEY_1.kid), &claims);
        let answer = initialize(addr, &token).await;
        assert_eq!(answer.status, 401, "{claims}: {answer:?}");
        let challenge = answer.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"invalid_token\"") && challenge.contains(why),
            "{claims}: {challenge}"
        );
    }
    // The same claims, well formed, are taken.
    let answer = initialize(addr, &KEY_1.sign(Some(KEY_1.kid), &good)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let spaced = with("sub", json!("Alice Smith"));
    let answer = initialize(addr, &KEY_1.sign(Some(KEY_1.kid), &spaced)).await;
    assert_eq!(answer.status, 200, "a subject may hold a space: {answer:?}");
}

// ------------------------------------------------------------------ sessions per principal

/// One principal opens as many sessions as a principal may, and its next
/// is `429`; another principal mapped to the same caller still opens its
/// own. Before, only the caller's 64 held, and one principal's sessions
/// locked every other out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_sessions_leave_room_for_another() {
    let issuer = Issuer::start(Mode::Serve, &[&KEY_1]).await;
    let addr = start(&issuer, Duration::from_secs(60), HttpOptions::new()).await;
    let alice = issuer.token(&KEY_1, "alice");
    let mut sessions = Vec::new();
    for _ in 0..MAX_SESSIONS_PER_PRINCIPAL {
        let answer = initialize(addr, &alice).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        sessions.push(answer.header("mcp-session-id").unwrap().to_owned());
    }
    let over = initialize(addr, &alice).await;
    assert_eq!(over.status, 429, "{over:?}");
    assert!(over.body.contains("this token's subject"), "{over:?}");
    assert_eq!(over.header("retry-after"), Some("60"));
    // Another token of alice's is alice, through another client too: no
    // way around the bound.
    let again = initialize(addr, &issuer.token(&KEY_1, "alice")).await;
    assert_eq!(again.status, 429, "{again:?}");
    let mut elsewhere = claims(issuer.url(), "alice");
    elsewhere["client_id"] = json!("another-client");
    let elsewhere = initialize(addr, &KEY_1.sign(Some(KEY_1.kid), &elsewhere)).await;
    assert_eq!(elsewhere.status, 429, "{elsewhere:?}");

    let bob = initialize(addr, &issuer.token(&KEY_1, "bob")).await;
    assert_eq!(bob.status, 200, "{bob:?}");

    // alice ends one: alice may open another.
    let auth = format!("Bearer {alice}");
    let ended = send_bytes(
        addr,
        "DELETE",
        &[
            ("Authorization", auth.as_bytes()),
            ("Mcp-Session-Id", sessions[0].as_bytes()),
        ],
        b"",
    )
    .await;
    assert!(ended.status < 300, "{ended:?}");
    assert_eq!(initialize(addr, &alice).await.status, 200);
}

/// The caller's bound holds over its principals all together, and the
/// principal's within it, each as set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_bound_holds_over_all_its_principals() {
    let issuer = Issuer::start(Mode::Serve, &[&KEY_1]).await;
    let http = HttpOptions::new()
        .max_sessions_per_caller(3)
        .max_sessions_per_principal(2);
    let addr = start(&issuer, Duration::from_secs(60), http).await;
    let (alice, bob, carol) = (
        issuer.token(&KEY_1, "alice"),
        issuer.token(&KEY_1, "bob"),
        issuer.token(&KEY_1, "carol"),
    );
    // Two of alice's at once: both open (one at a time, so never three).
    let (one, two) = tokio::join!(initialize(addr, &alice), initialize(addr, &alice));
    assert_eq!((one.status, two.status), (200, 200), "{one:?} {two:?}");
    assert_eq!(initialize(addr, &alice).await.status, 429);
    assert_eq!(initialize(addr, &bob).await.status, 200);
    let over = initialize(addr, &carol).await;
    assert_eq!(over.status, 429, "{over:?}");
    assert!(over.body.contains("this caller"), "{over:?}");
}

/// The conversations named in `_meta` are bounded per principal: one
/// principal that named as many as allowed leaves another its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_conversations_are_bounded_per_principal() {
    let issuer = Issuer::start(Mode::Serve, &[&KEY_1]).await;
    let options = Options::new("oauth-test").max_named_conversations(1);
    let addr = start_with(
        &issuer,
        Duration::from_secs(60),
        HttpOptions::new(),
        options,
    )
    .await;
    let call = |token: String, conversation: &'static str| async move {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"hello","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{{"name":"raw","version":"1"}},"io.modelcontextprotocol/clientCapabilities":{{}},"toolcall/conversation":"{conversation}"}}}}}}"#
        );
        let auth = format!("Bearer {token}");
        let answer = send_bytes(
            addr,
            "POST",
            &[
                ("MCP-Protocol-Version", b"2026-07-28"),
                ("Mcp-Method", b"tools/call"),
                ("Mcp-Name", b"hello"),
                ("Authorization", auth.as_bytes()),
            ],
            body.as_bytes(),
        )
        .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.body
    };
    let alice = issuer.token(&KEY_1, "alice");
    assert!(call(alice.clone(), "a-1").await.contains("world"));
    let second = call(alice, "a-2").await;
    assert!(second.contains("already named"), "{second}");
    let bob = call(issuer.token(&KEY_1, "bob"), "b-1").await;
    assert!(bob.contains("world"), "{bob}");
}

// ------------------------------------------------------------------ any header, any token

/// One server for the property below, over the test process's life: its
/// runtime, its issuer, its address.
struct World {
    runtime: tokio::runtime::Runtime,
    issuer: Issuer,
    addr: SocketAddr,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (issuer, addr) = runtime.block_on(async {
            let issuer = Issuer::start(Mode::Serve, &[&KEY_1]).await;
            let http = HttpOptions::new()
                .max_sessions_per_caller(100_000)
                .max_sessions_per_principal(100_000);
            let addr = start(&issuer, Duration::from_secs(60), http).await;
            (issuer, addr)
        });
        World {
            runtime,
            issuer,
            addr,
        }
    })
}

/// base64url without padding, as JWTs write their parts.
fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (at, byte)| n | u32::from(*byte) << (16 - 8 * at));
        for at in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * at) & 63) as usize] as char);
        }
    }
    out
}

/// A JSON value of a few shapes, for a header's or claims' field.
fn any_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        prop::collection::vec(".{0,8}", 0..3).prop_map(Value::from),
    ]
}

/// A field of a token: as a good token has it, absent, or anything.
#[derive(Clone, Debug)]
enum Field {
    Good,
    Absent,
    Bad(Value),
}

fn field(bad: impl Strategy<Value = Value>) -> impl Strategy<Value = Field> {
    prop_oneof![
        4 => Just(Field::Good),
        1 => Just(Field::Absent),
        2 => bad.prop_map(Field::Bad),
    ]
}

/// Text a principal must not be made of.
fn bad_identity() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("")),
        Just(json!(" ")),
        Just(json!(" alice")),
        Just(json!("alice\t")),
        "[a-z]{0,4}[\u{0}-\u{1f}\u{7f}\u{202a}-\u{202e}\u{2066}-\u{2069}\u{200b}][a-z]{0,4}"
            .prop_map(Value::from),
        any_json().prop_filter("not a string", |value| !value.is_string()),
    ]
}

/// The claims of a token signed with the issuer's key, each field good,
/// absent or bad; and whether the token is one to take.
fn signed_claims(issuer: &str) -> impl Strategy<Value = (Value, bool)> + use<> {
    let issuer = issuer.to_owned();
    (
        field(prop_oneof![
            Just(json!("https://other.example")),
            any_json()
        ]),
        field(prop_oneof![
            Just(json!("https://other.example/mcp")),
            any_json()
        ]),
        field(prop_oneof![
            Just(json!(1)),
            Just(json!(now() - 3600)),
            any_json().prop_filter("not a number", |value| !value.is_number()),
        ]),
        field(bad_identity()),
        field(bad_identity()),
        field(bad_identity()),
        field(any_json().prop_filter("not a string", |value| !value.is_string())),
    )
        .prop_map(move |(iss, aud, exp, sub, client_id, azp, scope)| {
            let mut claims = serde_json::Map::new();
            let mut good = true;
            let mut set = |name: &str, field: Field, value: Value, optional: bool| match field {
                Field::Good => {
                    claims.insert(name.to_owned(), value);
                }
                Field::Absent => good &= optional,
                Field::Bad(value) => {
                    // A value that happens to be good stays good; a null
                    // optional claim is an absent one.
                    good &= match name {
                        _ if optional && value.is_null() => true,
                        "sub" | "client_id" | "azp" => false,
                        "iss" => value == json!(issuer),
                        "aud" => value == json!(AUDIENCE),
                        _ => false,
                    };
                    claims.insert(name.to_owned(), value);
                }
            };
            set("iss", iss, json!(issuer), false);
            set("aud", aud, json!(AUDIENCE), false);
            set("exp", exp, json!(now() + 3600), false);
            set("sub", sub, json!("alice"), false);
            set("client_id", client_id, json!("desk"), true);
            set("azp", azp, json!("desk"), true);
            set("scope", scope, json!("mcp.read"), true);
            (Value::Object(claims), good)
        })
}

/// What is sent as `Authorization`, and whether it should be taken.
fn authorization(issuer: &str) -> impl Strategy<Value = (Vec<u8>, bool)> + use<> {
    // The bytes a header value may hold (HTAB, SP, VCHAR, obs-text).
    let header_byte = prop_oneof![Just(b'\t'), 0x20u8..=0x7e, 0x80u8..=0xff];
    let scheme = prop_oneof![
        Just("Bearer ".to_owned()),
        Just("bearer  ".to_owned()),
        Just("Basic ".to_owned()),
        Just(String::new()),
    ];
    let segment = "[A-Za-z0-9_=+/-]{0,40}";
    let header = (
        prop_oneof![
            Just(json!("EdDSA")),
            Just(json!("RS256")),
            Just(json!("HS256")),
            Just(json!("none")),
            any_json(),
        ],
        prop_oneof![Just(json!(KEY_1.kid)), Just(json!("made-up")), any_json()],
        any::<bool>(),
    )
        .prop_map(|(alg, kid, with_kid)| {
            let mut header = json!({"alg": alg, "typ": "JWT"});
            if with_kid {
                header["kid"] = kid;
            }
            header
        });
    prop_oneof![
        // Any bytes at all.
        prop::collection::vec(header_byte, 0..300).prop_map(|bytes| (bytes, false)),
        // A bearer of anything shaped like a JWT.
        (scheme.clone(), prop::collection::vec(segment, 0..5)).prop_map(|(scheme, parts)| {
            (format!("{scheme}{}", parts.join(".")).into_bytes(), false)
        }),
        // A header and claims of any fields, signed with nothing that checks.
        (
            header,
            any_json(),
            prop::collection::vec(any::<u8>(), 0..80)
        )
            .prop_map(|(header, claims, signature)| {
                let token = format!(
                    "{}.{}.{}",
                    b64(header.to_string().as_bytes()),
                    b64(claims.to_string().as_bytes()),
                    b64(&signature)
                );
                (format!("Bearer {token}").into_bytes(), false)
            }),
        // Claims of every kind, signed with the issuer's key.
        signed_claims(issuer).prop_map(|(claims, good)| {
            let token = KEY_1.sign(Some(KEY_1.kid), &claims);
            (format!("Bearer {token}").into_bytes(), good)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any `Authorization` value, any token: never a panic nor a `5xx`;
    /// `401` with a `Bearer` challenge for all but good tokens (an
    /// `error_description` when it was a token), which are taken.
    #[test]
    fn any_authorization_is_taken_or_refused_with_a_challenge(
        (value, good) in authorization(world().issuer.url())
    ) {
        let world = world();
        let answer = world.runtime.block_on(send_bytes(
            world.addr,
            "POST",
            &[("Authorization", &value)],
            INITIALIZE.as_bytes(),
        ));
        if good {
            prop_assert_eq!(answer.status, 200, "{:?}", answer);
        } else {
            prop_assert_eq!(answer.status, 401, "{:?}", answer);
            let challenge = answer.header("www-authenticate").unwrap_or_default();
            prop_assert!(challenge.starts_with("Bearer "), "{:?}", answer);
            let bearer = value.len() > 7 && value[..7].eq_ignore_ascii_case(b"bearer ")
                && !value[7..].iter().all(u8::is_ascii_whitespace);
            if bearer && value.is_ascii() {
                prop_assert!(
                    challenge.contains("error=\"invalid_token\", error_description=\""),
                    "{:?}", answer
                );
            }
        }
    }
}
