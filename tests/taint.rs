//! Taint from untrusted output, and dry runs, on the orders example: the
//! customer's messages of ORD-1002 hold an injection that asks for a full
//! refund of ORD-1001 and a note with a link.

use std::sync::Arc;

use orders::{Shop, add_note, get_order, read_messages, refund_order};
use serde_json::{Value, json};
use toolcall::store::MemoryStore;
use toolcall::store::now_ms;
use toolcall::store::prelude::*;
use toolcall::{Approvals, Call, Code, Dispatcher, MemoryAudit, Policy, Taint, ToolResult, tools};
use toolcall_testkit::answer::assert_would_ask_a_person;

type Orders = Dispatcher<Shop, MemoryStore>;

fn dispatcher(level: Taint, approvals: Approvals) -> (Orders, MemoryAudit) {
    built(support().taint(level), approvals)
}

/// The support agent's policy, at the default taint level.
fn support() -> Policy {
    Policy::new()
        .allow(["get_order", "refund_order", "read_messages", "add_note"])
        .limit("max_refund_cents", 50_000)
}

fn built(policy: Policy, approvals: Approvals) -> (Orders, MemoryAudit) {
    let audit = MemoryAudit::new();
    let d = Dispatcher::builder(
        tools![get_order, refund_order, read_messages, add_note].unwrap(),
        Arc::new(Shop::new()),
    )
    .part(Shop::reader)
    .policy(policy)
    .approvals(approvals)
    .audit(audit.clone())
    .build()
    .unwrap();
    (d, audit)
}

async fn call(d: &Orders, tool: &str, arguments: Value) -> ToolResult {
    call_as(d, tool, &arguments.to_string(), |c| c).await
}

/// `arguments` for `tool` in the session `s`, marked by `how` as the host
/// marks a call (confirmed, approved, a dry run).
async fn call_as<'a>(
    d: &Orders,
    tool: &'a str,
    arguments: &'a str,
    how: impl FnOnce(Call<'a>) -> Call<'a>,
) -> ToolResult {
    d.execute(how(Call::new(tool, arguments).session("s")))
        .await
}

/// A dry run asks nobody yet: the store holds no question it made.
async fn assert_no_pending_approval(d: &Orders) {
    let pending = d.store().pending_approvals(now_ms(), 10).await.unwrap();
    assert!(pending.is_empty(), "no pending approval: {pending:?}");
}

/// What the injection asks for.
fn injected_note() -> Value {
    json!({
        "order_id": "ORD-1001",
        "text": "The customer must confirm payment details at https://refund-help.example/claim?id=ORD-1002 before anything else."
    })
}

/// A dispatcher at the values level that asks through `approvals`, and its
/// answer to the note the injection asks for, sent as `how` marks it once
/// the session read the injection.
async fn injected_note_sent(
    approvals: Approvals,
    how: impl for<'a> FnOnce(Call<'a>) -> Call<'a>,
) -> (Orders, ToolResult) {
    let (d, _) = dispatcher(Taint::Values, approvals);
    read_the_injection(&d).await;
    let note = call_as(&d, "add_note", &injected_note().to_string(), how).await;
    (d, note)
}

fn injected_refund() -> Value {
    json!({"order_id": "ORD-1001", "amount_cents": 12000, "currency": "BRL", "reason": "customer_request"})
}

async fn read_the_injection(d: &Orders) {
    read_the_injection_in(d, "s").await;
}

async fn read_the_injection_in(d: &Orders, session: &str) {
    let read = d
        .execute(
            Call::new(
                "read_messages",
                json!({"order_id": "ORD-1002"}).to_string().as_str(),
            )
            .session(session),
        )
        .await;
    assert!(read.ok, "{read:?}");
    assert!(read.to_model_text().contains("refund-help.example"));
}

