//! `orders mcp --http --oauth-issuer URL --oauth-audience URI`: the MCP
//! server as an OAuth 2.1 resource server, against a real authorization
//! server the tests start (the npm package `oauth2-mock-server`, driven by
//! `toolcall-mcp/tests/oauth/authorization-server.cjs`): its metadata, the
//! challenges of its 401s and 403s, every kind of token it must refuse,
//! the scopes of its tools, a rotated key, and the principal recorded in
//! the audit and in the question a person answers. What is counted is read
//! from the shop's own tables and the store.
//!
//! Needs Node (>= 20.19) and npm; without them the tests say loudly that
//! they were skipped, unless `TOOLCALL_REQUIRE_OAUTH_SERVER=1` (CI sets
//! it), which makes that a failure.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Client, Server, decide, refund, runtime, scratch, send_http, sqlite_refunds};
use toolcall::store::prelude::*;

/// The resource URI the servers here are for (their tokens' `aud`).
const AUDIENCE: &str = "https://orders.example.com/mcp";

/// Where its protected resource metadata is, as its 401s name it.
const METADATA_URL: &str = "https://orders.example.com/.well-known/oauth-protected-resource/mcp";

/// The harness's directory of `node_modules`, installed once per test
/// process (`None`: no Node or npm here, and not required).
fn modules() -> Option<&'static Path> {
    static MODULES: OnceLock<Option<PathBuf>> = OnceLock::new();
    MODULES
        .get_or_init(|| {
            let harness = harness();
            let version = std::fs::read_to_string(harness.with_file_name("VERSION")).unwrap();
            let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oauth-server");
            let installed = prefix.join("node_modules/oauth2-mock-server/package.json");
            let ok = installed.exists()
                || Command::new("npm")
                    .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
                    .arg(&prefix)
                    .arg(format!("oauth2-mock-server@{}", version.trim()))
                    .status()
                    .is_ok_and(|status| status.success());
            if ok {
                return Some(prefix.join("node_modules"));
            }
            assert!(
                std::env::var_os("TOOLCALL_REQUIRE_OAUTH_SERVER").is_none(),
                "TOOLCALL_REQUIRE_OAUTH_SERVER is set, and oauth2-mock-server could not be \
                 installed with npm"
            );
            eprintln!("SKIPPED: no npm to install oauth2-mock-server (the OAuth tests)");
            None
        })
        .as_deref()
}

fn harness() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../toolcall-mcp/tests/oauth/authorization-server.cjs")
}

/// The authorization server: a Node process, driven a JSON line at a time.
struct AuthServer {
    child: Child,
    io: Mutex<(ChildStdin, BufReader<ChildStdout>)>,
    issuer: String,
}

impl AuthServer {
    /// Starts it, or `None` where it cannot run (see [`modules`]).
    fn start() -> Option<AuthServer> {
        let modules = modules()?;
        let mut child = Command::new("node")
            .arg(harness())
            .env("OAUTH_MODULES", modules)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node runs the authorization server");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let started: Value = serde_json::from_str(&first)
            .unwrap_or_else(|e| panic!("the authorization server said {first:?}: {e}"));
        let issuer = started["issuer"].as_str().unwrap().to_owned();
        Some(AuthServer {
            child,
            io: Mutex::new((stdin, stdout)),
            issuer,
        })
    }

    fn ask(&self, command: Value) -> Value {
        let mut io = self.io.lock().unwrap();
        writeln!(io.0, "{command}").unwrap();
        io.0.flush().unwrap();
        let mut line = String::new();
        io.1.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert!(answer.get("error").is_none(), "{command}: {answer}");
        answer
    }

    /// A token with the usual claims (subject `alice`, client `desk`, this
    /// server's audience, an hour to live), `changes` merged over them.
    /// `drop_NAME: true` leaves the claim `NAME` out.
    fn token(&self, changes: Value) -> String {
        let mut command = json!({"op": "token", "sub": "alice", "client_id": "desk",
            "aud": AUDIENCE, "scope": "orders.read orders.write", "expires_in": 3600});
        for (name, value) in changes.as_object().unwrap() {
            match name.strip_prefix("drop_") {
                Some(claim) => {
                    command.as_object_mut().unwrap().remove(claim);
                }
                None => command[name] = value.clone(),
            }
        }
        self.ask(command)["token"].as_str().unwrap().to_owned()
    }

