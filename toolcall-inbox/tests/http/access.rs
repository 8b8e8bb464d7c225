//! Who gets in: the token, the sign-in cookie, the CSRF token and the origin
//! a form must bring, and connections that hold nothing.

use super::*;

#[tokio::test]
async fn without_the_token_no_page_shows_any_data() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "secret-session").await;
    for path in [
        "/".to_owned(),
        "/history".to_owned(),
        "/metrics".to_owned(),
        "/api/pending".to_owned(),
        format!("/approvals/{id}/edit"),
        "/assets/inbox.js".to_owned(),
    ] {
        for auth in [
            Auth::None,
            Auth::Bearer("wrong-token-0123456789"),
            Auth::Cookie("toolcall_inbox=forged"),
            // The token itself is not the cookie.
            Auth::Cookie(&format!("toolcall_inbox={ANA}")),
        ] {
            let reply = inbox.get(&path, auth).await;
            // Past the tenth wrong one, this address is refused outright.
            let expected: &[u16] = match auth {
                Auth::None => &[401],
                _ => &[401, 429],
            };
            assert!(expected.contains(&reply.status), "{path}: {}", reply.status);
            for secret in [id.as_str(), "acme", "secret-session", "2590", "pay"] {
                assert!(!reply.body.contains(secret), "{path} shows {secret}");
            }
        }
    }
    let reply = inbox
        .decide(&id, Auth::None, &[("action", "approve")])
        .await;
    assert_eq!(reply.status, 401);
    assert!(
        inbox.entry(&id).await.approval.decision.is_none(),
        "nothing decided"
    );
}

#[tokio::test]
async fn a_wrong_token_signs_nobody_in() {
    let inbox = inbox().await;
    let reply = inbox.get("/?token=ana-0123456789abcdeX", Auth::None).await;
    assert_eq!(reply.status, 401);
    assert!(reply.header("set-cookie").is_none());
}

#[tokio::test]
async fn the_sign_in_address_sets_a_strict_cookie_and_leaves_the_address_bar() {
    let inbox = inbox().await;
    let reply = inbox.get(&format!("/?token={ANA}"), Auth::None).await;
    assert_eq!(reply.status, 303);
    assert_eq!(
        reply.header("location"),
        Some("/"),
        "the token leaves the address"
    );
    let cookie = reply.header("set-cookie").unwrap();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(!cookie.contains(ANA), "the cookie is not the token");
    assert_eq!(reply.header("referrer-policy"), Some("same-origin"));
    let cookie = cookie.split(';').next().unwrap();
    let page = inbox.get("/", Auth::Cookie(cookie)).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("signed in as <b>ana</b>"));
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
}