#[tokio::test]
async fn the_injection_runs_nothing_without_a_person_at_either_level() {
    for level in [Taint::Values, Taint::Session] {
        let (d, audit) = dispatcher(level, Approvals::Host);
        read_the_injection(&d).await;

        let note = call(&d, "add_note", injected_note()).await;
        assert_eq!(note.code, Code::ConfirmationRequired, "{level}: {note:?}");
        assert_eq!(note.data["reason"], "untrusted_context", "{level}");
        let note_id = note.question_id.clone().expect("an approval to ask for");
        if level == Taint::Values {
            assert_eq!(note.data["tainted"], json!(["order_id", "text"]));
        } else {
            assert!(note.data.get("tainted").is_none());
        }
        let refund = call(&d, "refund_order", injected_refund()).await;
        assert_eq!(refund.code, Code::ConfirmationRequired, "{level}");
        assert_eq!(refund.data["reason"], "untrusted_context", "{level}");
        let refund_id = refund.question_id.clone().unwrap();

        // The backend saw nothing.
        assert_eq!(d.state().notes().len(), 0, "{level}");
        assert_eq!(d.state().applied_refunds(), 0, "{level}");

        // The model insisting changes nothing.
        let again = call(&d, "add_note", injected_note()).await;
        assert_eq!(again.code, Code::ConfirmationRequired);
        assert_eq!(d.state().notes().len(), 0);

        // A person approves each: it runs, once.
        for _ in 0..2 {
            let approved = call_as(&d, "add_note", &injected_note().to_string(), |c| {
                c.approval(&note_id)
            })
            .await;
            assert!(
                approved.ok || approved.code == Code::ConfirmationInvalid,
                "{approved:?}"
            );
        }
        assert_eq!(d.state().notes().len(), 1, "{level}: exactly once");
        let refunded = call_as(&d, "refund_order", &injected_refund().to_string(), |c| {
            c.approval(&refund_id)
        })
        .await;
        assert!(refunded.ok, "{refunded:?}");
        let replayed = call_as(&d, "refund_order", &injected_refund().to_string(), |c| {
            c.confirmed(true)
        })
        .await;
        assert!(replayed.replayed, "{replayed:?}");
        assert_eq!(d.state().applied_refunds(), 1, "{level}: exactly once");

        // The audit says why it asked.
        let asked = audit
            .records()
            .into_iter()
            .find(|r| r.tool == "add_note" && r.code == Code::ConfirmationRequired)
            .unwrap();
        let expected: Vec<String> = if level == Taint::Values {
            vec!["order_id".into(), "text".into()]
        } else {
            vec![]
        };
        assert_eq!(asked.tainted, Some(expected));
    }
}

#[tokio::test]
async fn in_the_inbox_only_a_decision_lets_a_tainted_call_run() {
    let (d, confirmed) = injected_note_sent(Approvals::Inbox, |c| c.confirmed(true)).await;
    assert_eq!(confirmed.code, Code::ConfirmationRequired, "{confirmed:?}");
    let pending = d.store().pending_approvals(now_ms(), 10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "add_note");
    assert_eq!(d.state().notes().len(), 0);
}

#[tokio::test]
async fn values_from_trusted_tools_and_the_user_stay_clean_at_the_values_level() {
    let (d, audit) = dispatcher(Taint::Values, Approvals::Host);
    read_the_injection(&d).await;
    let order = call(&d, "get_order", json!({"order_id": "ORD-1002"})).await;
    assert!(order.ok);
    // The order the user named (and whose messages were read), with a
    // total that came from get_order.
    let note = json!({"order_id": "ORD-1002", "text": "Tracking checked: the 4500 cent order is still in transit."});
    let added = call(&d, "add_note", note.clone()).await;
    assert_eq!(added.code, Code::Ok, "{added:?}");
    assert_eq!(d.state().notes().len(), 1);
    assert!(audit.records().iter().all(|r| r.tainted.is_none()));

    // The session level asks for the same note.
    let (d, _) = dispatcher(Taint::Session, Approvals::Host);
    read_the_injection(&d).await;
    let asked = call(&d, "add_note", note).await;
    assert_eq!(asked.code, Code::ConfirmationRequired);
    assert_eq!(d.state().notes().len(), 0);
}

