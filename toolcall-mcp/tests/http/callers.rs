//! Bearer tokens and callers: each token is its caller's, with its policy
//! and its sessions; without tokens, loopback clients are the default
//! caller; a bad token setup is an error at start.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_token_is_its_callers_and_the_audit_names_it() {
    let (_bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::conversation("desk-7"), with_tokens()).await;

    let a = connect(addr, Some(TOKEN_A)).await;
    let b = connect(addr, Some(TOKEN_B)).await;
    assert_eq!(outcome(&a, "balance", json!({})).await["ok"], true);
    assert_eq!(outcome(&b, "balance", json!({})).await["ok"], true);
    assert_eq!(outcome(&a, "balance", json!({})).await["ok"], true);

    // A conversation named in `_meta` is the caller's own.
    let mut named = CallToolRequestParams::new("balance").with_arguments(Map::new());
    named.meta =
        Some(serde_json::from_value(json!({"toolcall/conversation": "ticket-9"})).unwrap());
    let answer = b.call_tool(named).await.unwrap();
    assert_eq!(result_json(&answer)["ok"], true);

    let seen: Vec<(String, String)> = audit
        .records()
        .into_iter()
        .map(|r| (r.caller, r.session_id))
        .collect();
    assert_eq!(
        seen,
        [
            ("agent-a".to_owned(), "desk-7".to_owned()),
            ("agent-b".to_owned(), "desk-7".to_owned()),
            ("agent-a".to_owned(), "desk-7".to_owned()),
            (
                "agent-b".to_owned(),
                "desk-7/named:7:agent-b/ticket-9".to_owned()
            ),
        ],
        "with Options::conversation every call is that conversation, by its token's caller"
    );
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokens_caller_brings_its_own_policy() {
    const READER: &str = "token-of-the-reader-55555555";
    let (bank, dispatcher, audit) = bank_dispatcher();
    let http = with_tokens().tokens(&format!("reader {READER}")).unwrap();
    let addr = start(dispatcher, Options::new("http-test"), http).await;
    let reader = connect(addr, Some(READER)).await;

    let tools = reader.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        ["balance"],
        "tools/list lists what this caller may call"
    );
    let refused = transfer_outcome(&reader, json!(1)).await;
    assert_eq!(refused["code"], "TOOL_NOT_ALLOWED", "{refused}");
    assert_eq!(bank.transfers(), 0);
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].caller, "reader");
    reader.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_belongs_to_its_tokens_caller() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;

    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let auth_a = bearer(TOKEN_A);
    let opened = send(addr, "POST", &[("Authorization", &auth_a)], init.as_bytes()).await;
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();

    // Agent b, with a's session id: no such session for b.
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"transfer","arguments":{"to":"ACC-7","amount_cents":1}}}"#;
    let auth_b = bearer(TOKEN_B);
    let stolen = send(
        addr,
        "POST",
        &[
            ("Authorization", &auth_b),
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        call.as_bytes(),
    )
    .await;
    assert_eq!(stolen.status, 404, "{stolen:?}");
    assert!(audit.records().is_empty());
    assert_eq!(bank.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_loopback_clients_are_the_default_caller() {
    let (_bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), HttpOptions::new()).await;
    let client = connect(addr, None).await;
    assert_eq!(outcome(&client, "balance", json!({})).await["ok"], true);
    assert_eq!(audit.records()[0].caller, "default");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_a_router_served_without_peer_addresses_refuses() {
    let (_bank, dispatcher, audit) = bank_dispatcher();
    let app = router(dispatcher, Options::new("http-test"), HttpOptions::new()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Served without connect info: the peer cannot be told to be local.
    tokio::spawn(async move { axum_serve(listener, app).await });
    let answer = send(
        addr,
        "POST",
        &[
            MODERN,
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "balance"),
        ],
        stateless_call(1, "balance", "{}").as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 403, "{answer:?}");
    assert!(audit.records().is_empty());
}

#[test]
fn a_token_for_an_unknown_caller_or_a_bad_token_file_is_an_error_at_start() {
    let (_bank, dispatcher, _audit) = bank_dispatcher();
    let http = HttpOptions::new()
        .tokens("agent-z 0123456789abcdef0123")
        .unwrap();
    let error = router(dispatcher, Options::default(), http).unwrap_err();
    assert!(error.to_string().contains("\"agent-z\""), "{error}");

    for (text, problem) in [
        ("", "no token"),
        ("# only a comment\n", "no token"),
        ("agent-a short", "line 1: a token needs at least 16"),
        ("0123456789abcdef0123", "line 1: expected `CALLER TOKEN`"),
        ("a b c", "line 1: expected `CALLER TOKEN`"),
        (
            "agent-a 0123456789abcdef0123\nagent-b 0123456789abcdef0123",
            "line 2: a token given twice",
        ),
    ] {
        let error = HttpOptions::new().tokens(text).unwrap_err().to_string();
        assert!(error.contains(problem), "{text:?}: {error}");
        assert!(
            !error.contains("0123456789abcdef"),
            "never the token: {error}"
        );
    }
    // A caller may hold several tokens (to rotate them).
    let two = HttpOptions::new()
        .tokens("agent-a 0123456789abcdef0123\nagent-a fedcba9876543210fedc")
        .unwrap();
    assert_eq!(two.token_callers(), ["agent-a"]);
    assert!(
        !format!("{two:?}").contains("0123456789abcdef"),
        "Debug hides tokens"
    );

    let (_bank, dispatcher, _audit) = bank_dispatcher();
    let bad_origin = HttpOptions::new().allow_origin("console.example.com");
    assert!(router(dispatcher, Options::default(), bad_origin).is_err());
}