#[tokio::test]
async fn a_form_without_the_csrf_token_or_from_another_origin_decides_nothing() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let (cookie, csrf) = inbox.signed_in(ANA).await;
    let cases: [Case<'_>; 6] = [
        (&[], &[("action", "approve")]),
        (&[], &[("action", "approve"), ("csrf", "0000")]),
        (
            &[("Origin", "http://evil.example")],
            &[("action", "approve"), ("csrf", &csrf)],
        ),
        (
            &[("Sec-Fetch-Site", "cross-site")],
            &[("action", "approve"), ("csrf", &csrf)],
        ),
        // Another person's CSRF token is not this one's.
        (
            &[],
            &[
                ("action", "approve"),
                ("csrf", &inbox.csrf(&inbox.sign_in(BO).await).await),
            ],
        ),
        // Nor is the same person's, of another sign-in.
        (
            &[],
            &[
                ("action", "approve"),
                ("csrf", &inbox.csrf(&inbox.sign_in(ANA).await).await),
            ],
        ),
    ];
    for (headers, form) in cases {
        let reply = inbox
            .decide_with(&id, Auth::Cookie(&cookie), headers, form)
            .await;
        assert_eq!(reply.status, 403, "{headers:?} {form:?}");
    }
    assert!(
        inbox.entry(&id).await.approval.decision.is_none(),
        "nothing decided"
    );
    let reply = inbox
        .decide(
            &id,
            Auth::Cookie(&cookie),
            &[("action", "approve"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(reply.status, 303);
    // Signing out needs the token too.
    let reply = http(
        &inbox.addr,
        "POST",
        "/sign-out",
        Auth::Cookie(&cookie),
        &[],
        Some(""),
    )
    .await;
    assert_eq!(reply.status, 403);
}

/// A slow client holds no connection: a head that does not arrive within
/// the limits' time is closed unanswered, a signed-in request whose body
/// does not arrive within the request's time is `408`; and a connection
/// over the bound is `503` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_extra_connection_holds_nothing() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let backend = Arc::new(Parts {
        store,
        registry: tools![pay].unwrap(),
    });
    let access = Access::parse(&format!("ana {ANA}\n"), "x").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(toolcall_inbox::serve_with(
        backend,
        // Long enough that a loaded machine does not end the two slow
        // connections before the third one is tried.
        Options::new(access).request_timeout(Duration::from_secs(4)),
        listener,
        toolcall_inbox::Limits::new()
            .header_timeout(Duration::from_secs(4))
            .max_connections(2),
    ));
    let read_all = |mut stream: TcpStream| async move {
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
            .await
            .expect("the server ends the connection")
            .unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    };

    // Half a head: closed, nothing answered.
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // A signed-in head whose body never comes: 408.
    let signed = http(
        &addr.to_string(),
        "GET",
        &format!("/?token={ANA}"),
        Auth::None,
        &[],
        None,
    )
    .await;
    let cookie = signed.header("set-cookie").expect("a cookie");
    let cookie = cookie.split(';').next().unwrap();
    let head = format!(
        "POST /approvals/x/decide HTTP/1.1\r\nHost: {addr}\r\n\
         Cookie: {cookie}\r\nOrigin: http://{addr}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nact"
    );
    // The sign-in's connection holds its place until the server has seen
    // it close, which may come after its answer: a connection made before
    // that is over the bound and answered 503 at once. One held is answered
    // nothing until its request times out.
    let mut bodiless = None;
    for _ in 0..20 {
        let mut tried = TcpStream::connect(addr).await.unwrap();
        tried.write_all(head.as_bytes()).await.unwrap();
        let mut early = [0u8; 64];
        match tokio::time::timeout(Duration::from_millis(500), tried.read(&mut early)).await {
            Err(_) => {
                bodiless = Some(tried);
                break;
            }
            Ok(read) => {
                let early = &early[..read.unwrap_or(0)];
                assert!(early.starts_with(b"HTTP/1.1 503"), "{early:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    let bodiless = bodiless.expect("the sign-in's connection is let go");
    // Both are held: a third connection is over the bound, answered at once.
    let asked = std::time::Instant::now();
    let extra = read_all(TcpStream::connect(addr).await.unwrap()).await;
    assert!(extra.starts_with("HTTP/1.1 503"), "{extra:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "at once, not after a timeout: {:?}",
        asked.elapsed()
    );

    let bodiless = read_all(bodiless).await;
    assert!(bodiless.starts_with("HTTP/1.1 408"), "{bodiless:?}");
    let half = read_all(half).await;
    assert!(!half.contains("200 OK"), "{half:?}");

    // Once they are gone, a client is served (here: asked to sign in).
    let fresh = kit::http_to(addr, "GET", "/", &[], None).await;
    assert_eq!(fresh.status, 401, "{fresh:?}");
}

#[tokio::test]
async fn a_cookie_without_the_csrf_token_decides_nothing_in_json_either() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let (cookie, csrf) = inbox.signed_in(ANA).await;
    let origin = format!("http://{}", inbox.addr);
    let other_csrf = inbox.csrf(&inbox.sign_in(BO).await).await;
    let cases: [(&[(&str, &str)], Value); 5] = [
        (&[], json!({"decision": "approve"})),
        (&[], json!({"decision": "approve", "csrf": "0000"})),
        (&[], json!({"decision": "approve", "csrf": other_csrf})),
        (
            &[("Origin", "http://evil.example")],
            json!({"decision": "approve", "csrf": csrf}),
        ),
        (
            &[("Sec-Fetch-Site", "cross-site")],
            json!({"decision": "approve", "csrf": csrf}),
        ),
    ];
    for (headers, body) in cases {
        let (reply, error) = inbox
            .decide_json_with(&id, Auth::Cookie(&cookie), headers, &body.to_string())
            .await;
        assert_eq!(reply.status, 403, "{headers:?} {body}: {error}");
        assert_eq!(error["code"], "forbidden");
    }
    // No token at all: a 401 that says how to sign in, in JSON.
    let (reply, error) = inbox
        .decide_json(&id, Auth::None, r#"{"decision": "approve"}"#)
        .await;
    assert_eq!(reply.status, 401);
    assert_eq!(error["code"], "unauthorized");
    assert!(reply.header("www-authenticate").is_some());
    let listing = inbox.get("/api/pending", Auth::None).await;
    assert_eq!(
        (listing.status, &json_of(&listing)["code"]),
        (401, &json!("unauthorized"))
    );
    assert!(inbox.entry(&id).await.approval.decision.is_none());
    assert!(inbox.decisions().await.is_empty(), "nothing decided");

    // The sign-in's own token, from the inbox's origin: decided.
    let body = json!({"decision": "approve", "csrf": csrf}).to_string();
    let (reply, state) = inbox
        .decide_json_with(&id, Auth::Cookie(&cookie), &[("Origin", &origin)], &body)
        .await;
    assert_eq!(reply.status, 200, "{state}");
    assert_eq!(state["by"], "ana");
    assert_eq!(inbox.decisions().await.len(), 1);
}