    fn jwks_reads(&self) -> u64 {
        self.ask(json!({"op": "jwks_reads"}))["count"]
            .as_u64()
            .unwrap()
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One test's world: the authorization server, and `orders mcp --http`
/// behind it on a SQLite file of its own, writing its audit beside it.
struct Scene {
    auth: AuthServer,
    server: Option<Server>,
    dir: PathBuf,
    db: PathBuf,
    audit: PathBuf,
}

impl Scene {
    /// Starts both, `args` given to `orders` besides the store, the
    /// issuer, the audience, the audit and `--approvals inbox`; `None`
    /// where the authorization server cannot run (see [`modules`]).
    fn start(name: &str, args: &[&str]) -> Option<Scene> {
        let auth = AuthServer::start()?;
        let dir = scratch(name);
        let db = dir.join("shop.db");
        let audit = dir.join("audit.jsonl");
        let store = format!("sqlite:{}", db.display());
        let mut all = vec![
            "--store",
            &store,
            "--audit",
            audit.to_str().unwrap(),
            "--oauth-issuer",
            &auth.issuer,
            "--oauth-audience",
            AUDIENCE,
            "--approvals",
            "inbox",
        ];
        all.extend_from_slice(args);
        let server = Some(Server::start(&all));
        Some(Scene {
            auth,
            server,
            dir,
            db,
            audit,
        })
    }

    fn server(&self) -> &Server {
        self.server.as_ref().unwrap()
    }

    /// A session of the principal whose token `changes` makes (see
    /// [`AuthServer::token`]).
    fn client(&self, changes: Value, capabilities: Value) -> Client {
        let auth = format!("Bearer {}", self.auth.token(changes));
        Client::open_as(self.server().addr, &auth, capabilities)
    }

    /// An `initialize` with `Authorization: Bearer token`.
    fn initialize(&self, token: &str) -> super::Answer {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": super::PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "raw-http", "version": "1"}}});
        let auth = format!("Bearer {token}");
        super::post(
            self.server().addr,
            &[("Authorization", &auth)],
            &init.to_string(),
        )
    }

    /// Stops the server and reads its audit.
    fn audit(&mut self) -> Vec<Value> {
        drop(self.server.take());
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        drop(self.server.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The metadata names the issuer and the scopes; a request without a token
/// is pointed to it; and every token that must not be taken is refused with
/// `invalid_token`, the shop untouched.
#[test]
fn the_metadata_points_to_the_issuer_and_every_bad_token_is_refused() {
    let Some(scene) = Scene::start("oauth-refused", &[]) else {
        return;
    };
    let (auth, server) = (&scene.auth, scene.server());
    assert!(
        server.start.last().unwrap().contains("OAuth"),
        "{:?}",
        server.start
    );

    let metadata = send_http(
        server.addr,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        &[],
        "",
    );
    assert_eq!(metadata.status, 200, "{metadata:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&metadata.body).unwrap(),
        json!({"resource": AUDIENCE, "authorization_servers": [auth.issuer],
               "scopes_supported": ["orders.read", "orders.write"],
               "bearer_methods_supported": ["header"]})
    );

    let none = super::post(server.addr, &[], "{}");
    assert_eq!(none.status, 401, "{none:?}");
    let expected =
        format!("Bearer resource_metadata=\"{METADATA_URL}\", scope=\"orders.read orders.write\"");
    assert_eq!(none.header("www-authenticate"), Some(expected.as_str()));

    let refused = [
        ("expired", json!({"expires_in": -3600})),
        ("not yet valid", json!({"nbf_in": 3600})),
        (
            "another audience",
            json!({"aud": "https://elsewhere.example.com/mcp"}),
        ),
        ("no audience", json!({"drop_aud": true})),
        ("another issuer", json!({"iss": "http://127.0.0.1:9"})),
        ("no subject", json!({"drop_sub": true})),
        ("alg none", json!({"alg": "none"})),
        (
            "HMAC keyed with the public key",
            json!({"alg": "HS256-public-key"}),
        ),
    ];
    for (what, changes) in refused {
        let answer = scene.initialize(&auth.token(changes));
        assert_eq!(answer.status, 401, "{what}: {answer:?}");
        let challenge = answer.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\"")
                && challenge.contains(METADATA_URL),
            "{what}: {challenge}"
        );
    }
    let garbage = scene.initialize("not.a.token");
    assert_eq!(garbage.status, 401, "{garbage:?}");
    let huge = format!("{}.{}.{}", "e".repeat(8_000), "e".repeat(12_000), "e");
    let answer = scene.initialize(&huge);
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(
        answer
            .header("www-authenticate")
            .is_some_and(|c| c.contains("over 16384 bytes")),
        "{answer:?}"
    );

    // A good token opens a session; the shop was never touched.
    assert_eq!(scene.initialize(&auth.token(json!({}))).status, 200);
    assert_eq!(sqlite_refunds(&scene.db), (0, 0));
}

/// A token with only `orders.read` reads, and its refund is `403
/// insufficient_scope` naming `orders.write`, nothing asked nor refunded;
/// the same principal with both scopes goes on in the same session, and its
/// refund's question, the audit record and the approval carry who asked.
#[test]
fn a_missing_scope_is_403_and_the_principal_reaches_the_audit_and_the_question() {
    let Some(mut scene) = Scene::start("oauth-scope", &[]) else {
        return;
    };
    let mut client = scene.client(json!({"scope": "orders.read"}), json!({}));
    let order = client.call("get_order", json!({"order_id": "ORD-1001"}));
    assert_eq!(order["ok"], true, "{order}");

    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "refund_order", "arguments": refund(2590)}});
    let forbidden = client.send(&call);
    assert_eq!(forbidden.status, 403, "{forbidden:?}");
    let challenge = forbidden.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\"")
            && challenge.contains("scope=\"orders.read orders.write\"")
            && challenge.contains(METADATA_URL),
        "{challenge}"
    );

    let store = toolcall_sqlite::SqliteStore::open(&scene.db).unwrap();
    let runtime = runtime();
    let pending = || {
        runtime
            .block_on(store.pending_approvals(toolcall::store::now_ms(), 10))
            .unwrap()
    };
    assert!(pending().is_empty(), "nothing was asked");
    assert_eq!(sqlite_refunds(&scene.db), (0, 0));

    // Step-up: the same principal, both scopes, the same session.
    client.auth = format!("Bearer {}", scene.auth.token(json!({})));
    let asked = client.call("refund_order", refund(2590));
    assert_eq!(asked["code"], "CONFIRMATION_REQUIRED", "{asked}");
    let questions = pending();
    assert_eq!(questions.len(), 1, "{questions:?}");
    let principal = questions[0]
        .principal
        .as_ref()
        .expect("the question says who");
    assert_eq!(
        (
            principal.issuer.as_str(),
            principal.subject.as_str(),
            principal.client_id.as_deref()
        ),
        (scene.auth.issuer.as_str(), "alice", Some("desk"))
    );
    assert_eq!(questions[0].caller, "default");

    runtime.block_on(decide(&store, &questions[0].id));
    let made = client.call("refund_order", refund(2590));
    assert_eq!(made["ok"], true, "{made}");
    assert_eq!(sqlite_refunds(&scene.db), (1, 2590));

    let issuer = scene.auth.issuer.clone();
    let records = scene.audit();
    assert_eq!(
        records.len(),
        3,
        "get_order, the question, the refund: {records:?}"
    );
    for record in &records {
        assert_eq!(
            record["principal"],
            json!({"issuer": issuer, "subject": "alice", "client_id": "desk"}),
            "{record}"
        );
    }
}

