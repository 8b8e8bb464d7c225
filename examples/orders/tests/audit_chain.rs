//! `orders report --verify`: the audit's hash chain checked by the binary,
//! its exit code and what it prints.

use std::process::{Command, Output};

use serde_json::json;
use toolcall_testkit::run;

fn orders(args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orders"));
    run::spawn_fed(command.args(args), stdin)
        .wait_with_output()
        .unwrap()
}

fn scratch(name: &str) -> std::path::PathBuf {
    run::fresh_dir(&format!("orders-{name}"))
}

#[test]
fn report_verify_holds_then_names_the_removed_record_with_exit_code_1() {
    let dir = scratch("verify");
    let audit = dir.join("audit.jsonl");
    let path = audit.to_str().unwrap();
    let calls: String = ["ORD-1001", "ORD-1002", "ORD-1003", "ORD-1004"]
        .iter()
        .map(|id| {
            format!(
                "{}\n",
                json!({"tool": "get_order", "arguments": {"order_id": id}})
            )
        })
        .collect();
    let replayed = orders(&["replay", "-", "--audit", path], &calls);
    assert!(
        replayed.status.success(),
        "{}",
        String::from_utf8_lossy(&replayed.stderr)
    );

    let held = orders(&["report", "--verify", path], "");
    let stdout = String::from_utf8(held.stdout).unwrap();
    assert_eq!(
        held.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&held.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("the chain holds: 4 record(s), 1 to 4, in 1 file(s); last hash "));

    let log = std::fs::read_to_string(&audit).unwrap();
    let kept: Vec<&str> = log
        .lines()
        .filter(|line| !line.contains("ORD-1002"))
        .collect();
    std::fs::write(&audit, kept.join("\n") + "\n").unwrap();
    let broken = orders(&["report", "--verify", path], "");
    assert_eq!(broken.status.code(), Some(1));
    assert!(broken.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(
        stderr.contains(&format!("{path}:2: record 2 is missing before this one")),
        "{stderr}"
    );
}
