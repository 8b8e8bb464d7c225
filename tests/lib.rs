//! What the integration tests share: a tool that uses every attribute
//! `#[tool]` offers (for the macro tests and the schema/validator
//! agreement), and the conformance suite every `Store` must pass.

use serde_json::json;

use toolcall::store::{
    ApprovalDecision, ApprovalLookup, ApprovalResult, ApprovalUse, AskApproval, Binding, Claim,
    ControlsChange, ControlsWrite, DecideOutcome, DecisionWrite, Exposure, Key, Lease, LockAsk,
    OpenBounds, PendingApproval, PendingCursor, PendingOrder, PendingQuery, QuestionLease,
    RateWindow, RecordedOutcome, SignOutcome, Signature, SignatureWrite, Store, StoredControls,
    TaintHit, TaintSource, TakeApproval, UntrustedText, now_ms,
};

use toolcall::{Rejection, ToolResult, tool};

/// One line of an order.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Line {
    /// The product.
    pub sku: String,
    /// How many.
    pub quantity: u32,
}

/// Places an order.
#[tool(side_effect, name = "place_order", version = 2)]
pub fn place(
    /// Customer email.
    #[arg(format = "email", sensitive)]
    email: String,
    /// Delivery day.
    #[arg(format = "date")]
    deliver_on: String,
    /// The lines.
    #[arg(min_items = 1, max_items = 3)]
    lines: Vec<Line>,
    /// Discount in percent, strictly between 0 and 100.
    #[arg(exclusive_min = 0, exclusive_max = 100)]
    discount: Option<f64>,
    /// The client's request id.
    #[arg(format = "uuid", rename = "requestId")]
    request_id: String,
    /// A note for the courier.
    #[arg(min_length = 2, max_length = 5)]
    note: Option<String>,
) -> Result<serde_json::Value, Rejection> {
    let _ = (email, deliver_on, discount, request_id, note);
    Ok(json!({"lines": lines.len()}))
}

pub mod faulty;

// ------------------------------------------------ the Store conformance suite

/// The store's key for a test's `name` (of a call or a resource).
pub fn key(name: &str) -> Key {
    Key::sha256(name)
}

fn result(n: i64) -> ToolResult {
    ToolResult::success("pay", json!({"n": n}).as_object().unwrap().clone())
}

/// The testkit's question, made at step 3 of a call whose arguments'
/// digest is [`BOUND`]'s, waiting until `expires_ms`.
fn approval(id: &str, expires_ms: u64) -> PendingApproval {
    PendingApproval {
        digest: "d1".into(),
        step: 3,
        expires_ms,
        ..toolcall_testkit::store::asked(id)
    }
}

const BOUND: Binding<'static> = Binding {
    session: "s",
    caller: "c",
    tool: Some("pay"),
    digest: Some("d1"),
    requester: toolcall::store::Requester::Anyone,
};

/// A lease of a second from `now_ms`: most of the suite's claims.
fn a_second_from(now_ms: u64) -> Lease {
    Lease {
        now_ms,
        lease_ms: 1_000,
    }
}

/// A lease of a minute from `now_ms`: a claim that outlives its test.
fn a_minute_from(now_ms: u64) -> Lease {
    Lease {
        now_ms,
        lease_ms: 60_000,
    }
}

/// The call [`BOUND`] names, made in `session`.
fn bound_in(session: &str) -> Binding<'_> {
    Binding { session, ..BOUND }
}

/// The use of the approval `id` by the call `binding` names, at `now_ms`.
fn using<'a>(id: &'a str, binding: &'a Binding<'a>, now_ms: u64) -> ApprovalUse<'a> {
    ApprovalUse {
        id,
        binding,
        now_ms,
    }
}

/// The use of the approval `id` by the call [`BOUND`] names, at `now_ms`.
fn bound_use(id: &str, now_ms: u64) -> ApprovalUse<'_> {
    using(id, &BOUND, now_ms)
}

/// `approval`, put in `store` as it is.
async fn put(store: &impl Store, approval: &PendingApproval) {
    store.put_approval(approval).await.unwrap();
}

/// `store`'s answer to a person's decision.
async fn decides(store: &impl Store, deciding: &DecisionWrite<'_>) -> DecideOutcome {
    store.decide_approval(deciding).await.unwrap()
}

/// `store`'s answer to a call's use of its approval.
async fn takes(store: &impl Store, using: &ApprovalUse<'_>) -> TakeApproval {
    store.take_approval(using).await.unwrap()
}

