//! Stores and settings from the command line: SQLite across runs, an unknown
//! store, flags that only narrow, and the questions' time to live.

use super::*;
#[cfg(feature = "sqlite")]
use toolcall_testkit::run::block_on;

/// `--store sqlite:PATH`: a second run over the same file replays the
/// first's transfer instead of moving the money again. SQLite is an opt-in
/// feature (not a default): `cargo test -p toolcall-cli --features sqlite`
/// runs this test, as `cargo test --workspace` does (the `orders` example
/// turns the feature on).
#[cfg(feature = "sqlite")]
#[test]
fn store_sqlite_keeps_what_was_done_across_runs() {
    let (bank, dir) = bank_in("store");
    let (calls, audit) = replay_files(
        &dir,
        "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 7}}\n",
    );
    let store = format!("sqlite:{}", dir.join("store.db").display());
    for _ in 0..2 {
        replay(&bank, &calls, &audit, &["--store", &store]);
    }
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1, "moved once");
    let replayed: Vec<bool> = audit_records(&audit).iter().map(|r| r.replayed).collect();
    assert_eq!(replayed, [false, true]);
}

/// A store the command line cannot name is a usage error, whatever the
/// features.
#[test]
fn an_unknown_store_is_a_usage_error() {
    let bank = Arc::new(Bank::default());
    let error = run(&bank, &["replay", "--store", "redis://x"]).unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert!(
        error.to_string().contains(
            "unknown store `redis://x`: expected `memory`, `sqlite:PATH` or `postgres://...`"
        ),
        "{error}"
    );
}

#[test]
fn the_pipeline_flags_only_narrow_the_code_s_settings() {
    let (bank, dir) = bank_in("pipeline-flags");
    let (calls, audit) = replay_files(&dir, TWO_TRANSFERS);
    let (calls, audit_path) = (calls.to_str().unwrap(), audit.to_str().unwrap());
    run(
        &bank,
        &["replay", calls, "--max-steps", "1", "--audit", audit_path],
    )
    .unwrap();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1, "one step");
    assert_eq!(audited_codes(&audit), ["OK", "STEP_LIMIT"]);

    for (flags, says) in [
        (
            ["--max-steps", "11"],
            "--max-steps 11 is above the application's 10",
        ),
        (
            ["--max-retries", "3"],
            "--max-retries 3 is above the application's 2",
        ),
        (["--max-duplicate-calls", "4"], "above the application's 3"),
    ] {
        let error = run(&bank, &["replay", calls, flags[0], flags[1]]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains(says), "{error}");
    }
    let error = app(&bank)
        .configure(|builder| builder.approvals(toolcall::Approvals::Inbox))
        .run_from(["bank", "replay", calls, "--approvals", "host"])
        .unwrap_err();
    assert!(error.to_string().contains("--approvals host"), "{error}");
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1, "nothing more ran");
}

/// Closes an account, once a person approves.
#[tool(side_effect, high_risk)]
fn close(
    ctx: &Ctx<Bank>,
    /// The account.
    account: String,
) -> Result<Value, Rejection> {
    let _ = account;
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"closed": true}))
}

/// Every command that can ask a person takes `--approval-ttl`, after its
/// name or before it; `--help` stops the command before it runs.
#[test]
fn every_command_that_can_ask_a_person_takes_the_approval_ttl() {
    let bank = Arc::new(Bank::default());
    for command in ["replay", "mcp", "serve", "agent"] {
        for args in [
            [command, "--approval-ttl", "60", "--help"],
            ["--approval-ttl", "60", command, "--help"],
        ] {
            let Err(Error::Usage(usage)) = run(&bank, &args) else {
                panic!("{args:?}: not stopped by --help");
            };
            assert_eq!(
                usage.kind(),
                clap::error::ErrorKind::DisplayHelp,
                "{args:?}"
            );
            assert!(
                usage
                    .render()
                    .to_string()
                    .contains("--approval-ttl <SECONDS>"),
                "{args:?}"
            );
        }
    }
}

/// The approval's time to live as the store keeps it: over `--store
/// sqlite:` (an opt-in feature), which the test reads back.
#[cfg(feature = "sqlite")]
#[test]
fn the_questions_time_to_live_is_the_command_lines_to_set() {
    let (bank, dir) = bank_in("ttl");
    let (calls, _) = replay_files(
        &dir,
        "{\"tool\": \"close\", \"arguments\": {\"account\": \"A\"}}\n",
    );
    let db = dir.join("store.db");
    let store = format!("sqlite:{}", db.display());
    App::new("bank", tools![close].unwrap(), Arc::clone(&bank))
        .run_from([
            "bank",
            "replay",
            calls.to_str().unwrap(),
            "--store",
            &store,
            "--approval-ttl",
            "90",
            "--denial-ttl",
            "7200",
        ])
        .unwrap();
    let store = toolcall_sqlite::SqliteStore::open(&db).unwrap();
    let pending = block_on(toolcall::store::QuestionStore::pending_approvals(
        &store,
        toolcall::store::now_ms(),
        10,
    ))
    .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].expires_ms - pending[0].created_ms, 90_000);
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);
}

/// A time to live of no time, negative, over 30 days or not whole seconds
/// is refused, whatever the store.
#[test]
fn a_time_to_live_of_no_time_is_refused() {
    let bank = Arc::new(Bank::default());
    let (calls, _) = replay_files(
        &scratch("ttl-refused"),
        "{\"tool\": \"close\", \"arguments\": {\"account\": \"A\"}}\n",
    );
    for bad in ["0", "-5", "2592001", "1.5"] {
        let flag = format!("--approval-ttl={bad}");
        let error = app(&bank)
            .run_from(["bank", "replay", calls.to_str().unwrap(), &flag])
            .unwrap_err();
        assert!(
            error.to_string().contains("no time to live"),
            "{bad}: {error}"
        );
    }
}
