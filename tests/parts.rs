//! Parts of the state (`DispatcherBuilder::part`): a tool holds only the
//! backend its `&Ctx<...>` names. One registry mixes tools on the state and
//! on its parts; a part the dispatcher was not given is refused at build,
//! with the fix; checks and reconcile functions find parts as tools do.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolcall::{
    BuildError, Call, Code, Ctx, Dispatcher, Rejection, ToolError, ToolResult, tool, tools,
};

/// The application: a ledger, read through one handle and written through
/// another.
struct Shop {
    ledger: Arc<Ledger>,
    name: String,
}

#[derive(Default)]
struct Ledger {
    balance: AtomicU32,
    reconciled: AtomicU32,
}

/// What read-only tools hold: reads, nothing else.
struct Reader(Arc<Ledger>);

impl Reader {
    fn balance(&self) -> u32 {
        self.0.balance.load(Ordering::SeqCst)
    }
}

/// What writing tools hold.
struct Writer(Arc<Ledger>);

/// A part nobody registers.
struct Auditor;

fn shop() -> Arc<Shop> {
    Arc::new(Shop {
        ledger: Arc::default(),
        name: "corner shop".into(),
    })
}

/// Reads the balance.
#[tool]
fn balance(ctx: &Ctx<Reader>) -> Result<Value, Rejection> {
    Ok(json!({"balance": ctx.state.balance()}))
}

/// Adds to the balance.
#[tool(side_effect, check = check_deposit, reconcile = find_deposit)]
async fn deposit(
    ctx: &Ctx<Writer>,
    /// Amount.
    amount: u32,
) -> Result<Value, ToolError> {
    let after = ctx.state.0.balance.fetch_add(amount, Ordering::SeqCst) + amount;
    if amount == LOST {
        return Err(ToolError::transient("the answer was lost"));
    }
    Ok(json!({"balance": after}))
}

/// The check of a tool on a part takes that part (as a tool's check takes
/// the tool's context).
fn check_deposit(args: &DepositArgs, ctx: &Ctx<Writer>) -> Result<(), Rejection> {
    if u64::from(ctx.state.0.balance.load(Ordering::SeqCst)) + u64::from(args.amount) > 100 {
        return Err(Rejection::new("OVER_CAP", "the balance would pass 100"));
    }
    Ok(())
}

/// The deposit whose answer is lost after it took effect.
const LOST: u32 = 7;

/// Whether a lost deposit took effect, asked of the writer's ledger.
async fn find_deposit(ctx: &Ctx<Writer>, _key: &str) -> Result<Option<Value>, ToolError> {
    ctx.state.0.reconciled.fetch_add(1, Ordering::SeqCst);
    let balance = ctx.state.0.balance.load(Ordering::SeqCst);
    Ok((balance > 0).then(|| json!({"balance": balance})))
}

/// Says whether the ledger is empty; a tool without a context whose check
/// reads through the reader.
#[tool(check = check_empty)]
fn empty() -> Result<Value, Rejection> {
    Ok(json!({"empty": true}))
}

fn check_empty(_: &EmptyArgs, ctx: &Ctx<Reader>) -> Result<(), Rejection> {
    match ctx.state.balance() {
        0 => Ok(()),
        _ => Err(Rejection::new("NOT_EMPTY", "the ledger holds money")),
    }
}

/// Names the shop: a tool on the whole state, beside tools on its parts.
#[tool]
fn shop_name(ctx: &Ctx<Shop>) -> Result<String, Rejection> {
    Ok(ctx.state.name.clone())
}

/// Audits, with a part no dispatcher here is given.
#[tool]
fn audit(_ctx: &Ctx<Auditor>) -> Result<Value, Rejection> {
    Ok(json!({}))
}

/// A tool on the state whose check wants a part.
#[tool(check = check_with_auditor)]
fn guarded() -> Result<Value, Rejection> {
    Ok(json!({}))
}

fn check_with_auditor(_: &GuardedArgs, _: &Ctx<Auditor>) -> Result<(), Rejection> {
    Ok(())
}

/// A side effect whose reconcile wants a part.
#[tool(side_effect, reconcile = reconcile_with_auditor)]
async fn audited_write() -> Result<Value, Rejection> {
    Ok(json!({}))
}

async fn reconcile_with_auditor(_: &Ctx<Auditor>, _: &str) -> Result<Option<Value>, ToolError> {
    Ok(None)
}

fn with_parts(registry: toolcall::Registry) -> toolcall::DispatcherBuilder<Shop> {
    Dispatcher::builder(registry, shop())
        .part(|shop: &Shop| Reader(Arc::clone(&shop.ledger)))
        .part(|shop: &Shop| Writer(Arc::clone(&shop.ledger)))
}

