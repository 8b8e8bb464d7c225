//! The `orders` binary as a user runs it: the demo, and `replay` over a file
//! of calls, compared line by line with what the reference answers.

#[path = "support/fresh_database.rs"]
mod support;

use std::process::{Child, Command, Output};

use serde_json::{Value, json};
use toolcall_testkit::contract::locked_tool;
use toolcall_testkit::run;

/// Starts `orders` with `stdin` written to it.
fn spawn_orders(args: &[&str], stdin: &str) -> Child {
    run::spawn_fed(Command::new(env!("CARGO_BIN_EXE_orders")).args(args), stdin)
}

fn orders(args: &[&str], stdin: &str) -> Output {
    spawn_orders(args, stdin).wait_with_output().unwrap()
}

/// The results a successful replay printed, one a line.
fn results(output: Output) -> Vec<Value> {
    run::printed_json(output)
}

fn replay(flags: &[&str], calls: &[Value]) -> Vec<Value> {
    let input: String = calls.iter().map(|c| format!("{c}\n")).collect();
    let mut args = vec!["replay", "-", "--retry-backoff-ms", "0"];
    args.extend_from_slice(flags);
    results(orders(&args, &input))
}

fn refund(amount: Value, confirmed: bool) -> Value {
    let args = json!({"order_id": "ORD-1001", "amount_cents": amount, "currency": "BRL", "reason": "damaged"});
    json!({"tool": "refund_order", "arguments": args.to_string(), "confirmed": confirmed})
}

/// `(ok, code, replayed)` of each answer, the reference's defaults left out.
fn outcomes(results: &[Value]) -> Vec<(bool, String, bool)> {
    results
        .iter()
        .map(|r| {
            (
                r["ok"].as_bool().unwrap(),
                r.get("code")
                    .and_then(Value::as_str)
                    .unwrap_or("OK")
                    .to_owned(),
                r.get("replayed").and_then(Value::as_bool).unwrap_or(false),
            )
        })
        .collect()
}

#[test]
fn replay_is_one_conversation_over_one_store() {
    let calls = [
        json!({"tool": "get_order", "arguments": "{\"order_id\": \"ORD-1001\"}"}),
        refund(json!(25.9), true),
        refund(json!(2590), false),
        // The approved call answers the question, which is not the model
        // repeating itself: three identical calls follow, then the loop guard.
        refund(json!(2590), true),
        refund(json!(2590), true),
        refund(json!(2590), true),
        refund(json!(2590), true),
        json!({"tool": "get_order", "arguments": {"order_id": "ORD-1001"}}),
        json!({"tool": "delete_order", "arguments": ""}),
        json!({"tool": "get_order", "arguments": [1]}),
        json!({"tool": "get_order", "arguments": "{\"order_id\": \"ORD-1001\""}),
        json!({"tool": "get_order", "arguments": "{}"}),
    ];
    let results = replay(&["--max-steps", "11"], &calls);
    let expected = [
        (true, "OK", false),
        (false, "INVALID_ARGUMENTS", false),
        (false, "CONFIRMATION_REQUIRED", false),
        (true, "OK", false),
        (true, "OK", true),
        (true, "OK", true),
        (false, "LOOP_DETECTED", false),
        (true, "OK", false),
        (false, "UNKNOWN_TOOL", false),
        (false, "INVALID_JSON", false),
        (false, "INVALID_JSON", false),
        (false, "STEP_LIMIT", false),
    ];
    let expected: Vec<(bool, String, bool)> = expected
        .iter()
        .map(|(o, c, r)| (*o, c.to_string(), *r))
        .collect();
    assert_eq!(outcomes(&results), expected);
    assert_eq!(
        results[7]["data"]["refunded_cents"], 2590,
        "the refund was applied once"
    );
    assert_eq!(results[4]["data"], results[3]["data"]);
    assert_eq!(results[5]["data"], results[3]["data"]);
    assert_eq!(
        results[8]["data"]["available"],
        json!(["get_order", "refund_order"])
    );
}

