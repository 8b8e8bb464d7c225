//! Tools as an MCP client sees them: listed with schemas and annotations,
//! what the pipeline refuses as tool errors, sessions, step budgets and raw
//! limits per connection, a bare handler, and a dry run asked in `_meta`.

use super::*;

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn lists_the_tools_with_schemas_and_annotations() {
    let bank = Bank::new();
    let person = Person::unreachable();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().unwrap().name, "toolcall");
    assert!(info.capabilities.tools.is_some());

    let tools = client.list_all_tools().await.unwrap();
    let listed: Vec<Value> = tools
        .iter()
        .map(|tool| serde_json::to_value(tool).unwrap())
        .collect();
    let names: Vec<&str> = listed.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["balance", "transfer"]);

    let read = &listed[0];
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    assert_eq!(read["annotations"]["destructiveHint"], false);
    assert_eq!(read["annotations"]["idempotentHint"], true);
    assert_eq!(read["annotations"]["openWorldHint"], false);

    let write = &listed[1];
    assert_eq!(
        write["description"],
        "Send money to another account. Amount in cents."
    );
    assert_eq!(write["annotations"]["readOnlyHint"], false);
    assert_eq!(write["annotations"]["destructiveHint"], true);
    assert_eq!(write["annotations"]["idempotentHint"], true);
    assert_eq!(write["annotations"]["openWorldHint"], true);
    assert_eq!(
        write["inputSchema"]["properties"]["amount_cents"]["type"],
        "integer"
    );
    assert_eq!(write["inputSchema"]["additionalProperties"], false);

    hang_up(client, server).await;
}

