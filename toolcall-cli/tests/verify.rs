//! `report --verify`: the audit's hash chain checked from the command line,
//! over what `replay --audit` wrote, in one file and in a rotated pair.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolcall::audit_chain::last_head;
use toolcall::{AuditRecord, AuditSink, JsonLinesAudit, Rejection, tool, tools};
use toolcall_cli::{App, Error};

/// Looks an order up.
#[tool]
fn get_order(
    /// The order.
    order_id: String,
) -> Result<Value, Rejection> {
    Ok(json!({"order_id": order_id}))
}

fn run(args: &[&str]) -> Result<(), Error> {
    App::new("shop", tools![get_order].unwrap(), Arc::new(()))
        .run_from(std::iter::once("shop").chain(args.iter().copied()))
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("toolcall-cli-verify-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Replays `count` lookups, orders `first..`, into the audit file.
fn replay(dir: &Path, audit: &Path, first: u32, count: u32) {
    let calls = dir.join("calls.jsonl");
    let lines: String = (first..first + count)
        .map(|n| {
            format!(
                "{}\n",
                json!({"tool": "get_order", "arguments": {"order_id": format!("A{n}")}})
            )
        })
        .collect();
    std::fs::write(&calls, lines).unwrap();
    let (calls, audit) = (calls.to_str().unwrap(), audit.to_str().unwrap());
    run(&["replay", calls, "--session-id", "s", "--audit", audit]).unwrap();
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn put(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// The error `report --verify` answers, which it must.
fn refused(args: &[&str]) -> Error {
    let mut all = vec!["report", "--verify"];
    all.extend_from_slice(args);
    run(&all).expect_err("the chain was tampered with")
}

/// Asserts that `report --verify` on `args` fails with `code`, saying `says`.
fn refused_saying(args: &[&str], code: u8, says: &str) {
    let error = refused(args);
    assert_eq!(error.exit_code(), code, "{error}");
    assert!(error.to_string().contains(says), "{error}");
}

#[test]
fn verify_holds_across_runs_and_names_a_changed_record_with_exit_code_1() {
    let dir = scratch("one");
    let audit = dir.join("audit.jsonl");
    // Two runs: the second continues the first's chain.
    replay(&dir, &audit, 1, 3);
    replay(&dir, &audit, 4, 3);
    let path = audit.to_str().unwrap();
    run(&["report", "--verify", path]).unwrap();
    let records: Vec<AuditRecord> = lines(&audit)
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let seqs: Vec<Option<u64>> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=6).map(Some).collect::<Vec<_>>());

    // One byte of the arguments of the second record.
    let mut all = lines(&audit);
    all[1] = all[1].replacen("A2", "A9", 1);
    put(&audit, &all);
    refused_saying(&[path], 1, &format!("{path}:2: the record was changed"));
}

#[test]
fn verify_reads_a_rotated_pair_and_names_a_removed_record() {
    let dir = scratch("pair");
    let (first, second) = (dir.join("audit.1.jsonl"), dir.join("audit.jsonl"));
    replay(&dir, &first, 1, 3);
    // The application rotated: its new file continues the old one.
    let head = last_head(&first).unwrap().unwrap();
    let sink = JsonLinesAudit::open_after(&second, &head).unwrap();
    let record: AuditRecord = serde_json::from_str(&lines(&first)[0]).unwrap();
    sink.record(record);
    drop(sink);
    // Then a restart: `--audit` continues the file from its last line.
    replay(&dir, &second, 4, 3);
    let (a, b) = (first.to_str().unwrap(), second.to_str().unwrap());
    run(&["report", "--verify", a, b]).unwrap();
    // The second alone, after the first's last hash (in capitals too).
    let after = head.hash.to_ascii_uppercase();
    run(&["report", "--verify", b, "--after", &after]).unwrap();
    // Alone from the start, it misses the first file's records.
    refused_saying(&[b], 1, &format!("{b}:1: records 1 to 3 are missing"));

    let mut all = lines(&second);
    all.remove(2);
    put(&second, &all);
    refused_saying(&[a, b], 1, &format!("{b}:3: record 6 is missing"));
    // Swapped: the first bad line is named.
    let mut all = lines(&first);
    all.swap(0, 1);
    put(&first, &all);
    refused_saying(&[a, b], 1, &format!("{a}:1: record 2 is here"));
}

#[test]
fn verify_refuses_what_it_cannot_check() {
    let dir = scratch("refused");
    let audit = dir.join("audit.jsonl");
    replay(&dir, &audit, 1, 2);
    let path = audit.to_str().unwrap();
    // Not a hash.
    refused_saying(&[path, "--after", "abc"], 2, "--after abc: not a hash");
    // Standard input: read once, it cannot be read again to diagnose.
    let error = refused(&["-"]);
    assert_eq!(error.exit_code(), 2);
    // An empty file: named, exit code 1.
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    refused_saying(&[empty.to_str().unwrap()], 1, "the file is empty");
    // A record the chain does not know: a sink's own fields are its own.
    let extra = dir.join("extra.jsonl");
    let sink = JsonLinesAudit::open(&extra).unwrap();
    let mut record: AuditRecord = serde_json::from_str(&lines(&audit)[0]).unwrap();
    record.seq = Some(77);
    sink.record(record);
    run(&["report", "--verify", extra.to_str().unwrap()]).unwrap();
    // Files after the first, or --after, only with --verify; not with --json.
    for args in [
        &["report", path, path][..],
        &["report", path, "--after", &"0".repeat(64)],
        &["report", "--verify", path, "--json"],
    ] {
        let error = run(args).expect_err("a usage error");
        assert!(matches!(error, Error::Usage(_)), "{args:?}: {error}");
        assert_eq!(error.exit_code(), 2, "{args:?}");
    }
}
