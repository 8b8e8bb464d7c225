//! The `orders` binary as a user runs it: the demo, and `replay` over a file
//! of calls, compared line by line with what the reference answers.

#[path = "../support/fresh_database.rs"]
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

/// A scratch directory of this test process, emptied first.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("orders-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ------------------------------------------- promises under stress

fn read_order() -> Value {
    json!({"tool": "get_order", "arguments": "{\"order_id\": \"ORD-1001\"}"})
}

mod contract;
mod processes;
mod promises;
mod replays;
