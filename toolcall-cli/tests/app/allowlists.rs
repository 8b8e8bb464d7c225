//! Allowlists, callers and policies: no tool named is refused, the code's
//! policy is a ceiling, a caller is one of the code's, and replay lines are
//! checked as the text they have.

use super::*;

/// An allowlist that is given but names nothing (`--allow ""`, `","`, `" "`)
/// is refused by every command, before anything runs; it never means every
/// tool. `--allow` left out is the application's default (here every tool).
#[test]
fn an_allowlist_that_names_no_tool_is_refused_by_every_command() {
    let (bank, dir) = bank_in("empty-allow");
    let (calls, audit) = replay_files(&dir, ONE_CENT);
    std::fs::write(&audit, "").unwrap();
    let lock = dir.join("tools.lock.json");
    let out = dir.join("tools.json");
    let (calls, audit, lock, out) = (
        calls.to_str().unwrap(),
        audit.to_str().unwrap(),
        lock.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    let commands: [&[&str]; 6] = [
        &["definitions", "--format", "openai", "-o", out],
        &["replay", calls],
        &["report", audit],
        &["lock", "--file", lock],
        &["check", "--file", lock],
        &["mcp"],
    ];
    for empty in ["", ",", " ", " , ", ",,"] {
        // Without the feature, `mcp` is no command at all.
        for command in commands
            .into_iter()
            .filter(|c| cfg!(feature = "mcp") || c[0] != "mcp")
        {
            let mut args = command.to_vec();
            args.extend(["--allow", empty]);
            let error = run(&bank, &args).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{args:?}: {error}");
            let message = error.to_string();
            assert!(
                message.contains("--allow names no tool")
                    && message.contains("comma-separated")
                    && message.contains("transfer,balance"),
                "{args:?}: {message}"
            );
        }
    }
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0, "nothing ran");
    assert!(!std::path::Path::new(out).exists() && !std::path::Path::new(lock).exists());

    // Empty names beside real ones are skipped; no --allow is every tool.
    run(
        &bank,
        &[
            "definitions",
            "--format",
            "neutral",
            "-o",
            out,
            "--allow",
            "balance, ,",
        ],
    )
    .unwrap();
    let tools: Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    run(&bank, &["replay", calls]).unwrap();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1);
}

/// The library function fails closed too: no names is an error, not every
/// tool; `every_tool` is the explicit way to allow everything.
#[test]
fn allowlist_without_names_is_an_error_and_every_tool_is_explicit() {
    let registry = tools![transfer, balance].unwrap();
    let none: [&str; 0] = [];
    for names in [&none[..], &[""], &[",", " "], &["  "]] {
        let error = toolcall_cli::allowlist(&registry, names).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("names no tool"), "{error}");
    }
    let one = toolcall_cli::allowlist(&registry, &[" balance "]).unwrap();
    assert_eq!(one.allowed().collect::<Vec<_>>(), ["balance"]);
    let every = toolcall_cli::every_tool(&registry);
    assert_eq!(every.allowed().collect::<Vec<_>>(), ["balance", "transfer"]);
}

