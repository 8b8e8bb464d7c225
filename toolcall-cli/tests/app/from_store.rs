//! `App::from_store`: the state is built from `--store`'s spec, once, and
//! only by a command that runs tools.

use super::*;
use std::sync::Mutex;
use toolcall_cli::StoreSpec;

/// What the builder saw: the specs it was handed.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<StoreSpec>>>);

fn app_from_store(seen: &Seen, bank: &Arc<Bank>, fail: bool) -> App<Bank> {
    let (seen, bank) = (seen.clone(), Arc::clone(bank));
    App::from_store(
        "bank",
        tools![transfer, balance].unwrap(),
        move |spec: StoreSpec| async move {
            seen.0.lock().unwrap().push(spec);
            if fail {
                return Err("the ledger database is down".to_owned());
            }
            let state = Bank::default();
            state
                .transfers
                .store(bank.transfers.load(Ordering::SeqCst), Ordering::SeqCst);
            Ok(state)
        },
    )
}

// The store named is a Postgres one: without the feature, `--store
// postgres:` is refused before any command runs.
#[cfg(feature = "postgres")]
#[test]
fn static_commands_build_no_state_and_need_no_database() {
    let (seen, bank) = (Seen::default(), Arc::new(Bank::default()));
    let dir = scratch("from-store-static");
    let file = dir.join("tools.json");
    let lock = dir.join("tools.lock");
    // A Postgres nobody listens on: nothing is opened.
    let down = "postgres://postgres@127.0.0.1:1/none";
    for args in [
        vec![
            "definitions",
            "--format",
            "openai",
            "--store",
            down,
            "-o",
            file.to_str().unwrap(),
        ],
        vec!["lock", "--file", lock.to_str().unwrap(), "--store", down],
        vec!["check", "--file", lock.to_str().unwrap(), "--store", down],
    ] {
        app_from_store(&seen, &bank, true)
            .run_from(std::iter::once("bank").chain(args.iter().copied()))
            .unwrap_or_else(|error| panic!("{args:?}: {error}"));
    }
    assert!(seen.0.lock().unwrap().is_empty(), "no state was built");
    let tools: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 2);
}

/// `agent --serve-script` plays a model and runs no tool: it builds no
/// state and opens no store, so it serves with the database down.
#[cfg(feature = "agent")]
#[test]
fn the_scripted_model_builds_no_state() {
    use std::io::{Read as _, Write as _};
    use std::time::{Duration, Instant};

    let (seen, bank) = (Seen::default(), Arc::new(Bank::default()));
    let script = scratch("serve-script").join("script.json");
    std::fs::write(&script, r#"{"turns": [{"content": "Done."}]}"#).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let args: Vec<String> = [
        "bank",
        "agent",
        "--serve-script",
        script.to_str().unwrap(),
        "--listen",
        &addr,
        "--store",
        "postgres://postgres@127.0.0.1:1/none",
    ]
    .map(str::to_owned)
    .to_vec();
    let server = {
        let (seen, bank) = (seen.clone(), Arc::clone(&bank));
        // Serves until the process ends; its builder fails if called.
        std::thread::spawn(move || app_from_store(&seen, &bank, true).run_from(args))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        assert!(
            !server.is_finished(),
            "it ended: {:?}",
            server.join().unwrap()
        );
        if let Ok(mut stream) = std::net::TcpStream::connect(&addr) {
            stream
                .write_all(b"GET /requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).unwrap();
            break answer;
        }
        assert!(Instant::now() < deadline, "nothing listens on {addr}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(seen.0.lock().unwrap().is_empty(), "no state was built");
}

/// Over `--store sqlite:` (an opt-in feature), a store a test can open
/// with no server.
#[cfg(feature = "sqlite")]
#[test]
fn a_command_that_runs_tools_builds_it_from_the_store_it_opens() {
    let (seen, bank) = (Seen::default(), Arc::new(Bank::default()));
    let dir = scratch("from-store-run");
    let (calls, audit) = replay_files(
        &dir,
        "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 7}}\n\
     {\"tool\": \"balance\"}\n",
    );
    let db = dir.join("store.db");
    let store = format!("sqlite:{}", db.display());
    let args = [
        "bank",
        "replay",
        calls.to_str().unwrap(),
        "--store",
        &store,
        "--audit",
        audit.to_str().unwrap(),
    ];
    app_from_store(&seen, &bank, false).run_from(args).unwrap();
    assert_eq!(*seen.0.lock().unwrap(), [StoreSpec::Sqlite(db.clone())]);
    assert_eq!(
        audited_codes(&audit),
        ["OK", "OK"],
        "the state built ran the calls"
    );
    let log = std::fs::read_to_string(&audit).unwrap();

    // Its builder's error ends the command before any call, with its words.
    let error = app_from_store(&seen, &bank, true)
        .run_from(args)
        .unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert_eq!(
        error.to_string(),
        "cannot build the application's state: the ledger database is down"
    );
    assert_eq!(std::fs::read_to_string(&audit).unwrap(), log, "no call ran");
}

#[test]
fn a_policy_only_configure_sets_is_refused_where_definitions_could_not_read_it() {
    let (seen, bank) = (Seen::default(), Arc::new(Bank::default()));
    let error = app_from_store(&seen, &bank, false)
        .configure(|builder| builder.policy(Policy::new().allow(["balance"])))
        .run_from(["bank", "replay", "/dev/null"])
        .unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert!(error.to_string().contains("App::policy"), "{error}");
    // Given with App::policy, it holds for both kinds of command.
    app_from_store(&seen, &bank, false)
        .policy(Policy::new().allow(["balance"]))
        .run_from(["bank", "replay", "/dev/null"])
        .unwrap();
}