/// A key the issuer rotates in is found by reading its keys again, but no
/// more than once per `--oauth-keys-refresh`: a token signed with it right
/// after the first read is refused with no second read, and taken once the
/// time has passed.
#[test]
fn a_rotated_key_is_found_with_the_keys_read_again_at_a_bounded_rate() {
    let Some(scene) = Scene::start("oauth-rotate", &["--oauth-keys-refresh", "6"]) else {
        return;
    };
    let auth = &scene.auth;
    assert_eq!(scene.initialize(&auth.token(json!({}))).status, 200);
    assert_eq!(auth.jwks_reads(), 1, "the keys are read once, then kept");
    assert_eq!(scene.initialize(&auth.token(json!({}))).status, 200);
    assert_eq!(auth.jwks_reads(), 1);

    auth.ask(json!({"op": "rotate"}));
    let rotated = auth.token(json!({}));
    for _ in 0..5 {
        let early = scene.initialize(&rotated);
        assert_eq!(early.status, 401, "{early:?}");
    }
    assert_eq!(auth.jwks_reads(), 1, "no read again within the interval");
    std::thread::sleep(Duration::from_millis(6100));
    let later = scene.initialize(&rotated);
    assert_eq!(later.status, 200, "{later:?}");
    assert_eq!(
        auth.jwks_reads(),
        2,
        "one read again, once the interval passed"
    );
}

