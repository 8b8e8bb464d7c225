//! The example of README's "Your own application", run as its users run
//! it: the binary, on the Postgres of `TOOLCALL_POSTGRES_URL` (skipped
//! without one), its state built from `--store`, its async check asking the
//! database each time a call is made.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_volumes");

fn database() -> Option<String> {
    let url = std::env::var("TOOLCALL_POSTGRES_URL").ok();
    if url.is_none() {
        eprintln!("SKIPPED: TOOLCALL_POSTGRES_URL is not set");
    }
    url
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("volumes-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `volumes ARGS...` with `lines` on its standard input.
/// A command that fails before it reads its input (no database) may
/// have exited before the lines are written: its output is the subject.
fn volumes(args: &[&str], lines: &[Value]) -> Output {
    let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
    toolcall_testkit::run::spawn_fed(Command::new(BIN).args(args), &input)
        .wait_with_output()
        .unwrap()
}

fn codes(audit: &Path) -> Vec<String> {
    std::fs::read_to_string(audit)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["code"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// `volumes replay` of `lines` in conversation `session`, audited to
/// `audit`; it must succeed.
fn replay(url: &str, session: &str, audit: &Path, lines: &[Value]) {
    let args = ["replay", "--store", url, "--session-id", session, "--audit"];
    let mut args = args.to_vec();
    args.push(audit.to_str().unwrap());
    let out = volumes(&args, lines);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One client of the test's own, for what happens outside toolcall.
async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test]
async fn the_async_check_asks_the_database_each_time_a_call_is_made() {
    let Some(url) = database() else { return };
    let dir = scratch("check");
    let audit = dir.join("audit.jsonl");
    let id = format!(
        "{}-{}",
        std::process::id(),
        std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos()
    );
    let (a, b) = (format!("vol-t{id}-a"), format!("vol-t{id}-b"));
    let session = format!("ops-{id}");

    // The binary makes its table; the test adds two volumes of its own.
    let listed = volumes(
        &["replay", "--store", &url],
        &[serde_json::json!({"tool": "list_volumes"})],
    );
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let db = client(&url).await;
    for name in [&a, &b] {
        db.execute(
            "INSERT INTO volumes_volumes (name, size_gb) VALUES ($1, 10)",
            &[name],
        )
        .await
        .unwrap();
    }

    let delete = |name: &str, confirmed: bool| serde_json::json!({"tool": "delete_volume", "arguments": {"name": name}, "confirmed": confirmed});
    replay(
        &url,
        &session,
        &audit,
        &[delete(&a, true), delete(&b, false)],
    );
    assert_eq!(codes(&audit), ["OK", "CONFIRMATION_REQUIRED"]);

    // While the question about b waits, someone deletes b by hand.
    db.execute(
        "UPDATE volumes_volumes SET deleted = TRUE WHERE name = $1",
        &[&b],
    )
    .await
    .unwrap();
    // The approved call is checked again, against the database: the check
    // refuses it, the handler does not run (it would say ALREADY_DELETED).
    // And a (the delete already done) is refused by the check in another
    // conversation, where no replay answers it.
    replay(&url, &session, &audit, &[delete(&b, true)]);
    replay(&url, &format!("{session}-2"), &audit, &[delete(&a, true)]);
    assert_eq!(
        codes(&audit),
        [
            "OK",
            "CONFIRMATION_REQUIRED",
            "VOLUME_NOT_FOUND",
            "VOLUME_NOT_FOUND"
        ]
    );
    let deleted: Vec<bool> = db
        .query(
            "SELECT deleted FROM volumes_volumes WHERE name = $1 OR name = $2 ORDER BY name",
            &[&a, &b],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(deleted, [true, true]);
}

#[test]
fn definitions_need_no_database_and_tools_need_postgres() {
    let dir = scratch("definitions");
    let file = dir.join("tools.json");
    let down = "postgres://postgres@127.0.0.1:1/none";
    let out = volumes(
        &[
            "definitions",
            "--format",
            "openai",
            "--store",
            down,
            "-o",
            file.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list_volumes", "delete_volume"]);

    let out = volumes(&["replay"], &[serde_json::json!({"tool": "list_volumes"})]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "volumes: cannot build the application's state: volumes keeps its volumes in Postgres: give --store postgres://..."
    );
}

/// The auditor may only list: its definitions are the read tool's alone,
/// the default caller's both, and neither needs a database.
#[test]
fn the_auditor_s_definitions_are_the_read_tool_s_alone() {
    let names = |caller: Option<&str>| -> Vec<String> {
        let mut args = vec!["definitions", "--format", "openai"];
        if let Some(caller) = caller {
            args.extend(["--caller", caller]);
        }
        let out = volumes(&args, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
        tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(Some("auditor")), ["list_volumes"]);
    assert_eq!(names(None), ["list_volumes", "delete_volume"]);
}

/// README's "Your own application" shows this example's code: each of its
/// Rust blocks is a piece of `src/main.rs`, which the workspace builds, so
/// the README's code compiles as long as this holds.
#[test]
fn readme_s_own_application_shows_this_example_s_code() {
    let readme = include_str!("../../../README.md");
    let main = include_str!("../src/main.rs");
    let section = readme
        .split("\n## Your own application")
        .nth(1)
        .expect("README has the section")
        .split("\n## ")
        .next()
        .unwrap();
    let blocks: Vec<&str> = section
        .split("```rust")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap().trim())
        .collect();
    assert!(!blocks.is_empty(), "the section shows code");
    for block in blocks {
        assert!(
            main.contains(block),
            "README shows code that is not in examples/volumes/src/main.rs:\n{block}"
        );
    }
}
