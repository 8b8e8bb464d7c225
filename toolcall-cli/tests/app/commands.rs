//! The commands an application gets: definitions, replay audited and run
//! once, configure, lock and check, usage errors and help, the about line,
//! admin's closest name, and the parts an application declares.

use super::*;

#[test]
fn definitions_follow_the_format_and_the_allowlist() {
    let (bank, dir) = bank_in("definitions");
    let file = dir.join("tools.json");
    let path = file.to_str().unwrap();
    run(&bank, &["definitions", "--format", "openai", "-o", path]).unwrap();
    let tools: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["transfer", "balance"], "all tools by default");
    assert_eq!(tools[0]["function"]["strict"], true);

    run(
        &bank,
        &[
            "definitions",
            "--format",
            "mcp",
            "--allow",
            "balance",
            "-o",
            path,
        ],
    )
    .unwrap();
    let tools: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    assert_eq!(tools[0]["name"], "balance");
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
}

#[test]
fn replay_runs_each_side_effect_once_and_audits_every_call() {
    let (bank, dir) = bank_in("replay");
    let (calls, audit) = replay_files(
        &dir,
        [
            json!({"tool": "transfer", "arguments": {"amount_cents": 500}, "call_id": "c1"}),
            json!({"tool": "transfer", "arguments": "{\"amount_cents\": 500}", "call_id": "c2"}),
            json!({"tool": "transfer", "arguments": {"amount_cents": 5.5}}),
            json!({"tool": "balance"}),
        ]
        .iter()
        .map(|c| format!("{c}\n"))
        .collect::<String>(),
    );
    replay(&bank, &calls, &audit, &["--session-id", "s1"]);
    assert_eq!(
        bank.transfers.load(Ordering::SeqCst),
        1,
        "the identical transfer was replayed"
    );

    let records = audit_records(&audit);
    let seen: Vec<(&str, &str, bool, Option<&str>)> = records
        .iter()
        .map(|r| {
            (
                r.session_id.as_str(),
                r.code.as_str(),
                r.replayed,
                r.call_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("s1", "OK", false, Some("c1")),
            ("s1", "OK", true, Some("c2")),
            ("s1", "INVALID_ARGUMENTS", false, None),
            ("s1", "OK", false, None),
        ]
    );
}

#[test]
fn configure_changes_the_dispatcher() {
    let (bank, dir) = bank_in("configure");
    let (calls, audit) = replay_files(&dir, TWO_TRANSFERS);
    app(&bank)
        .configure(|builder| builder.max_steps(1))
        .run_from([
            "bank",
            "replay",
            calls.to_str().unwrap(),
            "--audit",
            audit.to_str().unwrap(),
        ])
        .unwrap();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1);
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(
        log.lines()
            .nth(1)
            .unwrap()
            .contains("\"code\":\"STEP_LIMIT\""),
        "{log}"
    );
}

#[test]
fn lock_then_check_and_a_broken_contract_is_exit_code_1() {
    let (bank, dir) = bank_in("lock");
    let lock = dir.join("tools.lock.json");
    let path = lock.to_str().unwrap();
    run(&bank, &["lock", "--file", path]).unwrap();
    run(&bank, &["check", "--file", path]).unwrap();

    // A contract in which `transfer` also took a required `memo`: the
    // current tool no longer has it.
    let mut locked: Value = serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    let transfer = locked_tool(&mut locked, "transfer");
    transfer["fields"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "memo", "required": true, "type": "string"}));
    std::fs::write(&lock, serde_json::to_vec_pretty(&locked).unwrap()).unwrap();
    let error = run(&bank, &["check", "--file", path]).unwrap_err();
    assert!(matches!(error, Error::Breaking { count: 1, .. }), "{error}");
    assert_eq!(error.exit_code(), 1);

    let missing = run(
        &bank,
        &["check", "--file", dir.join("none").to_str().unwrap()],
    )
    .unwrap_err();
    assert_eq!(missing.exit_code(), 2);
    assert!(missing.to_string().contains("run `lock`"), "{missing}");
}

