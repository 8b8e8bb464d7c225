//! Signing in, over a real socket: the limit on wrong tokens per client
//! address (the tests connect from 127.0.0.1 and 127.0.0.2, both loopback
//! on Linux), sign-in records that signing out deletes and that expire,
//! the list of a person's sign-ins, the `Secure` cookie, and the bound on
//! a person's note.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::net::{TcpListener, TcpSocket};
use toolcall::__private::echo::{MAX_NOTE_BYTES, bound};
use toolcall::store::ApprovalEntry;
use toolcall::store::prelude::*;
use toolcall::{Call, Code, Dispatcher, tools};
use toolcall_inbox::{Access, MAX_FAILURES, Options, Parts};
use toolcall_sqlite::SqliteStore;
use toolcall_testkit::inbox::{self as kit, ANA, BO, Reply, encode, pay};

const ONE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const TWO: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

struct Inbox {
    addr: SocketAddr,
    store: Arc<SqliteStore>,
    dispatcher: Dispatcher<(), Arc<SqliteStore>>,
}

async fn inbox(options: impl FnOnce(Options) -> Options) -> Inbox {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let dispatcher = Dispatcher::builder(tools![pay].unwrap(), Arc::new(()))
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let access = Access::parse(&format!("ana {ANA}\nbo {BO}\n"), "x").unwrap();
    let backend = Arc::new(Parts {
        store: Arc::clone(&store),
        registry: tools![pay].unwrap(),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(toolcall_inbox::serve(
        backend,
        options(Options::new(access).title("shop")),
        listener,
    ));
    Inbox {
        addr,
        store,
        dispatcher,
    }
}

impl Inbox {
    /// One HTTP/1.1 request on its own connection, from the address `from`.
    async fn http(
        &self,
        from: IpAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        form: Option<&[(&str, &str)]>,
    ) -> Reply {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(from, 0)).unwrap();
        let stream = socket.connect(self.addr).await.unwrap();
        let body = form.map(encode);
        let host = self.addr.to_string();
        kit::exchange(
            stream,
            &kit::request(method, path, &host, headers, body.as_deref()),
        )
        .await
    }

    async fn get(&self, from: IpAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.http(from, "GET", path, headers, None).await
    }

    /// Signs in with `token` from `from`: the answer (303 and a cookie).
    async fn sign_in(&self, from: IpAddr, token: &str, headers: &[(&str, &str)]) -> Reply {
        self.get(from, &format!("/?token={token}"), headers).await
    }

    /// The CSRF token of the sign-in `cookie` names, from its page.
    async fn csrf(&self, cookie: &str) -> String {
        let page = self.get(ONE, "/", &[("Cookie", cookie)]).await;
        assert_eq!(page.status, 200);
        let at = page.body.find("name=\"csrf\" value=\"").expect("a form") + 19;
        page.body[at..at + 64].to_owned()
    }

    /// Posts the page's form to `path` from [`ONE`] as the sign-in `cookie`
    /// names, with its CSRF token.
    async fn post_form(&self, cookie: &str, path: &str) -> Reply {
        let csrf = self.csrf(cookie).await;
        let form: &[(&str, &str)] = &[("csrf", &csrf)];
        self.http(ONE, "POST", path, &[("Cookie", cookie)], Some(form))
            .await
    }

    /// Asks from [`ONE`] to revoke sign-ins, with `credential` and no form.
    async fn revoke(&self, credential: (&str, &str)) -> Reply {
        let no_form: &[(&str, &str)] = &[];
        self.http(
            ONE,
            "POST",
            "/sessions/revoke",
            &[credential],
            Some(no_form),
        )
        .await
    }

    /// Denies `id` with `note`, as a program does with ana's token.
    async fn deny(&self, id: &str, note: &str) -> Reply {
        let bearer = format!("Bearer {ANA}");
        let path = format!("/approvals/{id}/decide");
        let form: &[(&str, &str)] = &[("action", "deny"), ("note", note)];
        self.http(
            ONE,
            "POST",
            &path,
            &[("Authorization", &bearer)],
            Some(form),
        )
        .await
    }

    /// Asks for approval of a payment of `amount_cents`, as an agent does.
    async fn ask(&self, amount_cents: i64) -> String {
        let arguments = json!({"to": "acme", "amount_cents": amount_cents}).to_string();
        let asked = self
            .dispatcher
            .execute(Call::new("pay", arguments.as_str()).session("s"))
            .await;
        assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
        asked.question_id.unwrap()
    }

    async fn entry(&self, id: &str) -> ApprovalEntry {
        self.store.approval(id).await.unwrap().unwrap()
    }
}

fn retry_after(reply: &Reply) -> u64 {
    reply
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap()
}

#[tokio::test]
async fn three_hundred_wrong_tokens_meet_the_limit_while_another_address_signs_in() {
    let inbox = inbox(|options| options).await;
    // Signed in before the attack, from the address that then attacks.
    let before = inbox.sign_in(ONE, ANA, &[]).await;
    assert_eq!(before.status, 303);
    let cookie = before.cookie();

    let mut statuses = Vec::new();
    for i in 0..300 {
        let wrong = format!("ana-0123456789abc{i:03}");
        let reply = match i % 3 {
            0 => inbox.sign_in(ONE, &wrong, &[]).await,
            1 => {
                let bearer = format!("Bearer {wrong}");
                inbox
                    .get(ONE, "/api/pending", &[("Authorization", &bearer)])
                    .await
            }
            _ => {
                let forged = format!("toolcall_inbox={:032x}", i);
                inbox.get(ONE, "/", &[("Cookie", &forged)]).await
            }
        };
        assert!(
            reply
                .header("set-cookie")
                .is_none_or(|c| c.contains("Max-Age=0"))
        );
        if reply.status == 429 {
            let wait = retry_after(&reply);
            assert!((1..=60).contains(&wait), "{wait}");
            assert!(reply.body.contains("Too many wrong tokens"));
        }
        statuses.push(reply.status);
    }
    let allowed = usize::try_from(MAX_FAILURES).unwrap();
    assert_eq!(MAX_FAILURES, 10);
    assert!(
        statuses[..allowed].iter().all(|s| *s == 401),
        "{statuses:?}"
    );
    assert!(
        statuses[allowed..].iter().all(|s| *s == 429),
        "{statuses:?}"
    );

    // The right token from that address is refused too, in every form.
    let right = inbox.sign_in(ONE, ANA, &[]).await;
    assert_eq!(right.status, 429);
    assert!(right.header("set-cookie").is_none(), "no sign-in");
    let bearer = format!("Bearer {ANA}");
    let right = inbox
        .get(ONE, "/api/pending", &[("Authorization", &bearer)])
        .await;
    assert_eq!(right.status, 429);
    assert!(!right.body.contains("items"));
    let right = inbox.get(ONE, "/", &[("Cookie", &cookie)]).await;
    assert_eq!(right.status, 429);
    assert!(!right.body.contains("signed in as"));

    // Another address signs in, and its success lifts nothing from the first.
    let other = inbox.sign_in(TWO, BO, &[]).await;
    assert_eq!(other.status, 303);
    let page = inbox.get(TWO, "/", &[("Cookie", &other.cookie())]).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("signed in as <b>bo</b>"));
    let page = inbox.get(TWO, "/", &[("Cookie", &cookie)]).await;
    assert_eq!(page.status, 200, "ana's sign-in itself is intact");
    assert_eq!(inbox.sign_in(ONE, BO, &[]).await.status, 429);
    // A request that carries no token is no attempt: it is told to sign in.
    assert_eq!(inbox.get(ONE, "/", &[]).await.status, 401);
}

