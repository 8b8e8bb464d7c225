//! Principals: one of empty or hidden text is refused, and sessions and
//! named conversations are bounded per principal within the caller's bound.

use super::*;

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