#[test]
fn replay_flags_change_the_pipeline() {
    let calls = [
        refund(json!(2590), true),
        json!({"tool": "get_order", "arguments": "{\"order_id\": \"ORD-1001\"}"}),
        refund(json!(100), true),
    ];
    let results = replay(
        &["--allow", "refund_order", "--max-refund-cents", "1000"],
        &calls,
    );
    let codes: Vec<String> = outcomes(&results).into_iter().map(|o| o.1).collect();
    assert_eq!(codes, ["POLICY_LIMIT", "TOOL_NOT_ALLOWED", "OK"]);

    let lost = replay(
        &["--lose-next-response", "1", "--max-retries", "0"],
        &[refund(json!(2590), true), refund(json!(2590), true)],
    );
    let codes: Vec<String> = outcomes(&lost).into_iter().map(|o| o.1).collect();
    assert_eq!(codes, ["UPSTREAM_UNAVAILABLE", "OK"]);
    assert_eq!(
        lost[1]["data"]["remaining_refundable_cents"],
        12_000 - 2590,
        "not refunded twice"
    );
}

#[test]
fn a_malformed_replay_line_is_a_usage_error_on_stderr() {
    let output = orders(&["replay", "-"], "{\"tool\": \"get_order\"}\nnot json\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 2: not a replay call"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 1);
}

#[test]
fn the_demo_declines_without_a_terminal_and_refunds_once_with_yes() {
    let declined = orders(&[], "");
    assert!(declined.status.success());
    let text = String::from_utf8_lossy(&declined.stdout);
    assert!(text.contains("declined"), "{text}");
    assert!(text.contains("The backend applied 0 refund(s)"), "{text}");

    let approved = orders(&["--yes"], "");
    let text = String::from_utf8_lossy(&approved.stdout);
    assert!(text.contains("\"replayed\":true"), "{text}");
    assert!(
        text.contains("The backend applied 1 refund(s); ORD-1001 has 9410 cents left"),
        "{text}"
    );
}

#[test]
fn two_processes_on_one_sqlite_store_replay_instead_of_refunding_twice() {
    let dir = std::env::temp_dir().join(format!("orders-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite:{}", dir.join("store.db").display());
    let calls = [refund(json!(2590), true)];
    let first = replay(&["--store", &store], &calls);
    let second = replay(&["--store", &store], &calls);
    assert_eq!(outcomes(&first), [(true, "OK".to_owned(), false)]);
    assert_eq!(
        outcomes(&second),
        [(true, "OK".to_owned(), true)],
        "the second process replays"
    );
    assert_eq!(second[0]["data"], first[0]["data"]);
    let bad = orders(&["replay", "-", "--store", "redis://x"], "");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("expected `memory`, `sqlite:PATH` or `postgres://...`")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two `orders replay` processes at the same moment on one Postgres: each
/// call runs in exactly one of them; the other answers `replayed: true`.
#[test]
fn two_processes_on_one_postgres_run_each_call_once() {
    let Some(url) = run::postgres_url("the two-process test") else {
        return;
    };
    // A database of the test's own: the shop's refunds live there too.
    let database = support::FreshDatabase::create(&url, "cli_two_processes");
    let url = database.url.clone();
    let session = run::unique("cli");
    let calls: Vec<Value> = (1..=6)
        .map(|cents| refund(json!(cents * 100), true))
        .collect();
    let input: String = calls.iter().map(|c| format!("{c}\n")).collect();
    let args = [
        "replay",
        "-",
        "--retry-backoff-ms",
        "0",
        "--max-steps",
        "100",
        "--store",
        &url,
        "--session-id",
        &session,
    ];
    let (a, b) = (spawn_orders(&args, &input), spawn_orders(&args, &input));
    let (a, b) = (
        results(a.wait_with_output().unwrap()),
        results(b.wait_with_output().unwrap()),
    );
    assert_eq!((a.len(), b.len()), (6, 6));
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (x["ok"].as_bool(), y["ok"].as_bool()),
            (Some(true), Some(true)),
            "{x} {y}"
        );
        let replays = [x, y].iter().filter(|r| r["replayed"] == true).count();
        assert_eq!(replays, 1, "exactly one of the two ran it: {x} {y}");
        assert_eq!(x["data"], y["data"]);
    }
}

