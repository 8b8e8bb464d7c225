//! Real clients over HTTP: rmcp's client and the official Python SDK list,
//! read and are refused as the pipeline says.

use super::*;

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_lists_reads_and_is_refused_as_the_pipeline_says() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let client = connect(addr, Some(TOKEN_A)).await;

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["balance", "transfer"]);

    let read = outcome(&client, "balance", json!({})).await;
    assert_eq!(read["ok"], true, "{read}");
    assert_eq!(
        read["data"],
        json!({"balance_cents": 100_000, "transfers": 0})
    );

    // A float where cents are due: a tool error naming the field.
    let float = transfer_outcome(&client, json!(25.9)).await;
    assert_eq!(float["code"], "INVALID_ARGUMENTS", "{float}");
    assert!(
        float["message"].as_str().unwrap().contains("amount_cents"),
        "{float}"
    );

    // High risk, and this client cannot ask a person: nothing runs.
    let transfer = transfer_outcome(&client, json!(2590)).await;
    assert_eq!(transfer["code"], "CONFIRMATION_REQUIRED", "{transfer}");
    assert!(transfer["question_id"].is_string(), "{transfer}");
    assert_eq!(bank.transfers(), 0);

    let records = audit.records();
    let seen: Vec<(&str, &str, String)> = records
        .iter()
        .map(|r| (r.caller.as_str(), r.tool.as_ref(), r.code.to_string()))
        .collect();
    assert_eq!(
        seen,
        [
            ("agent-a", "balance", "OK".to_owned()),
            ("agent-a", "transfer", "INVALID_ARGUMENTS".to_owned()),
            ("agent-a", "transfer", "CONFIRMATION_REQUIRED".to_owned()),
        ]
    );
    // One session per MCP session, under the prefix.
    let session = &records[0].session_id;
    assert!(session.starts_with("http-test/"), "{session}");
    assert!(records.iter().all(|r| &r.session_id == session));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_lists_and_reads_over_http() {
    let Some(python) = python() else {
        return;
    };
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_http_client.py");
    let url = format!("http://{addr}/mcp");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(url)
            .arg(TOKEN_A)
            .stdin(std::process::Stdio::null())
            .output()
    })
    .await
    .unwrap()
    .expect("the Python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the SDK's checks pass:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("checks passed"), "{stdout}");

    // Both sessions read, as agent-a; the client without a token ran nothing.
    let seen: Vec<(String, String)> = audit
        .records()
        .into_iter()
        .map(|r| (r.caller, r.tool.into_owned()))
        .collect();
    let read = ("agent-a".to_owned(), "balance".to_owned());
    assert_eq!(seen, [read.clone(), read], "{stdout}");
    assert_eq!(bank.transfers(), 0);
}