/// A deposit of `amount` in the session `s`, as the agent asks for one.
async fn deposit_of(d: &Dispatcher<Shop>, amount: u32) -> ToolResult {
    let arguments = json!({ "amount": amount }).to_string();
    d.execute(Call::new("deposit", &arguments).session("s"))
        .await
}

#[tokio::test]
async fn tools_on_different_parts_of_one_state_share_a_registry() {
    let d = with_parts(tools![balance, deposit, shop_name].unwrap())
        .build()
        .unwrap();
    let deposited = deposit_of(&d, 30).await;
    assert!(deposited.ok, "{deposited:?}");
    let read = d.execute(Call::new("balance", "{}").session("s")).await;
    assert!(read.ok, "{read:?}");
    assert_eq!(read.data["balance"], 30);
    let named = d.execute(Call::new("shop_name", "{}").session("s")).await;
    assert_eq!(named.data["result"], "corner shop", "{named:?}");
    // The parts are views of the state the dispatcher holds.
    assert_eq!(d.state().ledger.balance.load(Ordering::SeqCst), 30);
}

#[tokio::test]
async fn a_check_on_a_part_runs_against_that_part() {
    let d = with_parts(tools![balance, deposit, empty].unwrap())
        .build()
        .unwrap();
    let empty = d.execute(Call::new("empty", "{}").session("s")).await;
    assert!(empty.ok, "{empty:?}");
    let first = deposit_of(&d, 90).await;
    assert!(first.ok, "{first:?}");
    let over = deposit_of(&d, 20).await;
    assert!(!over.ok);
    assert_eq!(over.code, Code::new("OVER_CAP"), "{over:?}");
    assert_eq!(d.state().ledger.balance.load(Ordering::SeqCst), 90);
    let full = d.execute(Call::new("empty", "{}").session("s")).await;
    assert_eq!(full.code, Code::new("NOT_EMPTY"), "{full:?}");
}

#[tokio::test]
async fn a_reconcile_function_on_a_part_is_asked() {
    let d = with_parts(tools![deposit].unwrap())
        .max_retries(0)
        .build()
        .unwrap();
    let lost = deposit_of(&d, 7).await;
    assert!(lost.ok, "the reader found the deposit: {lost:?}");
    assert_eq!(lost.data["balance"], 7);
    assert_eq!(d.state().ledger.reconciled.load(Ordering::SeqCst), 1);
    assert_eq!(d.state().ledger.balance.load(Ordering::SeqCst), 7);
}

/// `registry`'s dispatcher, refused (`why`) for a part it was not given:
/// whichever function wants the part, the refusal names the fix.
fn refused_for_a_missing_part(registry: toolcall::Registry, why: &str) -> BuildError {
    let error = with_parts(registry).build().expect_err(why);
    let sentence = error.to_string();
    assert!(sentence.contains("DispatcherBuilder::part("), "{sentence}");
    error
}

#[test]
fn a_part_the_dispatcher_was_not_given_is_refused_with_the_fix() {
    let error =
        refused_for_a_missing_part(tools![balance, audit].unwrap(), "no part is an Auditor");
    assert!(
        matches!(&error, BuildError::StateMismatch { tool: "audit", expected, .. } if expected.ends_with("Auditor")),
        "{error:#?}"
    );
    assert!(error.to_string().contains("Auditor"), "{error}");

    let error = refused_for_a_missing_part(tools![guarded].unwrap(), "the check's part is missing");
    assert!(
        matches!(
            &error,
            BuildError::CheckStateMismatch {
                tool: "guarded",
                ..
            }
        ),
        "{error:#?}"
    );

    let error = refused_for_a_missing_part(
        tools![audited_write].unwrap(),
        "the reconcile's part is missing",
    );
    assert!(
        matches!(
            &error,
            BuildError::ReconcileStateMismatch {
                tool: "audited_write",
                ..
            }
        ),
        "{error:#?}"
    );
}

#[test]
fn a_tool_on_a_part_without_parts_is_refused() {
    let error = Dispatcher::builder(tools![balance].unwrap(), shop())
        .build()
        .expect_err("no part at all");
    assert!(
        matches!(
            &error,
            BuildError::StateMismatch {
                tool: "balance",
                ..
            }
        ),
        "{error:#?}"
    );
}

#[test]
fn two_parts_of_one_type_are_refused() {
    let error = with_parts(tools![balance].unwrap())
        .part(|_: &Shop| Reader(Arc::new(Ledger::default())))
        .build()
        .expect_err("which reader would a tool get?");
    assert!(
        matches!(&error, BuildError::DuplicatePart { part } if part.ends_with("Reader")),
        "{error:#?}"
    );
    let error = with_parts(tools![balance].unwrap())
        .part(|shop: &Shop| Shop {
            ledger: Arc::clone(&shop.ledger),
            name: "another".into(),
        })
        .build()
        .expect_err("a part of the state's own type is never reached");
    assert!(
        matches!(&error, BuildError::DuplicatePart { .. }),
        "{error:#?}"
    );
}