/// A scratch directory of this test process, emptied first.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("orders-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `serve` says where the inbox is on standard error, as every notice is:
/// standard output is for results, and `serve` has none.
#[test]
fn the_inbox_s_address_is_a_notice_on_standard_error() {
    use std::io::{BufRead as _, BufReader};
    let dir = scratch("serve-streams");
    let store = format!("sqlite:{}", dir.join("store.db").display());
    let args = ["serve", "--listen", "127.0.0.1:0", "--store", &store];
    let mut child = spawn_orders(&args, "");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let first = BufReader::new(stderr).lines().next();
        let _ = tx.send(first);
    });
    let first = rx.recv_timeout(std::time::Duration::from_secs(20));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = match first {
        Ok(Some(Ok(line))) => line,
        other => panic!("no line on stderr ({other:?}); stdout: {stdout:?}"),
    };
    assert!(
        first.starts_with("orders inbox: http://127.0.0.1:"),
        "{first}"
    );
    assert!(first.contains("/?token="), "{first}");
    assert_eq!(stdout, "", "nothing on standard output");
}

/// `orders definitions --format F` for every format is the committed file in
/// `examples/orders/definitions/`, byte for byte (`TOOLCALL_BLESS=1`
/// rewrites them after a deliberate change); `-o` writes the same bytes,
/// and `--allow` narrows the list.
#[test]
fn definitions_match_the_golden_files() {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("definitions");
    let bless = std::env::var_os("TOOLCALL_BLESS").is_some();
    let dir = scratch("definitions");
    for format in [
        "neutral",
        "openai",
        "openai-responses",
        "anthropic",
        "gemini",
        "mcp",
    ] {
        let output = orders(&["definitions", "--format", format], "");
        assert!(
            output.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let path = golden.join(format!("{format}.json"));
        if bless {
            std::fs::write(&path, &output.stdout).unwrap();
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (TOOLCALL_BLESS=1 writes it)", path.display()));
        assert_eq!(
            String::from_utf8(output.stdout.clone()).unwrap(),
            expected,
            "{format} differs from {}",
            path.display()
        );

        let file = dir.join(format!("{format}.json"));
        let written = orders(
            &[
                "definitions",
                "--format",
                format,
                "-o",
                file.to_str().unwrap(),
            ],
            "",
        );
        assert!(written.status.success());
        assert!(written.stdout.is_empty(), "-o writes nothing to stdout");
        assert_eq!(std::fs::read(&file).unwrap(), output.stdout);
    }

    let only = orders(
        &[
            "definitions",
            "--format",
            "anthropic",
            "--allow",
            "get_order",
        ],
        "",
    );
    let tools: Value = serde_json::from_slice(&only.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_order"]);

    let unknown = orders(&["definitions", "--format", "cohere"], "");
    assert_eq!(unknown.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("unknown format `cohere`") && stderr.contains("openai-responses"),
        "{stderr}"
    );
}

/// `lock` then `check` passes; a lock file that records another contract
/// (an enum value the tool no longer accepts, an integer now a number) makes
/// `check` exit 1 and name each change; a missing lock file is exit 2.
#[test]
fn check_fails_naming_an_incompatible_change() {
    let dir = scratch("lock");
    let lock = dir.join("tools.lock.json");
    let lock_arg = lock.to_str().unwrap();
    let written = orders(&["lock", "--file", lock_arg], "");
    assert!(written.status.success());
    let same = orders(&["check", "--file", lock_arg], "");
    assert!(
        same.status.success(),
        "{}",
        String::from_utf8_lossy(&same.stdout)
    );

    // The lock as an older build would have written it: `EUR` was accepted
    // and the amount was any number.
    let mut locked: Value = serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    let refund = locked_tool(&mut locked, "refund_order");
    for field in refund["fields"].as_array_mut().unwrap() {
        match field["name"].as_str().unwrap() {
            "currency" => field["enum"].as_array_mut().unwrap().push(json!("EUR")),
            "amount_cents" => field["type"] = json!("number"),
            _ => {}
        }
    }
    std::fs::write(&lock, serde_json::to_vec_pretty(&locked).unwrap()).unwrap();
    let changed = orders(&["check", "--file", lock_arg], "");
    assert_eq!(changed.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&changed.stdout);
    let breaking: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("breaking:"))
        .collect();
    assert_eq!(breaking.len(), 2, "{stdout}");
    assert!(
        breaking
            .iter()
            .any(|l| l.contains("refund_order") && l.contains("currency") && l.contains("EUR")),
        "{stdout}"
    );
    assert!(
        breaking
            .iter()
            .any(|l| l.contains("refund_order") && l.contains("amount_cents")),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&changed.stderr);
    assert!(stderr.contains("2 breaking change(s)"), "{stderr}");

    let missing = orders(
        &["check", "--file", dir.join("none.json").to_str().unwrap()],
        "",
    );
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("run `lock`"));
}

/// `report` on the audit log of a replay: the reference's production
/// metrics (rejections by tool and by code, recovery after a rejection,
/// replays, the loop guard, confirmation outcomes), as JSON and as a table.
#[test]
fn report_reads_the_audit_log_of_a_replay() {
    let dir = scratch("report");
    let audit = dir.join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap();
    let mut calls = vec![json!({
        "tool": "get_order",
        "arguments": "{\"order_id\": \"ORD-1001\"}",
        "call_id": "call_lookup"
    })];
    calls.push(refund(json!(25.9), false));
    calls.push(refund(json!(2590), false));
    // The first confirmed refund answers the question; the model's three
    // identical calls after it are two replays and the loop guard.
    calls.extend(std::iter::repeat_n(refund(json!(2590), true), 4));
    calls.push(json!({"tool": "cancel_order", "arguments": "{}"}));
    let answers = replay(&["--audit", audit_arg], &calls);
    let codes: Vec<String> = outcomes(&answers).into_iter().map(|o| o.1).collect();
    assert_eq!(
        codes,
        [
            "OK",
            "INVALID_ARGUMENTS",
            "CONFIRMATION_REQUIRED",
            "OK",
            "OK",
            "OK",
            "LOOP_DETECTED",
            "UNKNOWN_TOOL"
        ]
    );
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(
        log.lines()
            .next()
            .unwrap()
            .contains("\"call_id\":\"call_lookup\"")
    );

    let output = orders(&["report", audit_arg, "--json"], "");
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let totals = &report["totals"];
    assert_eq!(
        (
            &totals["calls"],
            &totals["ok"],
            &totals["awaiting_confirmation"],
            &totals["rejected"]
        ),
        (&json!(7), &json!(3), &json!(1), &json!(3))
    );
    // Eight records, seven model calls: the first confirmed refund answers the
    // pending approval, so it is the host's decision, counted under
    // confirmations and not as a call.
    assert_eq!(report["confirmations"]["decisions"], 1);
    // The float amount was rejected and the model's next refund got through;
    // the loop guard and the unknown tool were not followed by a success.
    assert_eq!(totals["recovered"], 1);
    assert_eq!(totals["replayed"], 2);
    assert_eq!(totals["loop_detected"], 1);
    let refund_stats = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "refund_order")
        .unwrap();
    assert_eq!(refund_stats["calls"], 5);
    assert_eq!(refund_stats["rejection_rate"], 0.4);
    let by_code: Vec<(&str, u64)> = report["rejections_by_code"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["code"].as_str().unwrap(), r["rejected"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        by_code,
        [
            ("INVALID_ARGUMENTS", 1),
            ("LOOP_DETECTED", 1),
            ("UNKNOWN_TOOL", 1)
        ]
    );
    assert_eq!(report["confirmations"]["required"], 1);
    assert_eq!(report["confirmations"]["approved"], 1);
    assert_eq!(report["confirmations"]["denied"], 0);

    // The float amount, found again by validating the logged arguments.
    let fields: Vec<(&str, &str, u64)> = report["invalid_arguments_by_field"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap(),
                r["field"].as_str().unwrap(),
                r["rejected"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(fields, [("refund_order", "amount_cents", 1)]);

    // The rejected payloads, written as replay lines, are rejected again.
    let rejected = dir.join("rejected.jsonl");
    let written = orders(
        &[
            "report",
            audit_arg,
            "--rejected-calls",
            rejected.to_str().unwrap(),
        ],
        "",
    );
    assert!(written.status.success());
    let again = results(orders(&["replay", rejected.to_str().unwrap()], ""));
    let codes: Vec<&str> = again.iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["INVALID_ARGUMENTS"]);
    assert!(
        again[0]["message"]
            .as_str()
            .unwrap()
            .contains("amount_cents")
    );

    let table = orders(&["report", audit_arg], "");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.starts_with("7 call(s) in 1 session(s): 3 ok, 1 awaiting confirmation, 3 rejected"),
        "{text}"
    );
    assert!(
        text.contains("confirmations: 1 required, 1 approved, 0 denied"),
        "{text}"
    );

    let broken = dir.join("broken.jsonl");
    std::fs::write(
        &broken,
        format!("{}\nnot json\n", log.lines().next().unwrap()),
    )
    .unwrap();
    let bad = orders(&["report", broken.to_str().unwrap()], "");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("line 2"));
}