#[tokio::test]
async fn a_limited_address_signs_in_again_once_its_window_passed() {
    let window = Duration::from_millis(600);
    let inbox = inbox(|options| options.sign_in_limit(3, window)).await;
    let started = Instant::now();
    for _ in 0..3 {
        let reply = inbox.sign_in(ONE, "ana-0123456789abcdeX", &[]).await;
        assert_eq!(reply.status, 401);
    }
    let refused = inbox.sign_in(ONE, ANA, &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(
        retry_after(&refused),
        1,
        "the rest of the window, rounded up"
    );
    let deadline = started + Duration::from_secs(10);
    let reply = loop {
        let reply = inbox.sign_in(ONE, ANA, &[]).await;
        if reply.status != 429 || Instant::now() > deadline {
            break reply;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(reply.status, 303);
    assert!(started.elapsed() >= window);
}

#[tokio::test]
async fn signing_out_deletes_the_sign_in_so_a_copied_cookie_stops_working() {
    let inbox = inbox(|options| options).await;
    let reply = inbox.sign_in(ONE, ANA, &[]).await;
    let cookie = reply.cookie();
    // The cookie is a random id, not a value derived from the token.
    let again = inbox.sign_in(TWO, ANA, &[]).await.cookie();
    assert_ne!(again, cookie);
    assert_eq!(cookie.len(), "toolcall_inbox=".len() + 32);

    // A copy of the cookie, used elsewhere, works while the sign-in lives.
    let copy = inbox.get(TWO, "/", &[("Cookie", &cookie)]).await;
    assert_eq!(copy.status, 200);
    assert!(copy.body.contains("signed in as <b>ana</b>"));

    let out = inbox.post_form(&cookie, "/sign-out").await;
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));

    for from in [ONE, TWO] {
        let copy = inbox.get(from, "/", &[("Cookie", &cookie)]).await;
        assert_eq!(copy.status, 401, "revoked");
        assert!(!copy.body.contains("signed in as"));
        assert!(
            copy.header("set-cookie").unwrap().contains("Max-Age=0"),
            "and the browser is told to drop it"
        );
    }
    // The other sign-in of the same person is another record: it stays.
    assert_eq!(inbox.get(TWO, "/", &[("Cookie", &again)]).await.status, 200);
}

#[tokio::test]
async fn an_expired_sign_in_is_refused() {
    let ttl = Duration::from_millis(400);
    let inbox = inbox(|options| options.sign_in_ttl(ttl)).await;
    let started = Instant::now();
    let reply = inbox.sign_in(ONE, ANA, &[]).await;
    assert!(
        reply.header("set-cookie").unwrap().contains("Max-Age=1;"),
        "the browser keeps it no longer than the server: {:?}",
        reply.header("set-cookie")
    );
    let cookie = reply.cookie();
    let deadline = started + Duration::from_secs(10);
    let page = loop {
        let page = inbox.get(ONE, "/", &[("Cookie", &cookie)]).await;
        if page.status != 200 || Instant::now() > deadline {
            break page;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(page.status, 401);
    assert!(started.elapsed() >= ttl, "not before its time");
    let bearer = format!("Bearer {ANA}");
    let listed = inbox
        .get(ONE, "/api/sessions", &[("Authorization", &bearer)])
        .await;
    assert_eq!(listed.json()["sign_ins"], json!([]), "deleted");
}

#[tokio::test]
async fn sessions_lists_a_persons_sign_ins_and_revokes_them_all() {
    let inbox = inbox(|options| options).await;
    let first = inbox.sign_in(ONE, ANA, &[]).await.cookie();
    let second = inbox.sign_in(TWO, ANA, &[]).await.cookie();
    let bo = inbox.sign_in(ONE, BO, &[]).await.cookie();

    let listed = inbox.get(ONE, "/api/sessions", &[("Cookie", &first)]).await;
    assert_eq!(listed.status, 200);
    let listed = listed.json();
    assert_eq!(listed["name"], "ana");
    let items = listed["sign_ins"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{listed}");
    let from: Vec<&str> = items.iter().map(|i| i["from"].as_str().unwrap()).collect();
    assert_eq!(from, ["127.0.0.1", "127.0.0.2"]);
    let current: Vec<bool> = items.iter().map(|i| i["current"] == true).collect();
    assert_eq!(current, [true, false]);
    for item in items {
        let life = item["expires_ms"].as_u64().unwrap() - item["created_ms"].as_u64().unwrap();
        assert_eq!(life, 12 * 60 * 60 * 1000, "12 hours by default");
        let id = item["id"].as_str().unwrap();
        assert!(!first.contains(id) && !second.contains(id), "never the id");
    }

    let page = inbox.get(ONE, "/sessions", &[("Cookie", &second)]).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.body.matches("<tr data-sign-in=").count(), 2);
    assert_eq!(page.body.matches("this browser").count(), 1);
    assert!(page.body.contains("<td>127.0.0.2</td>"));
    assert!(
        page.body
            .contains("<a href=\"/sessions\" class=\"current\">Sign-ins</a>")
    );

    // Revoking needs the sign-in's CSRF token.
    let refused = inbox.revoke(("Cookie", &first)).await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        inbox.get(ONE, "/", &[("Cookie", &second)]).await.status,
        200
    );

    let revoked = inbox.post_form(&first, "/sessions/revoke").await;
    assert_eq!(revoked.status, 303);
    assert!(revoked.header("set-cookie").unwrap().contains("Max-Age=0"));
    for cookie in [&first, &second] {
        assert_eq!(inbox.get(TWO, "/", &[("Cookie", cookie)]).await.status, 401);
    }
    let page = inbox.get(ONE, "/", &[("Cookie", &bo)]).await;
    assert_eq!(page.status, 200, "another person's sign-in stays");

    // A program revokes by its token, and is told how many went.
    inbox.sign_in(ONE, ANA, &[]).await;
    let bearer = format!("Bearer {ANA}");
    let reply = inbox.revoke(("Authorization", &bearer)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json(), json!({"revoked": 1}));
}

#[tokio::test]
async fn the_cookie_is_secure_when_the_operator_says_so_or_the_browser_came_over_tls() {
    let plain = inbox(|options| options).await;
    let secure = |reply: &Reply| {
        let set = reply.header("set-cookie").unwrap().to_owned();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        set.split(';').any(|a| a.trim() == "Secure")
    };
    assert!(!secure(&plain.sign_in(ONE, ANA, &[]).await));
    assert!(!secure(
        &plain
            .sign_in(ONE, ANA, &[("X-Forwarded-Proto", "http")])
            .await
    ));
    for header in [
        ("X-Forwarded-Proto", "https"),
        ("Origin", "https://inbox.example"),
        ("Forwarded", "for=192.0.2.60;proto=https;by=203.0.113.43"),
    ] {
        assert!(
            secure(&plain.sign_in(ONE, ANA, &[header]).await),
            "{header:?}"
        );
    }
    let told = inbox(|options| options.cookie_secure(true)).await;
    let reply = told.sign_in(ONE, ANA, &[]).await;
    assert!(secure(&reply));
    // Signing out clears it with the same attributes.
    let cookie = reply.cookie();
    let out = told.post_form(&cookie, "/sign-out").await;
    assert_eq!(out.status, 303);
    assert!(secure(&out));
}

#[tokio::test]
async fn a_persons_note_is_stored_bounded() {
    let inbox = inbox(|options| options).await;
    // The longest note in characters, four bytes each: 4,000 bytes.
    let long: String = "𝄞".repeat(toolcall_inbox::MAX_NOTE);
    let id = inbox.ask(2590).await;
    let reply = inbox.deny(&id, &long).await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    let kept = inbox.entry(&id).await.approval.decision.unwrap().note;
    assert!(kept.len() <= MAX_NOTE_BYTES, "{}", kept.len());
    assert_eq!(kept, bound(&long, MAX_NOTE_BYTES));
    assert!(long.starts_with(kept.split('…').next().unwrap()));
    assert!(kept.ends_with(&format!("of {} bytes]", long.len())));

    // A megabyte is refused before it is read, and decides nothing.
    let id = inbox.ask(1000).await;
    let huge = "x".repeat(1 << 20);
    let reply = inbox.deny(&id, &huge).await;
    assert_eq!(reply.status, 413);
    assert!(inbox.entry(&id).await.approval.decision.is_none());
}