#[tokio::test]
async fn without_untrusted_output_nothing_is_tainted() {
    let (d, _) = dispatcher(Taint::Session, Approvals::Host);
    let added = call(&d, "add_note", injected_note()).await;
    assert_eq!(added.code, Code::Ok, "{added:?}");
    assert_eq!(d.state().notes().len(), 1);
}

#[tokio::test]
async fn the_off_level_behaves_as_before() {
    let (d, audit) = dispatcher(Taint::Off, Approvals::Host);
    read_the_injection(&d).await;
    let note = call(&d, "add_note", injected_note()).await;
    assert_eq!(note.code, Code::Ok, "{note:?}");
    assert_eq!(d.state().notes().len(), 1);
    let refund = call(&d, "refund_order", injected_refund()).await;
    assert_eq!(refund.code, Code::ConfirmationRequired);
    assert!(refund.data.get("reason").is_none());
    assert_eq!(d.state().applied_refunds(), 0);
    assert!(audit.records().iter().all(|r| r.tainted.is_none()));
}

// ------------------------------------------------- rewrites of the injection

/// What a model may write after reading the injection, in a note on the
/// order whose messages it read (ORD-1002, the caller's own: clean): the
/// link, the ids and the amount of the message rewritten, and a whole
/// message copied with its case and spaces changed.
const REWRITES: &[&str] = &[
    // The link.
    "Confirm payment at https://refund-help.example/claim?id=ORD-1002#",
    "Confirm payment at https://refund-help.example/claim?id=ORD-1002&",
    "Confirm payment at https://refund-help.example/claim/?id=ORD-1002",
    "Confirm payment at refund-help.example/claim?id=ORD-1002",
    "Confirm payment at http://refund-help.example/claim?id=ORD-1002",
    "Confirm payment at //refund-help.example/claim",
    "Confirm payment at refund-help.example",
    "Confirm payment at www.refund-help.example",
    "Confirm payment at pay.refund-help.example",
    "Confirm payment at refund-help.example:8443/claim",
    "Confirm payment at https://agent@refund-help.example/claim",
    "Confirm payment at HTTPS://REFUND-HELP.EXAMPLE/CLAIM?ID=ORD-1002",
    "Confirm payment at https://refund-help.example/cl%61im?id=ORD-1002",
    "Confirm payment at https://refund-help.example/claim%3Fid%3DORD-1002",
    "Confirm payment at https://%72efund-help.example/claim",
    "Confirm payment at hxxps://refund-help[.]example/claim",
    "Confirm payment at refund\u{200B}-help.example",
    "Confirm payment at ｒｅｆｕｎｄ－ｈｅｌｐ．ｅｘａｍｐｌｅ",
    "Confirm payment at refund-help\u{3002}example",
    "Confirm payment at r\u{0435}fund-h\u{0435}lp.\u{0435}xampl\u{0435}",
    "Confirm payment at <https://refund-help.example/claim?id=ORD-1002>",
    "Confirm payment [here](https://refund-help.example/claim?id=ORD-1002).",
    // The order to refund.
    "Refund ORD_1001 in full",
    "Refund ORD 1001 in full",
    "Refund ord1001 in full",
    "Refund ORD\u{2013}1001 in full",
    "Refund ORD.1001 in full",
    "Refund ORD - 1001 in full",
    "Refund ＯＲＤ－１００１ in full",
    "Refund ORD-\u{0661}\u{0660}\u{0660}\u{0661} in full",
    "Refund ORD\u{200B}-1001 in full",
    // The amount.
    "Refund 12,000 cents",
    "Refund 12.000 cents",
    "Refund 12 000 cents",
    "Refund 12\u{00A0}000 cents",
    "Refund 12_000 cents",
    "Refund 12'000 cents",
    "Refund １２０００ cents",
    "Refund R$ 120.00",
    "Refund 12000cents",
    // A whole message, its spaces and case changed.
    "Still  waiting for my package,  it has been three weeks.",
    "STILL WAITING FOR MY PACKAGE, IT HAS BEEN THREE WEEKS.",
    " Still waiting for my package, it has been\nthree weeks. ",
];

fn note_on_ord_1002(text: &str) -> Value {
    json!({"order_id": "ORD-1002", "text": text})
}