/// The example's own contract is committed beside it and guarded: a change
/// to `get_order` or `refund_order` that breaks it fails here until the tool
/// gets a new version or the lock is rewritten on purpose (`orders lock
/// --file examples/orders/tools.lock.json`).
#[test]
fn the_committed_lock_file_matches_the_tools() {
    let lock = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools.lock.json");
    let output = orders(&["check", "--file", lock.to_str().unwrap()], "");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("the tools match"), "{stdout}");
}

/// A name in `--allow` that is no tool is an error, not a caller who may do
/// nothing; a replay line without `arguments` calls the tool with none.
#[test]
fn allow_names_real_tools_and_arguments_default_to_none() {
    let typo = orders(
        &["definitions", "--format", "openai", "--allow", "get_ordr"],
        "",
    );
    assert_eq!(typo.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(
        stderr.contains("`get_ordr`") && stderr.contains("get_order, refund_order"),
        "{stderr}"
    );
    assert!(typo.stdout.is_empty());

    let answers = replay(&[], &[json!({"tool": "get_order"})]);
    // The call reached validation: an object without the required order id.
    assert_eq!(answers[0]["code"], "INVALID_ARGUMENTS", "{}", answers[0]);
    assert!(answers[0]["message"].as_str().unwrap().contains("order_id"));
}

/// `--allow` given but naming no tool (`""`, `","`, `" "`, `" , "`) is
/// refused, exit code 2, by every command and the demo, before anything
/// runs: it used to allow every tool. Left out, it is the reference's
/// default (`get_order,refund_order`).
#[test]
fn an_allowlist_that_names_no_tool_is_refused_not_everything() {
    let dir = scratch("empty-allow");
    let lock = dir.join("tools.lock.json");
    let lock = lock.to_str().unwrap();
    let audit = dir.join("audit.jsonl");
    std::fs::write(&audit, "").unwrap();
    let audit = audit.to_str().unwrap();
    let refund = format!("{}\n", refund(json!(2590), true));
    let commands: [(&[&str], &str); 8] = [
        (&["replay", "-"], refund.as_str()),
        (&["definitions", "--format", "openai"], ""),
        (&["report", audit], ""),
        (&["lock", "--file", lock], ""),
        (&["check", "--file", lock], ""),
        (&["mcp"], ""),
        (&["--yes"], ""),
        (&[], ""),
    ];
    for empty in ["", ",", " ", " , "] {
        for (command, stdin) in commands {
            let mut args = command.to_vec();
            args.extend(["--allow", empty]);
            let output = orders(&args, stdin);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains("--allow names no tool")
                    && stderr.contains("`--allow get_order,refund_order,read_messages,add_note`")
                    && stderr.contains("leave --allow out"),
                "{args:?}: {stderr}"
            );
            assert!(output.stdout.is_empty(), "{args:?}: nothing ran");
        }
    }
    assert!(!std::path::Path::new(lock).exists());
}

