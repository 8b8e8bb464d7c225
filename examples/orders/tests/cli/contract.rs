//! The contract commands: definitions against the golden files, `check`
//! naming incompatible or stale changes, `report`, the lock file, the
//! allowlists and the documented policy file.

use super::*;
use toolcall_cli::Format;

/// `orders definitions --format FORMAT -o FILE`, then `extra`.
fn definitions_to(format: &str, file: &std::path::Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "definitions",
        "--format",
        format,
        "-o",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    orders(&args, "")
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
    for format in Format::ALL.map(Format::name) {
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
        let written = definitions_to(format, &file, &[]);
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

/// `definitions --check` is the CI gate: the committed files pass, a stale
/// one fails with exit 1 naming what changed, and nothing is written.
#[test]
fn a_stale_definitions_file_fails_the_check_naming_what_changed() {
    let committed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("definitions");
    for format in Format::ALL.map(Format::name) {
        let file = committed.join(format!("{format}.json"));
        let output = definitions_to(format, &file, &["--check"]);
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
    let output = definitions_to("openai", &stale, &["--check"]);
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
    let output = definitions_to("openai", &missing, &["--check"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(!missing.exists());
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
