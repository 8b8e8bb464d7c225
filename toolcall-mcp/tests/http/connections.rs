//! Connections and sessions: slow heads and bodies cut off, bounds on
//! connections and open sessions, DELETE, and a store that waits stalling
//! no other client.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_or_a_body_sent_too_slowly_is_cut_off_and_nothing_runs() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let http = with_tokens().body_timeout(Duration::from_millis(300));
    let limits = Limits::new().header_timeout(Duration::from_millis(300));
    let addr = start_with(dispatcher, http, limits).await;

    // Half a head, then nothing: closed, before any authentication.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        .await
        .unwrap();
    let said = until_closed(&mut slow).await;
    assert!(!said.contains("200 OK"), "{said:?}");
    // A connection that sends nothing at all holds no place either.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let said = until_closed(&mut silent).await;
    assert!(!said.contains("200 OK"), "{said:?}");

    // The whole head, a tenth of the body it declares, then nothing.
    let auth = bearer(TOKEN_A);
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nAuthorization: {auth}\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: balance\r\nContent-Length: {}\r\n\r\n",
        balance_call().len()
    );
    head.push_str(&balance_call()[..balance_call().len() / 10]);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = read_answer(stream).await;
    assert_eq!(answer.status, 408, "{answer:?}");
    assert!(audit.records().is_empty());

    // The same call sent at once runs, once.
    let answer = read_balance(addr, &auth).await;
    assert_ok(&answer);
    assert_eq!(audit.records().len(), 1);
    assert_eq!(bank.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_bound_is_503_until_one_closes() {
    let (_, dispatcher, audit) = bank_dispatcher();
    let addr = start_with(dispatcher, with_tokens(), Limits::new().max_connections(2)).await;
    let auth = bearer(TOKEN_A);

    // Two connections held open, idle.
    let first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    let mut third = TcpStream::connect(addr).await.unwrap();
    let said = until_closed(&mut third).await;
    assert!(said.starts_with("HTTP/1.1 503"), "{said:?}");
    assert!(said.contains("Retry-After: 1"), "{said:?}");

    // One closes: a call is served again (once the server has seen it go).
    drop(first);
    let mut served = None;
    for _ in 0..200 {
        let answer = read_balance(addr, &auth).await;
        if answer.status != 503 {
            served = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let served = served.expect("a connection is served once another closed");
    assert_eq!(served.status, 200, "{served:?}");
    // Nothing of the refused connections ran; the served call did, once.
    assert_eq!(audit.records().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_open_sessions_are_bounded_and_another_callers_are_not() {
    let (_, dispatcher, _) = bank_dispatcher();
    let http = with_tokens().max_sessions_per_caller(2);
    let addr = start_with(dispatcher, http, Limits::new()).await;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (auth_a, auth_b) = (bearer(TOKEN_A), bearer(TOKEN_B));
    let open = |auth: String| async move {
        send(addr, "POST", &[("Authorization", &auth)], init.as_bytes()).await
    };

    // Two at once: both open (one at a time, so never three).
    let (one, two) = tokio::join!(open(auth_a.clone()), open(auth_a.clone()));
    assert_eq!((one.status, two.status), (200, 200), "{one:?} {two:?}");
    let over = open(auth_a.clone()).await;
    assert_eq!(over.status, 429, "{over:?}");
    assert!(over.body.contains("sessions open"), "{over:?}");
    assert_eq!(over.header("retry-after"), Some("60"));
    // Another caller's sessions are its own.
    assert_eq!(open(auth_b.clone()).await.status, 200);
    // A session of a's within it still works: not a new one, not refused.
    let session = one.header("mcp-session-id").unwrap().to_owned();
    let ping = send(
        addr,
        "POST",
        &[
            ("Authorization", &auth_a),
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#,
    )
    .await;
    assert_ne!(ping.status, 429, "{ping:?}");

    // a ends one: a may open another.
    let ended = send(
        addr,
        "DELETE",
        &[("Authorization", &auth_a), ("Mcp-Session-Id", &session)],
        b"",
    )
    .await;
    assert!(ended.status < 300, "{ended:?}");
    assert_eq!(open(auth_a).await.status, 200);
}

/// `DELETE` ends a session as the MCP SDKs expect: 204 for a session the
/// caller has open, which is then gone (a request in it is 404, as a second
/// `DELETE` is), and 404 for one it does not know: made up, or another
/// caller's, which stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_a_known_session_and_is_404_for_an_unknown_one() {
    let (_, dispatcher, _) = bank_dispatcher();
    let addr = start_with(dispatcher, with_tokens(), Limits::new()).await;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (auth_a, auth_b) = (bearer(TOKEN_A), bearer(TOKEN_B));
    let opened = send(addr, "POST", &[("Authorization", &auth_a)], init.as_bytes()).await;
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened.header("mcp-session-id").unwrap().to_owned();
    let in_session = |method: &'static str, auth: String, session: String| async move {
        let body: &[u8] = if method == "POST" {
            br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#
        } else {
            b""
        };
        send(
            addr,
            method,
            &[
                ("Authorization", &auth),
                ("Mcp-Session-Id", &session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            body,
        )
        .await
    };

    let made_up = in_session("DELETE", auth_a.clone(), "no-such-session".into()).await;
    assert_eq!(made_up.status, 404, "{made_up:?}");
    let not_b_s = in_session("DELETE", auth_b.clone(), session.clone()).await;
    assert_eq!(not_b_s.status, 404, "{not_b_s:?}");
    let ping = in_session("POST", auth_a.clone(), session.clone()).await;
    assert_eq!(
        ping.status, 200,
        "b's DELETE left a's session open: {ping:?}"
    );

    let ended = in_session("DELETE", auth_a.clone(), session.clone()).await;
    assert_eq!(ended.status, 204, "{ended:?}");
    assert_eq!(ended.body, "", "{ended:?}");
    let gone = in_session("POST", auth_a.clone(), session.clone()).await;
    assert_eq!(gone.status, 404, "{gone:?}");
    let again = in_session("DELETE", auth_a, session).await;
    assert_eq!(again.status, 404, "{again:?}");
}

/// One client's call waits for SQLite's write lock (another connection
/// holds it); another client is answered meanwhile. The server's runtime
/// has one worker thread: before the store's statements ran off it, the
/// waiting call held that thread and every other client waited with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_call_waiting_for_the_store_does_not_stall_another_client() {
    let (path, addr, audit, holder) = locked_sqlite_server("stall").await;

    let auth = bearer(TOKEN_A);
    // A call in a conversation it names, whose step the store keeps (a
    // read that names none is alone in its conversation and writes
    // nothing: it would not wait for the lock, as the next test shows).
    let named = balance_call().replace(
        r#""io.modelcontextprotocol/clientCapabilities":{}"#,
        r#""io.modelcontextprotocol/clientCapabilities":{},"toolcall/conversation":"desk""#,
    );
    let waiting = {
        let auth = auth.clone();
        tokio::spawn(async move {
            send(
                addr,
                "POST",
                &modern_call("balance", &auth),
                named.as_bytes(),
            )
            .await
        })
    };
    // Time for the call to reach the store and wait there (its wait lasts
    // up to the store's busy timeout, 10 s).
    tokio::time::sleep(Duration::from_millis(400)).await;
    let list = r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        send(
            addr,
            "POST",
            &[
                MODERN,
                ("Mcp-Method", "tools/list"),
                ("Authorization", &auth),
            ],
            list.as_bytes(),
        ),
    )
    .await
    .expect("another client is answered while a call waits for the store");
    assert_eq!(other.status, 200, "{other:?}");
    assert!(other.body.contains("balance"), "{other:?}");
    assert!(
        !waiting.is_finished(),
        "the first call still waits for the lock"
    );
    assert!(audit.records().is_empty());

    // The lock is let go: the waiting call runs, once.
    holder.execute_batch("COMMIT").unwrap();
    let answer = waiting.await.unwrap();
    assert_ok(&answer);
    assert_eq!(audit.records().len(), 1);
    let _ = std::fs::remove_file(&path);
}

/// A read alone in its conversation (a stateless request that names none)
/// writes nothing, so it is answered while another connection holds
/// SQLite's write lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_stateless_read_does_not_wait_for_the_write_lock() {
    let (path, addr, audit, holder) = locked_sqlite_server("alone").await;
    let auth = bearer(TOKEN_A);
    let answer = tokio::time::timeout(Duration::from_secs(5), read_balance(addr, &auth))
        .await
        .expect("a read alone takes no write lock");
    assert_ok(&answer);
    assert_eq!(audit.records().len(), 1);
    holder.execute_batch("COMMIT").unwrap();
    let _ = std::fs::remove_file(&path);
}