#[test]
fn usage_errors_and_help_do_not_exit_the_process() {
    let bank = Arc::new(Bank::default());
    let help = run(&bank, &["--help"]).unwrap_err();
    assert_eq!(help.exit_code(), 0);
    let text = help.to_string();
    for command in ["definitions", "replay", "report", "lock", "check", "mcp"] {
        assert!(
            text.contains(command),
            "{command} missing from --help: {text}"
        );
    }
    assert!(text.contains("Usage: bank"), "{text}");
    // The usage line names the application, whatever argv[0] is.
    let renamed = app(&bank)
        .run_from(["/usr/local/bin/other", "--help"])
        .unwrap_err();
    assert!(renamed.to_string().contains("Usage: bank"), "{renamed}");

    let version = run(&bank, &["--version"]).unwrap_err();
    assert_eq!(
        (version.exit_code(), version.to_string()),
        (0, "bank 2.4.1\n".to_owned())
    );

    let typo = run(
        &bank,
        &["definitions", "--format", "openai", "--allow", "transfr"],
    )
    .unwrap_err();
    assert_eq!(typo.exit_code(), 2);
    assert!(typo.to_string().contains("`transfr`"), "{typo}");

    let unknown = run(&bank, &["frobnicate"]).unwrap_err();
    assert_eq!(unknown.exit_code(), 2);
    let bad_format = run(&bank, &["definitions", "--format", "cohere"]).unwrap_err();
    assert_eq!(bad_format.exit_code(), 2);
    assert!(
        bad_format.to_string().contains("unknown format `cohere`"),
        "{bad_format}"
    );
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);
}

#[test]
fn the_about_line_is_the_application_s() {
    let bank = Arc::new(Bank::default());
    let Err(Error::Usage(help)) = app(&bank)
        .about("Moves money between the bank's accounts.")
        .run_from(["bank", "--help"])
    else {
        panic!("--help is a usage answer");
    };
    let help = help.render().to_string();
    assert!(
        help.contains("Moves money between the bank's accounts."),
        "{help}"
    );
    assert!(help.contains("--max-steps"), "{help}");
}

#[test]
fn admin_refuses_a_misspelt_name_and_names_the_closest_real_one() {
    let bank = Arc::new(Bank::default());
    for (args, closest) in [
        (
            &[
                "admin", "disable", "--caller", "defualt", "--reason", "loops",
            ][..],
            "did you mean `default`",
        ),
        (
            &["admin", "disable", "transfr", "--reason", "fraud"][..],
            "did you mean `transfer`",
        ),
        (
            &["admin", "enable", "transfr"][..],
            "did you mean `transfer`",
        ),
    ] {
        match run(&bank, args) {
            Err(Error::Input(message)) => assert!(message.contains(closest), "{args:?}: {message}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

/// What the `deposit_part` tool holds: the bank's counter, nothing else.
struct Teller(Arc<Bank>);

/// Deposits, holding only the teller, a part of the bank.
#[tool(side_effect)]
fn deposit_part(ctx: &Ctx<Teller>) -> Result<Value, Rejection> {
    ctx.state.0.transfers.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"deposited": true}))
}

/// The application's bank, which the teller is made from.
struct Branch {
    bank: Arc<Bank>,
}

#[test]
fn an_application_declares_the_parts_its_tools_take() {
    let (bank, dir) = bank_in("parts");
    let calls = dir.join("calls.jsonl");
    std::fs::write(&calls, "{\"tool\": \"deposit_part\", \"arguments\": {}}\n").unwrap();
    let branch = Arc::new(Branch {
        bank: Arc::clone(&bank),
    });
    let app = || App::new("bank", tools![deposit_part].unwrap(), Arc::clone(&branch));
    let error = app()
        .run_from(["bank", "replay", calls.to_str().unwrap()])
        .unwrap_err();
    assert!(
        error.to_string().contains("DispatcherBuilder::part("),
        "{error}"
    );
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);
    app()
        .part(|branch: &Branch| Teller(Arc::clone(&branch.bank)))
        .run_from(["bank", "replay", calls.to_str().unwrap()])
        .unwrap();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1);
}
