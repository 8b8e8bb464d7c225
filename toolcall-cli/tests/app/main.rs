//! `App`: the whole command line of an application that has none, driven
//! in-process, with the backend's side effects counted.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use toolcall::{AuditRecord, Caller, Ctx, Policy, Rejection, tool, tools};

use toolcall_cli::{App, Error};

// The backend: counts the transfers it applied. This application's own
// tools over it (no recipient, no question asked) stay here.
use toolcall_testkit::bank::Bank;

use toolcall_testkit::contract::locked_tool;

/// Moves money between two accounts.
#[tool(side_effect)]
fn transfer(
    ctx: &Ctx<Bank>,
    /// Amount in cents.
    #[arg(min = 1)]
    amount_cents: i64,
) -> Result<Value, Rejection> {
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"moved_cents": amount_cents}))
}

/// The balance of the account, in cents.
#[tool]
fn balance(ctx: &Ctx<Bank>) -> Result<Value, Rejection> {
    Ok(json!({"transfers": ctx.state.transfers.load(Ordering::SeqCst)}))
}

fn app(bank: &Arc<Bank>) -> App<Bank> {
    App::new("bank", tools![transfer, balance].unwrap(), Arc::clone(bank)).version("2.4.1")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolcall-cli-app-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fresh bank, and the scratch folder `name` for its files.
fn bank_in(name: &str) -> (Arc<Bank>, PathBuf) {
    (Arc::new(Bank::default()), scratch(name))
}

fn run(bank: &Arc<Bank>, args: &[&str]) -> Result<(), Error> {
    app(bank).run_from(std::iter::once("bank").chain(args.iter().copied()))
}

/// `replay` of `calls` with `flags`, auditing to `audit`: it succeeds.
fn replay(bank: &Arc<Bank>, calls: &Path, audit: &Path, flags: &[&str]) {
    let mut args = vec!["replay", calls.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.extend(["--audit", audit.to_str().unwrap()]);
    run(bank, &args).unwrap();
}

/// A replay file of one call: a transfer of one cent.
const ONE_CENT: &str = "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 1}}\n";

/// A replay file of two calls: transfers of one cent, then of two.
const TWO_TRANSFERS: &str = "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 1}}\n\
     {\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 2}}\n";

/// Writes `calls.jsonl` into `dir` for `replay`; returns it and the path
/// its audit goes to.
fn replay_files(dir: &Path, calls: impl AsRef<[u8]>) -> (PathBuf, PathBuf) {
    let file = dir.join("calls.jsonl");
    std::fs::write(&file, calls).unwrap();
    (file, dir.join("audit.jsonl"))
}

/// The audit records in this file, in order.
fn audit_records(audit: &Path) -> Vec<AuditRecord> {
    std::fs::read_to_string(audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The codes of the audit records in this file.
fn audited_codes(audit: &Path) -> Vec<String> {
    audit_records(audit)
        .iter()
        .map(|r| r.code.as_str().to_owned())
        .collect()
}

mod allowlists;
mod commands;
mod from_store;
mod settings;