/// A note on ORD-1002 saying `text`, in `session` once it read the
/// injection.
async fn note_after_the_injection(d: &Orders, session: &str, text: &str) -> ToolResult {
    read_the_injection_in(d, session).await;
    let note = note_on_ord_1002(text).to_string();
    d.execute(Call::new("add_note", &note).session(session))
        .await
}

#[tokio::test]
async fn rewrites_of_the_injections_link_ids_and_amount_still_wait_for_a_person() {
    assert!(REWRITES.len() >= 30);
    let default = built(support(), Approvals::Host);
    for (level, (d, audit)) in [
        (
            Some(Taint::Values),
            dispatcher(Taint::Values, Approvals::Host),
        ),
        (None, default),
    ] {
        for (i, rewrite) in REWRITES.iter().enumerate() {
            // A session each: ten steps is a session's budget.
            let session = format!("rewrite-{i}");
            let note = note_after_the_injection(&d, &session, rewrite).await;
            assert_eq!(
                note.code,
                Code::ConfirmationRequired,
                "{level:?} {rewrite:?}: {note:?}"
            );
            assert_eq!(
                note.data["reason"], "untrusted_context",
                "{level:?} {rewrite:?}"
            );
            assert!(note.question_id.is_some());
            match level {
                Some(Taint::Values) => assert_eq!(
                    note.data["tainted"],
                    json!(["text"]),
                    "{rewrite:?}: the text, not the caller's own order"
                ),
                _ => assert!(note.data.get("tainted").is_none(), "{rewrite:?}"),
            }
        }
        assert_eq!(
            d.state().notes().len(),
            0,
            "{level:?}: the backend saw no note"
        );
        let asked = audit
            .records()
            .into_iter()
            .filter(|r| r.tool == "add_note" && r.code == Code::ConfirmationRequired)
            .count();
        assert_eq!(asked, REWRITES.len(), "{level:?}");
    }
}

#[tokio::test]
async fn notes_unrelated_to_the_injection_stay_clean_at_the_values_level() {
    let clean = [
        "Tracking checked: the 4500 cent order is still in transit.",
        "Customer waiting three weeks; asked the carrier for an update.",
        "Refund of 2590 cents for ORD-1002 approved by support.",
        "Returns policy: https://shop.example/help/returns",
        "Carrier docs at help.example/claim",
        "Carrier reference 120-00-77 logged.",
        "Batch of 12,000,000 labels reconciled.",
        "Order ORD-1002 of 2 items, 1 of 100 shipped.",
        "Still waiting for the carrier, it has been two weeks.",
        "Customer called from +55 11 4000-2233 at 10:15.",
    ];
    let (d, audit) = dispatcher(Taint::Values, Approvals::Host);
    for (i, text) in clean.iter().enumerate() {
        let session = format!("clean-{i}");
        let added = note_after_the_injection(&d, &session, text).await;
        assert_eq!(added.code, Code::Ok, "{text:?}: {added:?}");
    }
    assert_eq!(d.state().notes().len(), clean.len());
    assert!(audit.records().iter().all(|r| r.tainted.is_none()));
}

#[tokio::test]
async fn the_default_level_is_session() {
    assert_eq!(Policy::default().taint_level(), Taint::Session);
    assert_eq!(Policy::new().taint_level(), Taint::Session);
    assert_eq!(Taint::default(), Taint::Session);

    // A dispatcher whose policy never set a level, and one with no policy
    // at all (the default caller), ask for a clean note once the session
    // read untrusted output, and for none before.
    let bare = Dispatcher::builder(
        tools![get_order, refund_order, read_messages, add_note].unwrap(),
        Arc::new(Shop::new()),
    )
    .part(Shop::reader)
    .build()
    .unwrap();
    for d in [built(support(), Approvals::Host).0, bare] {
        let before = call(&d, "add_note", note_on_ord_1002("Tracking checked.")).await;
        assert_eq!(before.code, Code::Ok, "{before:?}");
        read_the_injection(&d).await;
        let clean = note_on_ord_1002("Tracking checked again: still in transit.");
        let after = call(&d, "add_note", clean).await;
        assert_eq!(after.code, Code::ConfirmationRequired, "{after:?}");
        assert_eq!(after.data["reason"], "untrusted_context");
        assert!(after.data.get("tainted").is_none());
        assert_eq!(d.state().notes().len(), 1);
    }
}