/// `session`'s mark of untrusted output read from `source`, with no
/// fingerprints.
fn marked<'a>(session: &'a str, source: &'a TaintSource) -> Exposure<'a> {
    Exposure {
        session,
        fingerprints: &[],
        source,
    }
}

/// The source of a taint read at `at_ms`: a note of 100 000 characters,
/// which no store keeps whole.
pub fn source(at_ms: u64) -> TaintSource {
    let note = format!("{at_ms}: {}", "é".repeat(100_000));
    TaintSource::from_output(
        "read_note",
        Some(&format!("call-{at_ms}")),
        at_ms,
        &json!({"note": note, "stars": 1}),
        &["/note"],
    )
}

/// A decision by `by`, at `decided_ms`.
pub fn decision(approved: bool, by: &str, decided_ms: u64) -> ApprovalDecision {
    ApprovalDecision {
        approved,
        by: by.to_owned(),
        note: format!("{by} says {approved}"),
        edited_arguments: None,
        decided_ms,
        lasts_until_ms: None,
    }
}

/// The decisions `decision` on approvals, each by the approval's id and
/// the time it is made.
fn deciding<'a>(decision: &'a ApprovalDecision) -> impl Fn(&'a str, u64) -> DecisionWrite<'a> {
    move |id, now_ms| DecisionWrite {
        id,
        decision,
        now_ms,
    }
}

/// `decision` on the approval `id`, made now: what a person's click
/// hands the store.
pub fn deciding_now<'a>(id: &'a str, decision: &'a ApprovalDecision) -> DecisionWrite<'a> {
    DecisionWrite {
        id,
        decision,
        now_ms: now_ms(),
    }
}

/// Ana approves `id` through `store`, now, and that decides it: the
/// decision she made.
pub async fn ana_approves(store: &impl Store, id: &str) -> ApprovalDecision {
    let yes = decision(true, "ana", now_ms());
    let outcome = store.decide_approval(&deciding_now(id, &yes)).await;
    assert_eq!(outcome.unwrap(), DecideOutcome::Decided, "{id}");
    yes
}

/// An approval asked for the call `pay {"cents": 1}` by caller `c` in
/// `session`, open for a minute from `now`: what the racing tests ask.
pub fn asked_call(id: &str, session: &str, now: u64) -> PendingApproval {
    PendingApproval {
        session: session.to_owned(),
        created_ms: now,
        ..approval(id, now + 60_000)
    }
}

// ------------------------------------------- the operators' controls suite

/// A change of the controls by `by`, as a writer hands it (its version is
/// the store's to set).
fn change(by: &str, summary: &str, at_ms: u64) -> ControlsChange {
    ControlsChange {
        version: 0,
        by: by.to_owned(),
        at_ms,
        summary: summary.to_owned(),
    }
}

/// `len` characters that do not compress: a long id as a host may send it.
fn noise(len: usize, seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(
                b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    [(state % 62) as usize],
            )
        })
        .collect()
}

/// `by`'s `answer` to the question `id`, recorded now as a person's, with
/// no note and no binding.
pub async fn person_answers<St: Store + ?Sized>(
    store: &St,
    id: &str,
    by: &str,
    answer: &toolcall_core::life::Answer<'_>,
) -> Result<toolcall_core::life::Decided, toolcall_core::life::Refusal> {
    let person = toolcall_core::life::Answerer::Person(by);
    toolcall_core::life::decide(store, id, None, &person, answer, "", now_ms()).await
}

/// The Postgres server the store tests run against, from
/// `TOOLCALL_POSTGRES_URL` (CI sets it); without it, `None`, and a loud
/// line on stderr (past the test harness's capture) that Postgres was not
/// tested.
pub fn postgres_url() -> Option<String> {
    toolcall_testkit::run::postgres_url("the Postgres store")
}

/// A schema name of `test`'s own, in this process, now.
pub fn postgres_schema(test: &str) -> String {
    format!(
        "toolcall_test_{test}_{}_{}",
        std::process::id(),
        toolcall::store::now_ms()
    )
}

// The Store conformance suite, a module per part of the contract (beside
// the binaries in tests/, so each named by its path).
#[path = "conformance/approvals.rs"]
mod approvals;
#[path = "conformance/asking.rs"]
mod asking;
#[path = "conformance/calls.rs"]
mod calls;
#[path = "conformance/operators.rs"]
mod operators;

pub use approvals::*;
use asking::*;
pub use calls::*;
pub use operators::*;
