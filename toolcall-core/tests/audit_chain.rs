//! The JSON-lines audit's hash chain: what the sink writes, and what the
//! verifier finds when a record is changed, removed, inserted or reordered,
//! in one file and across a rotated pair.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use sha2::{Digest, Sha256};
use toolcall_core::audit_chain::{
    ChainBreak, ChainHead, GENESIS, Problem, last_head, verify_chain, verify_chain_after,
};
use toolcall_core::{AuditRecord, AuditSink, JsonLinesAudit};

/// A fresh directory of its own for each test (and each proptest case).
fn dir(name: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "toolcall-audit-chain-{}-{name}-{n}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The record of call `n`: its arguments name order `A{n}`.
fn record(n: u64) -> AuditRecord {
    serde_json::from_value(serde_json::json!({
        "session_id": "chat-7", "caller": "default", "tool": "refund_order",
        "arguments": format!("{{\"order_id\":\"A{n:03}\"}}"),
        "confirmed": false, "ok": true, "code": "OK", "replayed": false,
        "duration_ms": 0.5, "step": n
    }))
    .unwrap()
}

/// Writes records `from..=to` through a sink on `path` (opened as
/// [`JsonLinesAudit::open`] does, or continuing `after`), and returns its
/// head.
fn write(path: &Path, after: Option<&ChainHead>, from: u64, to: u64) -> ChainHead {
    let sink = match after {
        Some(after) => JsonLinesAudit::open_after(path, after).unwrap(),
        None => JsonLinesAudit::open(path).unwrap(),
    };
    for n in from..=to {
        sink.record(record(n));
    }
    sink.head()
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn put(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(path, text).unwrap();
}

fn sha(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Changes one byte of the arguments of `line` (from 1): `A` to `B`.
fn edit(path: &Path, line: usize) {
    let mut all = lines(path);
    let before = all[line - 1].clone();
    all[line - 1] = before.replacen("\\\"A", "\\\"B", 1);
    assert_ne!(all[line - 1], before, "the edit changes the line");
    put(path, &all);
}

fn remove(path: &Path, line: usize) {
    let mut all = lines(path);
    all.remove(line - 1);
    put(path, &all);
}

fn swap(path: &Path, line: usize) {
    let mut all = lines(path);
    all.swap(line - 1, line);
    put(path, &all);
}

fn insert(path: &Path, line: usize, text: String) {
    let mut all = lines(path);
    all.insert(line - 1, text);
    put(path, &all);
}

/// The break in the one file `path`, asserted to be `problem` at `line`.
#[track_caller]
fn broken_at(path: &Path, line: u64, problem: Problem) -> ChainBreak {
    let broken = break_in(&[path]);
    assert_eq!(broken.line, line);
    assert_eq!(broken.problem, problem);
    broken
}

/// Asserts that the break says `text`.
#[track_caller]
fn assert_says(broken: &ChainBreak, text: &str) {
    assert!(broken.to_string().contains(text), "{broken}");
}

/// Asserts that the break's problem is of the pattern's kind.
macro_rules! assert_problem {
    ($broken:expr, $kind:pat) => {
        assert!(matches!($broken.problem, $kind), "{}", $broken)
    };
}

/// The break `verify_chain` finds, which it must.
fn break_in(files: &[&Path]) -> ChainBreak {
    match verify_chain(files) {
        Ok(report) => panic!("the chain holds ({report}), a break was due"),
        Err(broken) => broken,
    }
}

/// One file of `n` records.
fn one_file(name: &str, n: u64) -> PathBuf {
    let path = dir(name).join("audit.jsonl");
    write(&path, None, 1, n);
    path
}

/// A rotated pair: records 1..=5 in the first file, 6..=10 in the second.
fn rotated_pair(name: &str) -> (PathBuf, PathBuf) {
    let dir = dir(name);
    let (first, second) = (dir.join("audit.1.jsonl"), dir.join("audit.jsonl"));
    let head = write(&first, None, 1, 5);
    write(&second, Some(&head), 6, 10);
    (first, second)
}

#[test]
fn each_record_names_the_hash_of_the_line_before_it() {
    let path = one_file("links", 4);
    let all = lines(&path);
    let records: Vec<AuditRecord> = all
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records[0].prev.as_deref(), Some(GENESIS));
    for (i, record) in records.iter().enumerate() {
        // The sink adds the chain's fields to a line already serialised:
        // the line is the record's serialisation all the same.
        assert_eq!(serde_json::to_string(record).unwrap(), all[i]);
        assert_eq!(record.seq, Some(i as u64 + 1));
        if i > 0 {
            let before = format!("{}\n", all[i - 1]);
            assert_eq!(record.prev.as_deref(), Some(sha(&before).as_str()));
        }
    }
    let last = format!("{}\n", all[3]);
    assert_eq!(
        last_head(&path).unwrap(),
        Some(ChainHead::new(4, sha(&last)))
    );
}

#[test]
fn an_untouched_chain_verifies() {
    let path = one_file("untouched", 10);
    let report = verify_chain(&[&path]).unwrap();
    assert_eq!((report.files, report.records, report.unchained), (1, 10, 0));
    assert_eq!((report.first_seq, report.last.seq), (1, 10));
    assert_eq!(Some(report.last.clone()), last_head(&path).unwrap());
    assert!(
        report
            .to_string()
            .starts_with("the chain holds: 10 record(s), 1 to 10")
    );
}

#[test]
fn a_changed_record_is_named() {
    let path = one_file("changed", 10);
    edit(&path, 4);
    let broken = break_in(&[&path]);
    assert_eq!((broken.file.as_path(), broken.line), (path.as_path(), 4));
    assert_problem!(broken, Problem::Changed { .. });
    assert_says(&broken, ":4: the record was changed");
}

#[test]
fn a_changed_record_before_the_last_is_named_with_the_last() {
    // Nothing after the last record says which of the two changed.
    let path = one_file("changed-late", 10);
    edit(&path, 9);
    let broken = break_in(&[&path]);
    assert_eq!(broken.line, 10);
    assert_problem!(broken, Problem::PrevMismatch { .. });
}

#[test]
fn a_removed_record_is_named() {
    let path = one_file("removed", 10);
    remove(&path, 4);
    let broken = broken_at(&path, 4, Problem::Removed { from: 4, to: 4 });
    assert_says(&broken, "record 4 is missing");
}

#[test]
fn removed_first_records_are_named() {
    let path = one_file("removed-head", 10);
    remove(&path, 1);
    remove(&path, 1);
    broken_at(&path, 1, Problem::Removed { from: 1, to: 2 });
}

#[test]
fn an_inserted_copy_is_named() {
    let path = one_file("inserted-copy", 10);
    let third = lines(&path)[2].clone();
    insert(&path, 4, third);
    broken_at(&path, 4, Problem::Inserted { seq: 3 });
}

#[test]
fn an_inserted_record_that_links_is_named() {
    // A forger who knows the format: the right number, the right link.
    let path = one_file("inserted-forged", 10);
    let third = format!("{}\n", lines(&path)[2]);
    let mut forged = serde_json::to_value(record(99)).unwrap();
    forged["seq"] = 4.into();
    forged["prev"] = sha(&third).into();
    insert(&path, 4, forged.to_string());
    broken_at(&path, 4, Problem::Inserted { seq: 4 });
}

#[test]
fn an_inserted_record_without_links_is_named() {
    let path = one_file("inserted-bare", 10);
    insert(&path, 4, serde_json::to_string(&record(99)).unwrap());
    broken_at(&path, 4, Problem::Unchained);
}

#[test]
fn swapped_records_are_named() {
    let path = one_file("swapped", 10);
    swap(&path, 4);
    let broken = break_in(&[&path]);
    assert_eq!(broken.line, 4);
    let Problem::Reordered {
        expected,
        found,
        line,
        ..
    } = broken.problem
    else {
        panic!("{broken}");
    };
    assert_eq!((expected, found, line), (4, 5, 5));
}

#[test]
fn a_rotated_pair_verifies_and_each_half_continues_the_other() {
    let (first, second) = rotated_pair("pair");
    let report = verify_chain(&[&first, &second]).unwrap();
    assert_eq!((report.files, report.records, report.last.seq), (2, 10, 10));
    // The second alone, after the first's last hash.
    let head = last_head(&first).unwrap().unwrap();
    let alone = verify_chain_after(&head.hash, &[&second]).unwrap();
    assert_eq!((alone.records, alone.first_seq), (5, 6));
    // The second alone from the genesis: the first five are missing.
    let broken = break_in(&[&second]);
    assert_eq!((broken.file.as_path(), broken.line), (second.as_path(), 1));
    assert_eq!(broken.problem, Problem::Removed { from: 1, to: 5 });
    // In the wrong order.
    let broken = broken_pair(&second, &first);
    assert_eq!(broken.line, 1);
    // After another hash.
    let other = verify_chain_after(&sha("other"), &[&second]).unwrap_err();
    assert_eq!(other.line, 1);
    assert!(
        matches!(other.problem, Problem::WrongStart { .. }),
        "{other}"
    );
}

fn broken_pair(first: &Path, second: &Path) -> ChainBreak {
    break_in(&[first, second])
}

#[test]
fn a_changed_record_in_a_rotated_pair_is_named() {
    let (first, second) = rotated_pair("pair-changed");
    edit(&second, 2);
    let broken = broken_pair(&first, &second);
    assert_eq!((broken.file.as_path(), broken.line), (second.as_path(), 2));
    assert_problem!(broken, Problem::Changed { .. });

    // The last record of the first file: the second's first names it.
    let (first, second) = rotated_pair("pair-changed-last");
    edit(&first, 5);
    let broken = broken_pair(&first, &second);
    assert_eq!((broken.file.as_path(), broken.line), (first.as_path(), 5));
    assert_problem!(broken, Problem::Changed { .. });
}

#[test]
fn a_removed_record_in_a_rotated_pair_is_named() {
    let (first, second) = rotated_pair("pair-removed");
    remove(&second, 3);
    let broken = broken_pair(&first, &second);
    assert_eq!((broken.file.as_path(), broken.line), (second.as_path(), 3));
    assert_eq!(broken.problem, Problem::Removed { from: 8, to: 8 });

    // The last of the first file: missing before the second's first.
    let (first, second) = rotated_pair("pair-removed-last");
    remove(&first, 5);
    let broken = broken_pair(&first, &second);
    assert_eq!((broken.file.as_path(), broken.line), (second.as_path(), 1));
    assert_eq!(broken.problem, Problem::Removed { from: 5, to: 5 });
}

#[test]
fn an_inserted_record_in_a_rotated_pair_is_named() {
    let (first, second) = rotated_pair("pair-inserted");
    let copy = lines(&second)[1].clone();
    insert(&second, 3, copy);
    let broken = broken_pair(&first, &second);
    assert_eq!((broken.file.as_path(), broken.line), (second.as_path(), 3));
    assert_eq!(broken.problem, Problem::Inserted { seq: 7 });

    // At the head of the second file, a record of the first again.
    let (first, second) = rotated_pair("pair-inserted-head");
    let copy = lines(&first)[4].clone();
    insert(&second, 1, copy);
    let broken = broken_pair(&first, &second);
    assert_eq!((broken.file.as_path(), broken.line), (second.as_path(), 1));
    assert_eq!(broken.problem, Problem::Inserted { seq: 5 });
}

#[test]
fn swapped_records_in_a_rotated_pair_are_named() {
    let (first, second) = rotated_pair("pair-swapped");
    swap(&second, 2);
    let broken = broken_pair(&first, &second);
    assert_eq!((broken.file.as_path(), broken.line), (second.as_path(), 2));
    assert!(
        matches!(
            broken.problem,
            Problem::Reordered {
                expected: 7,
                found: 8,
                line: 3,
                ..
            }
        ),
        "{broken}"
    );

    // Across the files: the first's last and the second's first.
    let (first, second) = rotated_pair("pair-swapped-across");
    let (mut a, mut b) = (lines(&first), lines(&second));
    std::mem::swap(&mut a[4], &mut b[0]);
    put(&first, &a);
    put(&second, &b);
    let broken = broken_pair(&first, &second);
    assert_eq!((broken.file.as_path(), broken.line), (first.as_path(), 5));
    let Problem::Reordered { file, line, .. } = &broken.problem else {
        panic!("{broken}");
    };
    assert_eq!((file.as_path(), *line), (second.as_path(), 1));
}

#[test]
fn a_chain_continued_across_a_reopen_verifies() {
    let path = dir("reopen").join("audit.jsonl");
    let head = write(&path, None, 1, 3);
    assert_eq!(head.seq, 3);
    let head = write(&path, None, 4, 6);
    assert_eq!(head.seq, 6);
    // A file opened after a rotation, reopened after a restart.
    let next = path.with_extension("2.jsonl");
    write(&next, Some(&head), 7, 8);
    let head = write(&next, Some(&ChainHead::new(6, head.hash.clone())), 9, 9);
    assert_eq!(head.seq, 9);
    let report = verify_chain(&[&path, &next]).unwrap();
    assert_eq!((report.records, report.last), (9, head));
}

#[test]
fn a_file_of_another_chain_is_not_continued() {
    let (first, second) = rotated_pair("other-chain");
    let head = last_head(&second).unwrap().unwrap();
    let error = JsonLinesAudit::open_after(&first, &head).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(
        error.to_string().contains("does not continue the chain"),
        "{error}"
    );
}

#[test]
fn a_file_whose_last_line_is_cut_short_is_not_appended_to() {
    let path = one_file("cut-short", 3);
    let mut text = fs::read_to_string(&path).unwrap();
    text.truncate(text.len() - 10);
    fs::write(&path, &text).unwrap();
    let error = JsonLinesAudit::open(&path).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("without a newline"), "{error}");
    let broken = break_in(&[&path]);
    assert_eq!((broken.line, broken.problem), (3, Problem::Unterminated));
}

#[test]
fn concurrent_writers_in_one_process_keep_one_chain() {
    let path = dir("threads").join("audit.jsonl");
    let sink = Arc::new(JsonLinesAudit::open(&path).unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let sink = Arc::clone(&sink);
            std::thread::spawn(move || {
                for n in 0..50 {
                    sink.record(record(t * 100 + n));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let report = verify_chain(&[&path]).unwrap();
    assert_eq!(report.records, 200);
    assert_eq!(report.last, sink.head());
}

#[test]
fn records_written_before_the_chain_still_parse_and_precede_it() {
    let path = dir("legacy").join("audit.jsonl");
    let old: Vec<String> = (1..=2)
        .map(|n| serde_json::to_string(&record(n)).unwrap())
        .collect();
    assert!(!old[0].contains("prev"), "an old record: no chain fields");
    put(&path, &old);
    let parsed: AuditRecord = serde_json::from_str(&old[0]).unwrap();
    assert_eq!((parsed.seq, parsed.prev), (None, None));
    let head = write(&path, None, 3, 5);
    assert_eq!(head.seq, 5, "the old lines count");
    let report = verify_chain(&[&path]).unwrap();
    assert_eq!(
        (report.unchained, report.records, report.first_seq),
        (2, 3, 3)
    );
    assert!(
        report.to_string().contains("the first 2 line(s)"),
        "{report}"
    );
    // Only old lines: nothing is covered.
    let only_old = dir("legacy-only").join("audit.jsonl");
    put(&only_old, &old);
    let broken = break_in(&[&only_old]);
    assert_eq!((broken.line, broken.problem), (1, Problem::Unchained));
}

#[test]
fn a_bare_record_before_a_chain_from_the_genesis_is_named() {
    let path = one_file("bare-head", 3);
    insert(&path, 1, serde_json::to_string(&record(99)).unwrap());
    let broken = break_in(&[&path]);
    assert_eq!((broken.line, broken.problem), (1, Problem::Unchained));
}

#[test]
fn bad_input_is_named_by_its_line() {
    let path = one_file("not-json", 5);
    insert(&path, 3, "not json".to_owned());
    let broken = break_in(&[&path]);
    assert_eq!(broken.line, 3);
    assert_problem!(broken, Problem::NotARecord(_));

    let path = one_file("missing-field", 5);
    let mut all = lines(&path);
    let mut value: serde_json::Value = serde_json::from_str(&all[1]).unwrap();
    value.as_object_mut().unwrap().remove("tool");
    all[1] = value.to_string();
    put(&path, &all);
    let broken = break_in(&[&path]);
    assert_eq!(broken.line, 2);
    assert_says(&broken, "missing field `tool`");

    let path = one_file("blank", 5);
    insert(&path, 2, String::new());
    let broken = break_in(&[&path]);
    assert_eq!(broken.line, 2);
    assert_eq!(
        broken.problem,
        Problem::NotARecord("an empty line".to_owned())
    );

    let empty = dir("empty").join("audit.jsonl");
    fs::write(&empty, "").unwrap();
    let broken = break_in(&[&empty]);
    assert_eq!(
        (broken.line, broken.problem.clone()),
        (0, Problem::EmptyFile)
    );
    assert!(
        broken
            .to_string()
            .ends_with("the file is empty: no record to verify")
    );

    let missing = dir("missing").join("nothing.jsonl");
    let broken = break_in(&[&missing]);
    assert_problem!(broken, Problem::Unreadable(_));

    let none: [&Path; 0] = [];
    assert!(verify_chain(&none).is_err());
}

#[test]
fn a_new_file_starts_from_the_head_it_continues() {
    let path = dir("empty-after").join("audit.jsonl");
    fs::write(&path, "").unwrap();
    let after = ChainHead::new(41, sha("before"));
    let head = write(&path, Some(&after), 42, 42);
    assert_eq!(head.seq, 42);
    let record: AuditRecord = serde_json::from_str(&lines(&path)[0]).unwrap();
    assert_eq!(record.prev, Some(after.hash.clone()));
    let report = verify_chain_after(&after.hash, &[&path]).unwrap();
    assert_eq!((report.first_seq, report.records), (42, 1));
}

#[test]
fn the_largest_number_is_a_break_not_a_panic() {
    let path = dir("largest").join("audit.jsonl");
    let after = ChainHead::new(u64::MAX - 1, sha("before"));
    // The sink saturates; the verifier names the record no other can follow.
    let head = write(&path, Some(&after), 1, 2);
    assert_eq!(head.seq, u64::MAX);
    let broken = verify_chain_after(&after.hash, &[&path]).unwrap_err();
    assert_eq!(broken.line, 1);
    assert_says(&broken, "no record can follow");
}

/// What a proptest case does to a chain of `n` records.
#[derive(Clone, Debug)]
enum Tamper {
    Edit(usize),
    Remove(usize),
    Swap(usize),
    Duplicate(usize),
}

fn tamper() -> impl Strategy<Value = (u64, Tamper)> {
    (3u64..14).prop_flat_map(|n| {
        let k = 1..=n as usize;
        let op = prop_oneof![
            k.clone().prop_map(Tamper::Edit),
            k.clone().prop_map(Tamper::Remove),
            (1..n as usize).prop_map(Tamper::Swap),
            k.prop_map(Tamper::Duplicate),
        ];
        (Just(n), op)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any single edit, removal, swap or duplicate is found at its line,
    /// except at the tail, which only a copy of the last hash kept
    /// elsewhere protects: the last record edited or removed.
    #[test]
    fn any_single_tampering_is_found_where_it_was_done((n, tamper) in tamper()) {
        let path = one_file("prop", n);
        let n = n as usize;
        let (due, tail) = match tamper {
            Tamper::Edit(k) => {
                edit(&path, k);
                // The last but one: named with the last, which names it.
                (if k + 1 == n { n } else { k }, k == n)
            }
            Tamper::Remove(k) => {
                remove(&path, k);
                (k, k == n)
            }
            Tamper::Swap(k) => {
                swap(&path, k);
                (k, false)
            }
            Tamper::Duplicate(k) => {
                let copy = lines(&path)[k - 1].clone();
                insert(&path, k + 1, copy);
                (k + 1, false)
            }
        };
        match verify_chain(&[&path]) {
            Ok(report) => {
                prop_assert!(tail, "{tamper:?} of {n} went unseen: {report}");
                prop_assert!(report.records < n as u64 || matches!(tamper, Tamper::Edit(_)));
            }
            Err(broken) => {
                prop_assert!(!tail, "a tail tampering breaks nothing: {broken}");
                prop_assert_eq!(broken.line, due as u64, "{:?} of {}: {}", tamper, n, broken);
            }
        }
    }
}