/// Arguments written as an object in a replay line reach the pipeline as
/// the line's own text: a member twice, at any depth, is INVALID_JSON (not
/// the last one silently), and an object over 64 KiB is refused by size.
/// The audit keeps a cut record of the oversized one, and `report
/// --rejected-calls` writes the calls it kept whole, leaving that one out.
#[test]
fn replay_object_arguments_are_checked_as_the_text_the_line_has() {
    let (bank, dir) = bank_in("object-form");
    let big = format!(
        "{{\"amount_cents\": 1, \"memo\": \"{}\"}}",
        "x".repeat(200_000)
    );
    let (calls, audit) = replay_files(
        &dir,
        [
            r#"{"tool": "transfer", "arguments": {"amount_cents": 100, "amount_cents": 200}}"#.to_owned(),
            r#"{"tool": "transfer", "arguments": {"amount_cents": 100, "n": {"a": [{"b": 1, "b": 2}]}}}"#.to_owned(),
            format!(r#"{{"tool": "transfer", "arguments": {big}}}"#),
            r#"{"tool": "transfer", "arguments": "{\"amount_cents\": 7, \"amount_cents\": 8}"}"#.to_owned(),
            r#"{"tool": "transfer", "arguments": null}"#.to_owned(),
            r#"{"tool": "transfer", "arguments":   {"amount_cents": 5.5}  }"#.to_owned(),
        ]
        .iter()
        .map(|line| format!("{line}\n"))
        .collect::<String>(),
    );
    replay(&bank, &calls, &audit, &[]);
    assert_eq!(
        bank.transfers.load(Ordering::SeqCst),
        0,
        "nothing was moved"
    );
    let records = audit_records(&audit);
    let codes: Vec<&str> = records.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(
        codes,
        [
            "INVALID_JSON",
            "INVALID_JSON",
            "INVALID_JSON",
            "INVALID_JSON",
            "INVALID_JSON",
            "INVALID_ARGUMENTS"
        ]
    );
    // The audit keeps the arguments as the line wrote them.
    assert_eq!(
        records[0].arguments,
        r#"{"amount_cents": 100, "amount_cents": 200}"#
    );
    assert!(records[2].arguments.len() < 4096, "the big one is cut");
    assert_eq!(records[5].arguments, r#"{"amount_cents": 5.5}"#);

    let rejected = dir.join("rejected.jsonl");
    run(
        &bank,
        &[
            "report",
            audit.to_str().unwrap(),
            "--rejected-calls",
            rejected.to_str().unwrap(),
        ],
    )
    .unwrap();
    let lines: Vec<Value> = std::fs::read_to_string(&rejected)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let written: Vec<&str> = lines
        .iter()
        .map(|line| line["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(
        written,
        [
            r#"{"amount_cents": 100, "amount_cents": 200}"#,
            r#"{"amount_cents": 100, "n": {"a": [{"b": 1, "b": 2}]}}"#,
            r#"{"amount_cents": 7, "amount_cents": 8}"#,
            "null",
            r#"{"amount_cents": 5.5}"#,
        ],
        "the cut one is left out"
    );
}

/// Two members of the same name in a replay line itself (not in its
/// arguments) make it no replay call: an error naming the line, never the
/// last one silently.
#[test]
fn a_replay_line_with_a_member_twice_is_an_input_error_naming_the_line() {
    let (bank, dir) = bank_in("line-twice");
    let calls = dir.join("calls.jsonl");
    for (line, member) in [
        (
            r#"{"tool": "balance", "tool": "transfer", "arguments": {"amount_cents": 1}}"#,
            "tool",
        ),
        (
            r#"{"tool": "transfer", "arguments": {"amount_cents": 1}, "arguments": {"amount_cents": 9}}"#,
            "arguments",
        ),
        (
            r#"{"tool": "transfer", "arguments": "{}", "confirmed": false, "confirmed": true}"#,
            "confirmed",
        ),
        (
            r#"{"tool": "transfer", "call_id": "a", "call_id": "b"}"#,
            "call_id",
        ),
    ] {
        std::fs::write(&calls, format!("\n{line}\n")).unwrap();
        let error = run(&bank, &["replay", calls.to_str().unwrap()]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let message = error.to_string();
        assert!(
            message.contains("line 2: not a replay call")
                && message.contains(&format!("duplicate field `{member}`")),
            "{message}"
        );
    }
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);
}

/// The policy the code sets, in `configure` as with `App::policy`, is the
/// ceiling: `--allow` narrows it (a transfer is TOOL_NOT_ALLOWED, nothing
/// moves), and naming a tool it does not allow is an error naming what it
/// allows, for every command.
#[test]
fn the_code_s_policy_is_a_ceiling_allow_only_narrows() {
    let (bank, dir) = bank_in("ceiling");
    let (calls, audit) = replay_files(&dir, ONE_CENT);
    let (calls, audit) = (calls.to_str().unwrap(), audit.to_str().unwrap());
    let both = || Policy::new().allow(["transfer", "balance"]);
    app(&bank)
        .configure(move |builder| builder.policy(both()))
        .run_from([
            "bank", "--allow", "balance", "replay", calls, "--audit", audit,
        ])
        .unwrap();
    assert_eq!(audited_codes(audit.as_ref()), ["TOOL_NOT_ALLOWED"]);
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0, "nothing moved");

    let balance_only = || Policy::new().allow(["balance"]);
    for command in [&["replay", calls][..], &["definitions", "--format", "mcp"]] {
        for app in [
            app(&bank).policy(balance_only()),
            app(&bank).configure(move |builder| builder.policy(balance_only())),
        ] {
            let mut args = vec!["bank", "--allow", "transfer"];
            args.extend(command);
            let error = app.run_from(args).unwrap_err();
            assert_eq!(error.exit_code(), 2);
            assert_eq!(
                error.to_string(),
                "--allow names `transfer`, which the code does not allow caller `default`: \
                 --allow can only narrow the code's policy, which allows balance"
            );
        }
    }
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0, "nothing moved");
}

/// `--caller` runs as one of the code's callers, under its policy; a
/// caller the code does not name is an error listing those it does, and a
/// `--limit` that is not NAME=VALUE a usage error.
#[test]
fn caller_picks_one_of_the_code_s_callers() {
    let (bank, dir) = bank_in("caller");
    let (calls, audit) = replay_files(&dir, ONE_CENT);
    let (calls, audit) = (calls.to_str().unwrap(), audit.to_str().unwrap());
    let with_reader =
        || app(&bank).callers([Caller::new("reader", Policy::new().allow(["balance"]))]);
    with_reader()
        .run_from([
            "bank", "--caller", "reader", "replay", calls, "--audit", audit,
        ])
        .unwrap();
    let record = &audit_records(audit.as_ref())[0];
    assert_eq!(
        (record.caller.as_str(), record.code.as_str()),
        ("reader", "TOOL_NOT_ALLOWED")
    );
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);

    let error = with_reader()
        .run_from(["bank", "--caller", "nobody", "replay", calls])
        .unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert_eq!(
        error.to_string(),
        "--caller `nobody` is no caller of bank: the callers are default, reader"
    );
    let error = with_reader()
        .run_from(["bank", "--limit", "much", "replay", calls])
        .unwrap_err();
    assert!(matches!(error, Error::Usage(_)), "{error}");
    assert_eq!(error.exit_code(), 2);
    assert!(error.to_string().contains("NAME=VALUE"), "{error}");
}
