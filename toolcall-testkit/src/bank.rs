//! One bank: an account and counters of what the backend really did, so
//! that a test can say "the backend saw exactly N transfers", never only
//! what the answers claimed.
//!
//! Its tools: [`balance`] (a read), [`transfer`] (a high-risk side effect),
//! [`send`] (a slow side effect, for races) and [`note`] (a low-risk side
//! effect). A test adds its own tools over
//! `Ctx<Bank>` where it needs another shape, each counting what reached
//! the bank under a name of its own ([`Bank::saw`], [`Bank::seen`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolcall::{Ctx, Rejection, ToolError, tool};

/// What a fresh account holds, in cents.
pub const OPENING_BALANCE_CENTS: i64 = 100_000;

/// What the next side effect does while it runs (a test's fault: cut the
/// store's connection, say).
pub type Hook = Box<dyn FnOnce() + Send>;

/// A bank account with counters of the transfers and notes really made.
pub struct Bank {
    /// The balance, in cents; each transfer takes its amount off.
    pub balance_cents: AtomicI64,
    /// Transfers the backend really made (lost answers included).
    pub transfers: AtomicU64,
    /// What each transfer really sent, in order: to whom, how much.
    pub sent: Mutex<Vec<(String, i64)>>,
    /// Notes the backend really wrote.
    pub notes: AtomicU64,
    /// The next transfer goes through and its answer is lost (a transient
    /// error after the side effect).
    pub lose: AtomicBool,
    /// Run by the next [`send`], while it runs.
    pub during_next_send: Mutex<Option<Hook>>,
    /// What a test's own tools counted, by name ([`Bank::saw`]).
    counted: Mutex<BTreeMap<&'static str, u64>>,
}

impl fmt::Debug for Bank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bank")
            .field("balance_cents", &self.balance_cents)
            .field("transfers", &self.transfers)
            .field("sent", &self.sent)
            .field("notes", &self.notes)
            .field("lose", &self.lose)
            .field("counted", &self.counted)
            .finish_non_exhaustive()
    }
}

impl Default for Bank {
    fn default() -> Self {
        Bank {
            balance_cents: AtomicI64::new(OPENING_BALANCE_CENTS),
            transfers: AtomicU64::new(0),
            sent: Mutex::new(Vec::new()),
            notes: AtomicU64::new(0),
            lose: AtomicBool::new(false),
            during_next_send: Mutex::new(None),
            counted: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Bank {
    /// A fresh account of [`OPENING_BALANCE_CENTS`], nothing done yet.
    pub fn new() -> Arc<Bank> {
        Arc::default()
    }

    /// The transfers really made.
    pub fn transfers(&self) -> u64 {
        self.transfers.load(Ordering::SeqCst)
    }

    /// The notes really written.
    pub fn notes(&self) -> u64 {
        self.notes.load(Ordering::SeqCst)
    }

    /// The balance, in cents.
    pub fn balance(&self) -> i64 {
        self.balance_cents.load(Ordering::SeqCst)
    }

    /// Counts one more `what` reaching the bank (a test's own tool: a
    /// status read, a wire) and returns the new count.
    pub fn saw(&self, what: &'static str) -> u64 {
        let mut counted = self.counted.lock().unwrap();
        let count = counted.entry(what).or_default();
        *count += 1;
        *count
    }

    /// How many `what` reached the bank ([`Bank::saw`]); 0 if none did.
    pub fn seen(&self, what: &str) -> u64 {
        self.counted.lock().unwrap().get(what).copied().unwrap_or(0)
    }
}

/// Read the balance and the number of transfers made. No side effects.
#[tool]
pub fn balance(ctx: &Ctx<Bank>) -> Result<Value, Rejection> {
    Ok(json!({
        "balance_cents": ctx.state.balance(),
        "transfers": ctx.state.transfers(),
    }))
}

/// Send money to another account. Amount in cents.
#[tool(side_effect, high_risk)]
pub fn transfer(
    ctx: &Ctx<Bank>,
    /// The receiving account, for example ACC-7.
    to: String,
    /// Amount in minor units (cents). 25.90 is 2590.
    #[arg(min = 1)]
    amount_cents: i64,
) -> Result<Value, ToolError> {
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    ctx.state
        .sent
        .lock()
        .unwrap()
        .push((to.clone(), amount_cents));
    let left = ctx
        .state
        .balance_cents
        .fetch_sub(amount_cents, Ordering::SeqCst)
        - amount_cents;
    if ctx.state.lose.swap(false, Ordering::SeqCst) {
        return Err(ToolError::transient("the bank's answer was lost"));
    }
    Ok(json!({"to": to, "amount_cents": amount_cents, "balance_cents": left}))
}

/// Sends money.
///
/// Slowly (60 ms), and without deduplicating: a race of identical calls
/// that the pipeline lets through runs it more than once, and
/// [`Bank::transfers`] says so. `run` in its answer is its count.
#[tool(side_effect)]
pub async fn send(
    ctx: &Ctx<Bank>,
    /// The amount, in cents.
    cents: i64,
) -> Result<Value, Rejection> {
    let run = ctx.state.transfers.fetch_add(1, Ordering::SeqCst) + 1;
    let hook = ctx.state.during_next_send.lock().unwrap().take();
    if let Some(hook) = hook {
        hook();
    }
    tokio::time::sleep(Duration::from_millis(60)).await;
    Ok(json!({"cents": cents, "run": run}))
}

/// Add a note to the account, for the support team.
#[tool(side_effect)]
pub fn note(
    ctx: &Ctx<Bank>,
    /// The note, in plain words.
    text: String,
) -> Result<Value, Rejection> {
    ctx.state.notes.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"noted": text}))
}