#[tokio::test]
async fn lists_only_what_the_default_caller_may_call() {
    let bank = Bank::new();
    let registry = tools![balance, transfer].unwrap();
    let dispatcher = Arc::new(
        Dispatcher::builder(registry, Arc::clone(&bank))
            .policy(Policy::new().allow(["balance"]))
            .build()
            .unwrap(),
    );
    let person = Person::approving();
    let (client, server) = connect(dispatcher, &person).await;

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["balance"]);

    let refused = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&refused), "TOOL_NOT_ALLOWED");
    assert!(person.questions().is_empty());
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_float_for_an_integer_is_a_tool_error_naming_the_field() {
    let bank = Bank::new();
    let person = Person::approving();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let result = call(
        &client,
        "transfer",
        json!({"to": "ACC-7", "amount_cents": 25.9}),
    )
    .await;
    assert_eq!(result.is_error, Some(true));
    let structured = result_json(&result);
    assert_eq!(code(&structured), "INVALID_ARGUMENTS");
    assert!(
        structured["message"]
            .as_str()
            .unwrap()
            .contains("amount_cents"),
        "{structured}"
    );
    assert!(
        person.questions().is_empty(),
        "nobody is asked about an invalid call"
    );
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn an_unknown_tool_is_a_tool_error_not_a_protocol_error() {
    let bank = Bank::new();
    let person = Person::approving();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let result = call(&client, "wire_everything", json!({})).await;
    let structured = result_json(&result);
    assert_eq!(code(&structured), "UNKNOWN_TOOL");
    assert_eq!(
        structured["data"]["available"],
        json!(["balance", "transfer"])
    );

    // A call without arguments at all is a call with `{}`.
    let read = client
        .call_tool(CallToolRequestParams::new("balance"))
        .await
        .unwrap();
    assert_eq!(read.is_error, Some(false));
    assert_eq!(result_json(&read)["data"]["transfers"], 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn the_server_works_as_a_bare_handler_too() {
    let bank = Bank::new();
    let server = McpServer::new(
        dispatcher(&bank),
        Options::new("s").name("bank").version("9"),
    );
    assert_eq!(
        server.options().conversations,
        Conversations::PerConnection("s".to_owned())
    );
    assert!(server.session().starts_with("s/"), "{}", server.session());
    let tools = server.tools().unwrap();
    assert_eq!(tools.len(), 2);
    let info = rmcp::ServerHandler::get_info(&server);
    assert_eq!(info.server_info.name, "bank");
    assert_eq!(info.server_info.version, "9");
}

// ----------------------------------------------------- connections, limits

#[tokio::test]
async fn each_connection_has_its_own_session_and_step_budget() {
    let bank = Bank::new();
    let audit = MemoryAudit::new();
    let dispatcher = Arc::new(
        builder(&bank)
            .max_steps(3)
            .audit(audit.clone())
            .build()
            .unwrap(),
    );

    let one = McpServer::new(Arc::clone(&dispatcher), Options::new("mcp-test"));
    let two = McpServer::new(Arc::clone(&dispatcher), Options::new("mcp-test"));
    assert!(one.session().starts_with("mcp-test/"), "{}", one.session());
    assert_ne!(one.session(), two.session());

    let person = Person::unreachable();
    let (first, first_server) = connect(Arc::clone(&dispatcher), &person).await;
    let (second, second_server) = connect(dispatcher, &person).await;
    for step in 1..=3 {
        let read = result_json(&call(&first, "balance", json!({})).await);
        assert_eq!(code(&read), "OK", "step {step}: {read}");
    }
    let over = result_json(&call(&first, "balance", json!({})).await);
    assert_eq!(code(&over), "STEP_LIMIT", "{over}");

    // The other connection's budget is untouched.
    let read = result_json(&call(&second, "balance", json!({})).await);
    assert_eq!(code(&read), "OK", "{read}");

    let sessions: std::collections::BTreeSet<String> = audit
        .records()
        .into_iter()
        .map(|record| record.session_id)
        .collect();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert!(sessions.iter().all(|s| s.starts_with("mcp-test/")));

    hang_up(first, first_server).await;
    hang_up(second, second_server).await;
}

#[tokio::test]
async fn arguments_past_the_raw_limits_are_invalid_json() {
    let bank = Bank::new();
    let person = Person::approving();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let large = json!({"to": "A".repeat(70 * 1024), "amount_cents": 2590});
    let result = result_json(&call(&client, "transfer", large).await);
    assert_eq!(code(&result), "INVALID_JSON", "{}", result["message"]);

    let mut deep = json!([]);
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let result = result_json(&call(&client, "balance", json!({"x": deep})).await);
    assert_eq!(code(&result), "INVALID_JSON", "{}", result["message"]);

    assert!(person.questions().is_empty());
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

/// A `tools/call` with `_meta` asking for a dry run.
async fn dry_call(client: &Client, tool: &'static str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool).with_arguments(arguments(args));
    let mut meta = Map::new();
    meta.insert("toolcall/dry_run".into(), json!(true));
    params.meta = Some(RequestMetaObject::from(meta));
    client.call_tool(params).await.unwrap()
}

#[tokio::test]
async fn a_dry_run_asked_in_meta_runs_nothing_and_answers_the_preview() {
    let bank = Bank::new();
    let person = Person::approving();
    let (client, server) = connect(with_untrusted(&bank, Taint::Values), &person).await;
    let args = json!({"to": "ACC-7", "amount_cents": 2590});

    let dry = dry_call(&client, "schedule", args.clone()).await;
    assert_eq!(dry.is_error, Some(false));
    let dry = result_json(&dry);
    assert_eq!(code(&dry), "DRY_RUN", "{dry}");
    assert_eq!(dry["ok"], true);
    assert_eq!(dry["data"]["arguments"], args);
    assert_eq!(
        dry["data"]["preview"],
        "would schedule 2590 cents to ACC-7 from a balance of 100000"
    );
    assert_eq!(bank.transfers(), 0, "the backend saw no side effect");

    // A high-risk call in a dry run asks no one and answers what the real
    // call would: a person must approve it (no id to approve).
    let risky = result_json(&dry_call(&client, "transfer", args.clone()).await);
    assert_eq!(code(&risky), "DRY_RUN", "{risky}");
    assert_eq!(risky["data"]["would"], "ask_a_person", "{risky}");
    assert_eq!(risky["data"]["reason"], "high_risk", "{risky}");
    assert!(risky.get("question_id").is_none(), "{risky}");
    assert!(person.questions().is_empty());
    assert_eq!(bank.transfers(), 0);

    // `false`, or no flag: the call runs, once; the dry run left nothing
    // for it to replay.
    let mut params = CallToolRequestParams::new("schedule").with_arguments(arguments(args.clone()));
    let mut meta = Map::new();
    meta.insert("toolcall/dry_run".into(), json!(false));
    params.meta = Some(RequestMetaObject::from(meta));
    let real = result_json(&client.call_tool(params).await.unwrap());
    assert_eq!(code(&real), "OK", "{real}");
    assert_eq!(real.get("replayed"), None, "{real}");
    assert_eq!(real["data"], json!({"scheduled": 2590, "to": "ACC-7"}));
    assert_eq!(bank.transfers(), 1);

    hang_up(client, server).await;
}