/// A replay line's `arguments` written as an object are read as the text
/// the line has, as the pipeline reads a model's text: a member twice, at
/// any depth, is INVALID_JSON (it used to refund the last amount), and an
/// object over 64 KiB is refused by its size.
#[test]
fn replay_object_arguments_hold_to_the_same_limits_as_text() {
    let object = |extra: &str| {
        format!(
            r#"{{"tool": "refund_order", "confirmed": true, "arguments": {{"order_id": "ORD-1001", {extra} "currency": "BRL", "reason": "damaged"}}}}"#
        )
    };
    let lines = [
        object(r#""amount_cents": 100, "amount_cents": 200,"#),
        object(r#""amount_cents": 100, "note": {"by": "a", "by": "b"},"#),
        object(&format!(
            r#""amount_cents": 100, "note": "{}","#,
            "x".repeat(200_000)
        )),
        object(r#""amount_cents": 300,"#),
        r#"{"tool": "get_order", "arguments": {"order_id": "ORD-1001"}}"#.to_owned(),
    ];
    let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let answers = results(orders(&["replay", "-", "--retry-backoff-ms", "0"], &input));
    let codes: Vec<String> = outcomes(&answers).into_iter().map(|o| o.1).collect();
    assert_eq!(
        codes,
        ["INVALID_JSON", "INVALID_JSON", "INVALID_JSON", "OK", "OK"]
    );
    let message = |i: usize| answers[i]["message"].as_str().unwrap().to_owned();
    assert!(
        message(0).contains("duplicate member `amount_cents`"),
        "{}",
        message(0)
    );
    assert!(
        message(1).contains("duplicate member `by`"),
        "{}",
        message(1)
    );
    assert!(
        message(2).contains("over the limit of 65536"),
        "{}",
        message(2)
    );
    assert_eq!(
        answers[4]["data"]["refunded_cents"], 300,
        "only the well-formed refund was applied"
    );
}

/// Members given twice in a replay line itself, outside its arguments, are
/// an error of the replay file naming the line, not the last one silently.
#[test]
fn a_replay_line_with_a_member_twice_is_refused_naming_the_line() {
    for (line, member) in [
        (
            r#"{"tool": "get_order", "tool": "refund_order", "arguments": {"order_id": "ORD-1001"}}"#,
            "tool",
        ),
        (
            r#"{"tool": "get_order", "arguments": {"order_id": "ORD-1001"}, "arguments": "{}"}"#,
            "arguments",
        ),
        (
            r#"{"tool": "get_order", "confirmed": false, "confirmed": true}"#,
            "confirmed",
        ),
    ] {
        let output = orders(
            &["replay", "-"],
            &format!("{{\"tool\": \"get_order\"}}\n{line}\n"),
        );
        assert_eq!(output.status.code(), Some(2), "{line}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("standard input: line 2: not a replay call")
                && stderr.contains(&format!("duplicate field `{member}`")),
            "{stderr}"
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 1);
    }
}

/// `definitions --check` is the CI gate: the committed files pass, a stale
/// one fails with exit 1 naming what changed, and nothing is written.
#[test]
fn a_stale_definitions_file_fails_the_check_naming_what_changed() {
    let committed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("definitions");
    for format in [
        "neutral",
        "openai",
        "openai-responses",
        "anthropic",
        "gemini",
        "mcp",
    ] {
        let file = committed.join(format!("{format}.json"));
        let output = orders(
            &[
                "definitions",
                "--format",
                format,
                "-o",
                file.to_str().unwrap(),
                "--check",
            ],
            "",
        );
        assert!(
            output.status.success(),
            "{format}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let dir = scratch("stale-definitions");
    let stale = dir.join("openai.json");
    let mut tools: Value =
        serde_json::from_str(&std::fs::read_to_string(committed.join("openai.json")).unwrap())
            .unwrap();
    tools[1]["function"]["parameters"]["properties"]["amount_cents"]["minimum"] = json!(0);
    tools[0]["function"]["description"] = json!("An older description.");
    let text = serde_json::to_string_pretty(&tools).unwrap();
    std::fs::write(&stale, &text).unwrap();
    let output = orders(
        &[
            "definitions",
            "--format",
            "openai",
            "-o",
            stale.to_str().unwrap(),
            "--check",
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains(
            "changed: /refund_order/function/parameters/properties/amount_cents/minimum (0 -> 1)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("changed: /get_order/function/description"),
        "{stdout}"
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("out of date"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&stale).unwrap(),
        text,
        "--check writes nothing"
    );

    let missing = dir.join("missing.json");
    let output = orders(
        &[
            "definitions",
            "--format",
            "openai",
            "-o",
            missing.to_str().unwrap(),
            "--check",
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(!missing.exists());
}

// ------------------------------------------- promises under stress

fn read_order() -> Value {
    json!({"tool": "get_order", "arguments": "{\"order_id\": \"ORD-1001\"}"})
}

#[test]
fn a_refund_whose_answer_was_lost_is_in_doubt_and_the_retry_completes_it() {
    let results = replay(
        &["--lose-next-response", "1", "--max-retries", "0"],
        &[
            refund(json!(12_000), true),
            refund(json!(12_000), false),
            read_order(),
        ],
    );
    assert_eq!(results[0]["code"], "UPSTREAM_UNAVAILABLE");
    assert_eq!(results[0]["data"]["in_doubt"], true);
    assert!(
        results[0]["message"]
            .as_str()
            .unwrap()
            .contains("same arguments")
    );
    assert_eq!(results[1]["ok"], true, "{}", results[1]);
    assert_eq!(results[1]["data"]["remaining_refundable_cents"], 0);
    assert_eq!(
        results[2]["data"]["refunded_cents"], 12_000,
        "refunded once: {}",
        results[2]
    );
}

#[test]
fn a_persons_yes_after_three_asks_is_not_a_loop() {
    let results = replay(
        &[],
        &[
            refund(json!(2590), false),
            refund(json!(2590), false),
            refund(json!(2590), false),
            refund(json!(2590), true),
            read_order(),
        ],
    );
    let codes: Vec<&str> = results
        .iter()
        .map(|r| r["code"].as_str().unwrap_or("OK"))
        .collect();
    assert_eq!(
        codes,
        [
            "CONFIRMATION_REQUIRED",
            "CONFIRMATION_REQUIRED",
            "CONFIRMATION_REQUIRED",
            "OK",
            "OK"
        ]
    );
    assert_eq!(results[4]["data"]["refunded_cents"], 2590);
}

#[test]
fn an_enormous_tool_name_comes_back_bounded() {
    let name = "x".repeat(200_000);
    let results = replay(&[], &[json!({"tool": name, "arguments": "{}"})]);
    assert_eq!(results[0]["code"], "UNKNOWN_TOOL");
    assert!(
        results[0].to_string().len() < 1_000,
        "{}",
        results[0].to_string().len()
    );
}

#[test]
fn an_oversized_result_is_cut_to_the_output_budget_and_stays_valid_json() {
    let read = json!({"tool": "read_messages", "arguments": "{\"order_id\": \"ORD-1002\"}"});
    let flags = [
        "--allow",
        "get_order,read_messages",
        "--max-output-bytes",
        "400",
    ];
    let results = replay(&flags, &[read.clone(), read_order()]);
    assert_eq!(results[0]["ok"], true, "{}", results[0]);
    assert_eq!(results[0]["data"]["truncated"], true);
    assert!(results[0].to_string().len() <= 400, "{}", results[0]);
    assert!(
        results[1]
            .get("data")
            .is_some_and(|d| d.get("truncated").is_none()),
        "a small result is whole"
    );

    let whole = replay(&["--allow", "read_messages"], &[read]);
    assert_eq!(
        whole[0]["data"]["result"].as_array().unwrap().len(),
        2,
        "no budget, no cut"
    );
}

#[test]
fn replay_keeps_the_injection_from_adding_a_note_or_refunding_at_every_taint_level() {
    let note = json!({"tool": "add_note", "arguments": {"order_id": "ORD-1001", "text": "Confirm payment at https://refund-help.example/claim?id=ORD-1002"}});
    let read = json!({"tool": "read_messages", "arguments": {"order_id": "ORD-1002"}});
    let refund = json!({"tool": "refund_order", "arguments": {"order_id": "ORD-1001", "amount_cents": 12000, "currency": "BRL", "reason": "customer_request"}});
    let allow = "--allow=get_order,refund_order,read_messages,add_note";
    for level in [None, Some("--taint=values")] {
        let mut flags = vec![allow];
        flags.extend(level);
        let results = replay(&flags, &[read.clone(), note.clone(), refund.clone()]);
        assert_eq!(results[1]["code"], "CONFIRMATION_REQUIRED", "{level:?}");
        assert_eq!(results[1]["data"]["reason"], "untrusted_context");
        assert_eq!(results[2]["code"], "CONFIRMATION_REQUIRED");
    }
    // By default, even a note that carries nothing read there waits.
    let clean =
        json!({"tool": "add_note", "arguments": {"order_id": "ORD-1002", "text": "called back"}});
    let results = replay(&[allow], &[read.clone(), clean.clone()]);
    assert_eq!(
        results[1]["code"], "CONFIRMATION_REQUIRED",
        "{}",
        results[1]
    );
    let results = replay(&[allow, "--taint=values"], &[read.clone(), clean]);
    assert_eq!(
        results[1]["ok"], true,
        "values lets it through: {}",
        results[1]
    );
    // Off: the note runs, as before.
    let results = replay(&[allow, "--taint=off"], &[read, note]);
    assert_eq!(results[1]["ok"], true, "{}", results[1]);
}

#[test]
fn a_replay_line_may_be_a_dry_run() {
    let mut dry = refund(json!(2590), true);
    dry["dry_run"] = json!(true);
    let results = replay(&[], &[dry, refund(json!(2590), true)]);
    assert_eq!(results[0]["code"], "DRY_RUN");
    assert_eq!(
        results[0]["data"]["preview"],
        "would refund 2590 of 12000 cents of ORD-1001"
    );
    assert_eq!(results[1]["ok"], true, "{}", results[1]);
    assert_ne!(
        results[1]["replayed"], true,
        "the dry run left nothing to replay"
    );
}

/// The operators' commands from one process, obeyed by another over the
/// same store on its next call: the policy file checks, a stop and its
/// reason, a bad file refused whole, the history.
#[test]
fn an_operator_stops_refunds_for_every_process_over_the_store() {
    let dir = scratch("admin");
    let store = format!("sqlite:{}", dir.join("store.db").display());
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/policy.toml");
    let checked = orders(&["admin", "policy", "check", policy], "");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    let stop = orders(
        &[
            "admin",
            "disable",
            "refund_order",
            "--reason",
            "fraud wave",
            "--by",
            "oncall",
            "--store",
            &store,
        ],
        "",
    );
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let stopped = replay(&["--store", &store], &[refund(json!(2590), true)]);
    assert_eq!(stopped[0]["code"], "STOPPED", "{stopped:?}");
    assert_eq!(stopped[0]["data"]["reason"], "fraud wave");

    let enable = orders(&["admin", "enable", "refund_order", "--store", &store], "");
    assert!(
        enable.status.success(),
        "{}",
        String::from_utf8_lossy(&enable.stderr)
    );
    let loaded = orders(&["admin", "policy", "load", policy, "--store", &store], "");
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    // The loaded rule approves a small refund nobody confirmed; the
    // lowered limit refuses a large one.
    let after = replay(
        &["--store", &store],
        &[refund(json!(900), false), refund(json!(11000), true)],
    );
    assert_eq!(
        outcomes(&after)[0],
        (true, "OK".to_owned(), false),
        "{after:?}"
    );
    assert_eq!(after[1]["code"], "POLICY_LIMIT", "{after:?}");

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[callers.default]\nallow = [\"refund_ordr\"]\n").unwrap();
    let refused = orders(
        &[
            "admin",
            "policy",
            "load",
            bad.to_str().unwrap(),
            "--store",
            &store,
        ],
        "",
    );
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("did you mean `refund_order`"), "{said}");

    let history = orders(&["admin", "history", "--store", &store], "");
    let history = String::from_utf8_lossy(&history.stdout);
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 3, "{history}");
    assert!(
        lines[2].contains("oncall") && lines[2].contains("stopped tool refund_order: fraud wave")
    );
    assert!(lines[0].contains("loaded the policy from"), "{history}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The policy file shown in docs/operators.md checks against `orders`.
#[test]
fn the_documented_policy_file_checks() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/operators.md"
    ))
    .unwrap();
    let start = doc.find("```toml\n").expect("a TOML block") + "```toml\n".len();
    let block = &doc[start..start + doc[start..].find("```").unwrap()];
    let dir = scratch("documented-policy");
    let file = dir.join("policy.toml");
    std::fs::write(&file, block).unwrap();
    let checked = orders(&["admin", "policy", "check", file.to_str().unwrap()], "");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_questions_time_to_live_is_a_flag() {
    let dir = scratch("ttl");
    let db = dir.join("store.db");
    let store = format!("sqlite:{}", db.display());
    let asked = replay(
        &[
            "--store",
            &store,
            "--approvals",
            "inbox",
            "--approval-ttl",
            "90",
        ],
        &[refund(json!(2590), false)],
    );
    assert_eq!(asked[0]["code"], "CONFIRMATION_REQUIRED", "{asked:?}");
    let store = toolcall_sqlite::SqliteStore::open(&db).unwrap();
    let pending = run::block_on(toolcall::store::QuestionStore::pending_approvals(
        &store,
        toolcall::store::now_ms(),
        10,
    ))
    .unwrap();
    assert_eq!(pending[0].expires_ms - pending[0].created_ms, 90_000);
    let refused = orders(&["replay", "-", "--approval-ttl", "0"], "");
    assert_eq!(refused.status.code(), Some(2));
}
