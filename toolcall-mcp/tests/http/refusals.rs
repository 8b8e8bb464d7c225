//! What the server refuses before the pipeline: no token, a body over the
//! bound, a foreign origin or host, malformed bodies; and arguments read as
//! they were sent.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_a_wrong_one_is_401_and_nothing_runs() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let body = stateless_call(1, "balance", "{}");
    let wrong = bearer("token-of-nobody-000000000000");
    let a_with_typo = bearer(&format!("{TOKEN_A}x"));
    for headers in [
        vec![MODERN],
        vec![MODERN, ("Authorization", wrong.as_str())],
        vec![MODERN, ("Authorization", a_with_typo.as_str())],
        vec![MODERN, ("Authorization", TOKEN_A)],
        vec![MODERN, ("Authorization", "Basic YWdlbnQtYTp4")],
    ] {
        let answer = send(addr, "POST", &headers, body.as_bytes()).await;
        assert_eq!(answer.status, 401, "{headers:?}: {answer:?}");
        assert_eq!(answer.header("www-authenticate"), Some("Bearer"));
        assert!(!answer.body.contains(TOKEN_A));
    }
    // Refused before the body is read: even one too large to read.
    let answer = send(addr, "POST", &[("Content-Length", "1073741824")], b"{").await;
    assert_eq!(answer.status, 401, "{answer:?}");

    assert!(audit.records().is_empty(), "the pipeline saw no call");
    assert_eq!(bank.transfers(), 0);

    // The right token, the same request: served.
    let auth = bearer(TOKEN_A);
    let answer = post_call(addr, "balance", &auth, body.as_bytes()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let message = answer.message();
    assert_eq!(message["id"], 1);
    assert_eq!(
        message["result"]["structuredContent"]["ok"], true,
        "{message}"
    );
    assert_eq!(audit.records().len(), 1);
    assert_eq!(audit.records()[0].caller, "agent-a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_bound_is_413_unread() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let auth = bearer(TOKEN_A);
    let two_mib = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"transfer","arguments":{{"to":"{}","amount_cents":1}}}}}}"#,
        "A".repeat(2 * 1024 * 1024)
    );

    // Declared: refused before a byte of it is read.
    let answer = send(
        addr,
        "POST",
        &[MODERN, ("Authorization", &auth)],
        two_mib.as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 413, "{answer:?}");
    let message = answer.message();
    assert_eq!(message["error"]["code"], -32600, "{message}");
    assert_eq!(message["id"], Value::Null);
    assert!(answer.body.len() < 512, "nothing of the body is repeated");

    // Chunked, with no length said: read up to the bound, then refused.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: {auth}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (read, mut write) = stream.into_split();
    let body = two_mib.clone();
    let writer = tokio::spawn(async move {
        for chunk in body.as_bytes().chunks(64 * 1024) {
            let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
            if write.write_all(&framed).await.is_err() {
                return;
            }
        }
        let _ = write.write_all(b"0\r\n\r\n").await;
    });
    let answer = read_answer(read).await;
    writer.await.unwrap();
    assert_eq!(answer.status, 413, "{answer:?}");

    assert!(audit.records().is_empty(), "the pipeline saw no call");
    assert_eq!(bank.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_or_host_is_403_and_nothing_runs() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let http = with_tokens().allow_origin("https://console.example.com");
    let addr = start(dispatcher, Options::new("http-test"), http).await;
    let auth = bearer(TOKEN_A);
    let body = stateless_call(1, "transfer", r#"{"to":"ACC-7","amount_cents":1}"#);
    let evil_host = format!("evil.example:{}", addr.port());
    let refused: [&[(&str, &str)]; 5] = [
        &[("Origin", "http://evil.example")],
        // Same port, another host: not this server's origin.
        &[("Origin", &format!("http://evil.example:{}", addr.port()))],
        &[("Origin", "null")],
        // DNS rebinding: the browser names the attacker's host.
        &[
            ("Host", &evil_host),
            ("Origin", &format!("http://{evil_host}")),
        ],
        &[("Host", &evil_host)],
    ];
    for extra in refused {
        let mut headers = modern_call("transfer", &auth);
        headers.extend_from_slice(extra);
        let answer = send(addr, "POST", &headers, body.as_bytes()).await;
        assert_eq!(answer.status, 403, "{extra:?}: {answer:?}");
        assert!(
            !answer.body.contains("evil"),
            "nothing of the request is repeated"
        );
    }
    // Refused before the token is looked at, and before the body is read.
    let answer = send(addr, "POST", &[("Origin", "http://evil.example")], b"{").await;
    assert_eq!(answer.status, 403);
    assert!(audit.records().is_empty(), "the pipeline saw no call");
    assert_eq!(bank.transfers(), 0);

    // The server's own loopback origin (any loopback name, its port), and
    // the configured ones, are allowed; so is no Origin at all.
    let allowed = [
        format!("http://127.0.0.1:{}", addr.port()),
        format!("http://localhost:{}", addr.port()),
        "https://console.example.com".to_owned(),
        "HTTPS://Console.Example.com:443".to_owned(),
    ];
    let body = stateless_call(2, "balance", "{}");
    for origin in &allowed {
        let mut headers = modern_call("balance", &auth);
        headers.push(("Origin", origin));
        let answer = send(addr, "POST", &headers, body.as_bytes()).await;
        assert_eq!(answer.status, 200, "{origin}: {answer:?}");
        assert_eq!(answer.message()["result"]["structuredContent"]["ok"], true);
    }
    let answer = post_call(addr, "balance", &auth, body.as_bytes()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(audit.records().len(), allowed.len() + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_jsonrpc_errors_and_the_server_keeps_serving() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let auth = bearer(TOKEN_A);
    let long_version = "9".repeat(100_000);
    let cases: Vec<(String, u16, i64, Value)> = vec![
        ("{".to_owned(), 400, -32700, Value::Null),
        ("not json at all".to_owned(), 400, -32700, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"#.to_owned(),
            400,
            -32700,
            json!(7),
        ),
        ("[1, 2]".to_owned(), 400, -32600, Value::Null),
        ("".to_owned(), 400, -32600, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":8}"#.to_owned(),
            400,
            -32600,
            json!(8),
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"id":10,"method":"tools/list"}"#.to_owned(),
            400,
            -32600,
            Value::Null,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":"{}","method":"tools/list"}}"#,
                "i".repeat(300)
            ),
            400,
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"arguments":{}}}"#
                .to_owned(),
            200,
            -32602,
            json!(11),
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":12,"method":"initialize","params":{{"protocolVersion":"{long_version}","capabilities":{{}},"clientInfo":{{"name":"x","version":"1"}}}}}}"#
            ),
            200,
            -32602,
            json!(12),
        ),
        (
            stateless_call(13, "balance", "{}").replace(
                r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#,
                &format!(r#""io.modelcontextprotocol/protocolVersion":"{long_version}""#),
            ),
            200,
            -32602,
            json!(13),
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":"m","method":"x/unknown","params":{{"protocolVersion":"{long_version}"}}}}"#
            ),
            200,
            -32602,
            json!("m"),
        ),
    ];
    for (body, status, code, id) in cases {
        let answer = send(addr, "POST", &[("Authorization", &auth)], body.as_bytes()).await;
        let shown = &body[..body.len().min(80)];
        assert_eq!(answer.status, status, "{shown}: {answer:?}");
        let message = answer.message();
        assert_eq!(message["jsonrpc"], "2.0", "{shown}: {message}");
        assert_eq!(message["error"]["code"], code, "{shown}: {message}");
        assert_eq!(message["id"], id, "{shown}: {message}");
        assert!(
            answer.body.len() < 4096,
            "{shown}: nothing the client sent is repeated at length ({} bytes)",
            answer.body.len()
        );
    }
    // A header rmcp would repeat, too long to be one: refused, unrepeated.
    let answer = send(
        addr,
        "POST",
        &[
            ("Authorization", &auth),
            ("MCP-Protocol-Version", &long_version),
        ],
        stateless_call(1, "balance", "{}").as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert!(answer.body.len() < 512, "{answer:?}");

    assert!(audit.records().is_empty(), "the pipeline saw no call");
    assert_eq!(bank.transfers(), 0);
    // Still serving.
    let answer = post_call(
        addr,
        "balance",
        &auth,
        stateless_call(14, "balance", "{}").as_bytes(),
    )
    .await;
    assert_eq!(answer.message()["result"]["structuredContent"]["ok"], true);
    // A byte order mark before the JSON is no part of it.
    let answer = post_call(
        addr,
        "balance",
        &auth,
        format!("\u{FEFF}{}", stateless_call(15, "balance", "{}")).as_bytes(),
    )
    .await;
    assert_eq!(answer.message()["id"], 15, "{answer:?}");
    assert_eq!(answer.message()["result"]["structuredContent"]["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_reads_the_arguments_as_sent() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let auth = bearer(TOKEN_A);
    for (id, arguments) in [
        (
            1,
            r#"{"to":"ACC-7","amount_cents":1,"amount_cents":100000}"#,
        ),
        (2, r#"{"to":"ACC-7","amount_cents":1e400}"#),
    ] {
        let answer = post_call(
            addr,
            "transfer",
            &auth,
            stateless_call(id, "transfer", arguments).as_bytes(),
        )
        .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let message = answer.message();
        assert_eq!(message["id"], id);
        let result = &message["result"]["structuredContent"];
        assert_eq!(result["code"], "INVALID_JSON", "{arguments}: {message}");
        assert_eq!(message["result"]["isError"], true);
    }
    let codes: Vec<String> = audit.records().iter().map(|r| r.code.to_string()).collect();
    assert_eq!(
        codes,
        ["INVALID_JSON", "INVALID_JSON"],
        "audited like any call"
    );
    assert_eq!(bank.transfers(), 0);

    // Each stateless request stands alone: a conversation of its own.
    let records = audit.records();
    assert!(records[0].session_id.starts_with("http-test/"));
    assert_ne!(records[0].session_id, records[1].session_id);
}