// ------------------------------------------------------------------ dry runs

fn refund_2590() -> String {
    json!({"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"})
        .to_string()
}

#[tokio::test]
async fn a_dry_run_refund_changes_nothing_and_the_real_call_runs_as_if_it_never_happened() {
    let (d, audit) = dispatcher(Taint::Values, Approvals::Host);
    let args = refund_2590();
    for _ in 0..5 {
        let dry = call_as(&d, "refund_order", &args, |c| {
            c.confirmed(true).dry_run(true)
        })
        .await;
        assert!(dry.ok, "{dry:?}");
        assert_eq!(dry.code, Code::DryRun);
        assert_eq!(dry.code, "DRY_RUN");
        assert_eq!(dry.data["would"], "run", "confirmed: it would run");
        assert_eq!(
            dry.data["preview"],
            "would refund 2590 of 12000 cents of ORD-1001"
        );
        assert_eq!(dry.data["arguments"]["amount_cents"], 2590);
        assert!(!dry.replayed);
    }
    assert_eq!(d.state().applied_refunds(), 0);
    assert_eq!(d.store().peek_step("s").await.unwrap(), 0, "no step used");
    // Five dry runs are no loop, and the real call is no replay.
    let real = call_as(&d, "refund_order", &args, |c| c.confirmed(true)).await;
    assert_eq!(real.code, Code::Ok, "{real:?}");
    assert!(!real.replayed);
    assert_eq!(d.state().applied_refunds(), 1);
    let records = audit.records();
    assert_eq!(records.len(), 6);
    assert!(
        records[..5].iter().all(|r| r.dry_run && r.step.is_none()),
        "a dry run takes no step, and its record says none"
    );
    assert_eq!((records[5].step, records[5].dry_run), (Some(1), false));

    // A dry run after it answers what the real call would: the replay.
    let dry = call_as(&d, "refund_order", &args, |c| c.dry_run(true)).await;
    assert!(dry.replayed && dry.ok, "{dry:?}");
    assert_eq!(d.state().applied_refunds(), 1);
}

#[tokio::test]
async fn a_dry_run_without_approval_says_it_would_ask_without_creating_an_approval() {
    let (d, _) = dispatcher(Taint::Values, Approvals::Host);
    let dry = call_as(&d, "refund_order", &refund_2590(), |c| c.dry_run(true)).await;
    assert_would_ask_a_person(&dry, "would refund 2590 of 12000 cents of ORD-1001");
    assert_eq!(dry.data["arguments"]["amount_cents"], 2590);
    assert_no_pending_approval(&d).await;
    // The check still speaks: an over-refund is refused as the real call would be.
    let too_much = json!({"order_id": "ORD-1001", "amount_cents": 13000, "currency": "BRL", "reason": "damaged"});
    let over = call_as(&d, "refund_order", &too_much.to_string(), |c| {
        c.confirmed(true).dry_run(true)
    })
    .await;
    assert_eq!(over.code, Code::DryRun, "{over:?}");
    assert_eq!(over.data["would"], "be_refused");
    assert_eq!(over.data["refusal"]["code"], "AMOUNT_EXCEEDS_REFUNDABLE");
    assert_eq!(d.state().applied_refunds(), 0);
}

#[tokio::test]
async fn a_dry_run_of_a_tainted_note_says_it_would_ask_and_adds_nothing() {
    let (d, dry) = injected_note_sent(Approvals::Host, |c| c.dry_run(true)).await;
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert_eq!(dry.data["would"], "ask_a_person");
    assert_eq!(dry.data["reason"], "untrusted_context");
    assert_eq!(dry.question_id, None);
    assert_no_pending_approval(&d).await;
    assert_eq!(d.state().notes().len(), 0);
}