/// With caller rules, a principal no rule admits is refused; a session is
/// its principal's: another principal naming it is answered as an unknown
/// session, and nothing it asks runs.
#[test]
fn a_principal_no_rule_admits_is_refused_and_a_session_is_its_principals() {
    let Some(mut scene) = Scene::start(
        "oauth-rules",
        &[
            "--oauth-caller",
            "default=client_id:desk",
            "--allow",
            "get_order,add_note",
        ],
    ) else {
        return;
    };
    let stranger = scene.auth.token(json!({"client_id": "elsewhere"}));
    let refused = scene.initialize(&stranger);
    assert_eq!(refused.status, 403, "{refused:?}");

    let alice = scene.client(json!({}), json!({}));
    let hijack = Client {
        addr: alice.addr,
        auth: format!("Bearer {}", scene.auth.token(json!({"sub": "bob"}))),
        session: alice.session.clone(),
        next_id: 9,
    };
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "add_note", "arguments": {"order_id": "ORD-1001", "text": "hi"}}});
    let answer = hijack.send(&call);
    assert_eq!(answer.status, 404, "{answer:?}");
    // Bob in a session of his own is served.
    let mut own = scene.client(json!({"sub": "bob"}), json!({}));
    let order = own.call("get_order", json!({"order_id": "ORD-1001"}));
    assert_eq!(order["ok"], true, "{order}");
    let tools: Vec<Value> = scene.audit().iter().map(|r| r["tool"].clone()).collect();
    assert_eq!(tools, [json!("get_order")], "the hijacked call never ran");
}

/// Two people mapped to one caller who name the same conversation in
/// `_meta` do not share it: the second one's note is written, not replayed
/// from the first's; and a token without the write scope gets no durable
/// task's state (`tasks/get` may carry a decided call out).
#[test]
fn two_principals_of_one_caller_share_no_named_conversation_and_tasks_need_the_write_scope() {
    let Some(scene) = Scene::start("oauth-named", &["--allow", "get_order,add_note"]) else {
        return;
    };
    let note = |client: &mut Client| {
        let result = client.request(
            "tools/call",
            json!({"name": "add_note", "arguments": {"order_id": "ORD-1001", "text": "called back"},
                   "_meta": {"toolcall/conversation": "ticket-7"}}),
        );
        result["structuredContent"].clone()
    };
    let mut alice = scene.client(json!({}), json!({}));
    let mut bob = scene.client(json!({"sub": "bob"}), json!({}));
    let first = note(&mut alice);
    assert_eq!(first["ok"], true, "{first}");
    let second = note(&mut bob);
    assert_eq!(second["ok"], true, "{second}");
    assert!(second.get("replayed").is_none(), "bob's own call: {second}");
    let again = note(&mut alice);
    assert_eq!(
        again["replayed"], true,
        "alice's identical call is hers: {again}"
    );
    let notes: i64 = rusqlite::Connection::open(&scene.db)
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM orders_notes WHERE order_id = 'ORD-1001'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(notes, 2, "one note each");

    let reader = scene.client(
        json!({"scope": "orders.read"}),
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    );
    let get = reader.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
        "params": {"taskId": "anything"}}));
    assert_eq!(get.status, 403, "{get:?}");
    assert!(
        get.header("www-authenticate")
            .is_some_and(|challenge| challenge.contains("orders.write")),
        "{get:?}"
    );
}

/// The options that cannot go together are refused at start.
#[test]
fn oauth_options_that_cannot_work_are_refused_at_start() {
    const HTTPS: &str = "https://auth.example.com";
    for (issuer, audience, caller, says) in [
        (HTTPS, None, None, "--oauth-audience"),
        (
            "http://auth.example.com",
            Some(AUDIENCE),
            None,
            "plain http",
        ),
        (HTTPS, Some(AUDIENCE), Some("nobody=*"), "nobody"),
        (
            HTTPS,
            Some(AUDIENCE),
            Some("default=email:x"),
            "CALLER=sub:SUBJECT",
        ),
    ] {
        let mut all = vec!["mcp", "--http", "127.0.0.1:0", "--oauth-issuer", issuer];
        if let Some(audience) = audience {
            all.extend(["--oauth-audience", audience]);
        }
        if let Some(caller) = caller {
            all.extend(["--oauth-caller", caller]);
        }
        let error = super::refused(&all);
        assert!(error.contains(says), "{all:?}: {error}");
    }
}
