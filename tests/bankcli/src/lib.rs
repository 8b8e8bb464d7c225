//! A small bank behind toolcall's pipeline, with no command line of its
//! own: [`app`] is `toolcall_cli::App` over the bank's tools and policy.
//!
//! Two tools for tellers (a balance, read-only, and a high-risk transfer
//! in integer cents with a business check) and one for the back office
//! (closing an account) that the code allows no caller of the command
//! line. Two callers: the default one (the head office, transfers up to
//! 1,000.00) and `branch` (up to 200.00).
//!
//! The ledger of applied transfers is a file of JSON lines, the one
//! `BANK_LEDGER` names (several processes share it; a real bank would keep
//! it in its database), or this process's memory without it. Balances are
//! the opening balances moved by the ledger.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolcall::{Caller, Ctx, Policy, Registry, Rejection, ToolError, tool, tools};

/// The accounts and their opening balances, in cents.
const OPENING: [(&str, i64); 3] = [("ACC-1", 250_000), ("ACC-2", 10_000), ("ACC-3", 0)];

/// The limit on one transfer's amount (`#[arg(limit = ...)]`).
pub const MAX_TRANSFER: &str = "max_transfer_cents";

/// The bank: the ledger of applied transfers.
#[derive(Debug, Default)]
pub struct Bank {
    /// The ledger file; `None` keeps it in `memory`.
    file: Option<PathBuf>,
    memory: Mutex<Vec<Value>>,
}

impl Bank {
    /// The bank whose ledger is the file `BANK_LEDGER` names, or in memory.
    pub fn from_env() -> Self {
        Bank {
            file: std::env::var_os("BANK_LEDGER").map(PathBuf::from),
            memory: Mutex::default(),
        }
    }

    /// The applied transfers, oldest first.
    pub fn ledger(&self) -> Result<Vec<Value>, String> {
        let Some(path) = &self.file else {
            return Ok(self.memory.lock().map_err(|e| e.to_string())?.clone());
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
        };
        text.lines()
            .map(|line| serde_json::from_str(line).map_err(|e| e.to_string()))
            .collect()
    }

    fn apply(&self, entry: Value) -> Result<(), String> {
        let Some(path) = &self.file else {
            self.memory.lock().map_err(|e| e.to_string())?.push(entry);
            return Ok(());
        };
        // One write of one line, appended: processes sharing the file do
        // not interleave their lines.
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(format!("{entry}\n").as_bytes()))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The account's balance, in cents; `None` for an unknown account.
    pub fn balance(&self, account: &str) -> Result<Option<i64>, String> {
        let Some((_, opening)) = OPENING.iter().find(|(id, _)| *id == account) else {
            return Ok(None);
        };
        let moved: i64 = self
            .ledger()?
            .iter()
            .map(|entry| {
                let amount = entry["amount_cents"].as_i64().unwrap_or(0);
                if entry["to"] == account {
                    amount
                } else if entry["from"] == account {
                    -amount
                } else {
                    0
                }
            })
            .sum();
        Ok(Some(opening + moved))
    }
}

/// The balance of an account, in cents. No side effects.
#[tool]
pub fn get_balance(
    ctx: &Ctx<Bank>,
    /// The account, for example ACC-1.
    #[arg(pattern = "^ACC-[0-9]+$")]
    account: String,
) -> Result<Value, ToolError> {
    match ctx.state.balance(&account).map_err(ToolError::transient)? {
        Some(balance) => Ok(json!({"account": account, "balance_cents": balance})),
        None => Err(unknown_account(&account).into()),
    }
}

/// Move money from one account to another. Amount in integer cents: 25.90 is 2590.
#[tool(side_effect, high_risk, check = check_transfer)]
pub fn transfer_money(
    ctx: &Ctx<Bank>,
    /// The account the money leaves, for example ACC-1.
    #[arg(pattern = "^ACC-[0-9]+$")]
    from: String,
    /// The account the money goes to.
    #[arg(pattern = "^ACC-[0-9]+$")]
    to: String,
    /// The amount in cents.
    #[arg(min = 1, limit = "max_transfer_cents")]
    amount_cents: i64,
) -> Result<Value, ToolError> {
    let entry = json!({
        "from": from,
        "to": to,
        "amount_cents": amount_cents,
        "key": &*ctx.idempotency_key,
    });
    ctx.state.apply(entry).map_err(ToolError::internal)?;
    Ok(json!({"from": from, "to": to, "moved_cents": amount_cents}))
}

/// The business rules of a transfer: two different, existing accounts,
/// and no more than the source holds.
pub fn check_transfer(args: &TransferMoneyArgs, ctx: &Ctx<Bank>) -> Result<(), Rejection> {
    if args.from == args.to {
        return Err(Rejection::new(
            "SAME_ACCOUNT",
            "The two accounts are the same. Ask which account receives the money.",
        ));
    }
    let balance = |account: &str| -> Result<i64, Rejection> {
        match ctx.state.balance(account) {
            Ok(Some(balance)) => Ok(balance),
            Ok(None) => Err(unknown_account(account)),
            Err(error) => Err(Rejection::new("LEDGER_UNAVAILABLE", error)),
        }
    };
    let available = balance(&args.from)?;
    balance(&args.to)?;
    if args.amount_cents > available {
        return Err(Rejection::new(
            "INSUFFICIENT_FUNDS",
            format!(
                "{} holds {available} cents, less than {}.",
                args.from, args.amount_cents
            ),
        ));
    }
    Ok(())
}

/// Close an account. The back office's tool: no caller of the command
/// line may use it.
#[tool(side_effect, high_risk)]
pub fn close_account(
    /// The account, for example ACC-3.
    #[arg(pattern = "^ACC-[0-9]+$")]
    account: String,
) -> Result<Value, Rejection> {
    Err(Rejection::new(
        "BACK_OFFICE_ONLY",
        format!("{account} can be closed by the back office only."),
    ))
}

fn unknown_account(account: &str) -> Rejection {
    Rejection::new(
        "ACCOUNT_NOT_FOUND",
        format!("{account} is no account of this bank. Ask for the account id."),
    )
}

/// The bank's tools.
pub fn registry() -> Registry {
    tools![get_balance, transfer_money, close_account].expect("the bank's tools are distinct")
}

/// The default caller's policy: balances, and transfers up to 1,000.00.
pub fn head_office() -> Policy {
    Policy::new()
        .allow(["get_balance", "transfer_money"])
        .limit(MAX_TRANSFER, 100_000)
}

/// The `branch` caller: balances, and transfers up to 200.00.
pub fn branch() -> Caller {
    Caller::new(
        "branch",
        Policy::new()
            .allow(["get_balance", "transfer_money"])
            .limit(MAX_TRANSFER, 20_000),
    )
}

/// The bank's whole command line: its tools, its policy (the ceiling of
/// what `--allow` and `--limit` may narrow) and its callers.
pub fn app(bank: Bank) -> toolcall_cli::App<Bank> {
    toolcall_cli::App::new("bankcli", registry(), Arc::new(bank))
        .version(env!("CARGO_PKG_VERSION"))
        .policy(head_office())
        .callers([branch()])
}
