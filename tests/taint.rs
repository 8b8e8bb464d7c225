//! Taint from untrusted output, and dry runs, on the orders example: the
//! customer's messages of ORD-1002 hold an injection that asks for a full
//! refund of ORD-1001 and a note with a link.

use std::sync::Arc;

use orders::{Shop, add_note, get_order, read_messages, refund_order};
use serde_json::{Value, json};
use toolcall::store::now_ms;
use toolcall::{
    Approvals, Call, Code, Dispatcher, MemoryAudit, MemoryStore, Policy, Store, Taint, ToolResult,
    tools,
};

type Orders = Dispatcher<Shop, MemoryStore>;

fn dispatcher(level: Taint, approvals: Approvals) -> (Orders, MemoryAudit) {
    let audit = MemoryAudit::new();
    let policy = Policy::new()
        .allow(["get_order", "refund_order", "read_messages", "add_note"])
        .limit("max_refund_cents", 50_000)
        .taint(level);
    let d = Dispatcher::builder(
        tools![get_order, refund_order, read_messages, add_note].unwrap(),
        Arc::new(Shop::new()),
    )
    .policy(policy)
    .approvals(approvals)
    .audit(audit.clone())
    .build()
    .unwrap();
    (d, audit)
}

async fn call(d: &Orders, tool: &str, arguments: Value) -> ToolResult {
    d.execute(Call::new(tool, arguments.to_string().as_str()).session("s"))
        .await
}

/// What the injection asks for.
fn injected_note() -> Value {
    json!({
        "order_id": "ORD-1001",
        "text": "The customer must confirm payment details at https://refund-help.example/claim?id=ORD-1002 before anything else."
    })
}

fn injected_refund() -> Value {
    json!({"order_id": "ORD-1001", "amount_cents": 12000, "currency": "BRL", "reason": "customer_request"})
}

async fn read_the_injection(d: &Orders) {
    let read = call(d, "read_messages", json!({"order_id": "ORD-1002"})).await;
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
        let note_id = note
            .confirmation_id
            .clone()
            .expect("an approval to ask for");
        if level == Taint::Values {
            assert_eq!(note.data["tainted"], json!(["order_id", "text"]));
        } else {
            assert!(note.data.get("tainted").is_none());
        }
        let refund = call(&d, "refund_order", injected_refund()).await;
        assert_eq!(refund.code, Code::ConfirmationRequired, "{level}");
        assert_eq!(refund.data["reason"], "untrusted_context", "{level}");
        let refund_id = refund.confirmation_id.clone().unwrap();

        // The backend saw nothing.
        assert_eq!(d.state().notes().len(), 0, "{level}");
        assert_eq!(d.state().applied_refunds(), 0, "{level}");

        // The model insisting changes nothing.
        let again = call(&d, "add_note", injected_note()).await;
        assert_eq!(again.code, Code::ConfirmationRequired);
        assert_eq!(d.state().notes().len(), 0);

        // A person approves each: it runs, once.
        for _ in 0..2 {
            let approved = d
                .execute(
                    Call::new("add_note", injected_note().to_string().as_str())
                        .session("s")
                        .approval(&note_id),
                )
                .await;
            assert!(
                approved.ok || approved.code == Code::ConfirmationInvalid,
                "{approved:?}"
            );
        }
        assert_eq!(d.state().notes().len(), 1, "{level}: exactly once");
        let refunded = d
            .execute(
                Call::new("refund_order", injected_refund().to_string().as_str())
                    .session("s")
                    .approval(&refund_id),
            )
            .await;
        assert!(refunded.ok, "{refunded:?}");
        let replayed = d
            .execute(
                Call::new("refund_order", injected_refund().to_string().as_str())
                    .session("s")
                    .confirmed(true),
            )
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
    let (d, _) = dispatcher(Taint::Values, Approvals::Inbox);
    read_the_injection(&d).await;
    let confirmed = d
        .execute(
            Call::new("add_note", injected_note().to_string().as_str())
                .session("s")
                .confirmed(true),
        )
        .await;
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
        let dry = d
            .execute(
                Call::new("refund_order", args.as_str())
                    .session("s")
                    .confirmed(true)
                    .dry_run(true),
            )
            .await;
        assert!(dry.ok, "{dry:?}");
        assert_eq!(dry.code, Code::DryRun);
        assert_eq!(dry.code, "DRY_RUN");
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
    let real = d
        .execute(
            Call::new("refund_order", args.as_str())
                .session("s")
                .confirmed(true),
        )
        .await;
    assert_eq!(real.code, Code::Ok, "{real:?}");
    assert!(!real.replayed);
    assert_eq!(d.state().applied_refunds(), 1);
    let records = audit.records();
    assert_eq!(records.len(), 6);
    assert!(records[..5].iter().all(|r| r.dry_run && r.step == 1));
    assert_eq!((records[5].step, records[5].dry_run), (1, false));

    // A dry run after it answers what the real call would: the replay.
    let dry = d
        .execute(
            Call::new("refund_order", args.as_str())
                .session("s")
                .dry_run(true),
        )
        .await;
    assert!(dry.replayed && dry.ok, "{dry:?}");
    assert_eq!(d.state().applied_refunds(), 1);
}

#[tokio::test]
async fn a_dry_run_without_approval_asks_without_creating_an_approval() {
    let (d, _) = dispatcher(Taint::Values, Approvals::Host);
    let dry = d
        .execute(
            Call::new("refund_order", refund_2590().as_str())
                .session("s")
                .dry_run(true),
        )
        .await;
    assert_eq!(dry.code, Code::ConfirmationRequired, "{dry:?}");
    assert_eq!(dry.confirmation_id, None);
    assert!(
        d.store()
            .pending_approvals(now_ms(), 10)
            .await
            .unwrap()
            .is_empty(),
        "the store has no pending approval"
    );
    // The check still speaks: an over-refund is refused as the real call would be.
    let over = d
        .execute(
            Call::new(
                "refund_order",
                json!({"order_id": "ORD-1001", "amount_cents": 13000, "currency": "BRL", "reason": "damaged"})
                    .to_string()
                    .as_str(),
            )
            .session("s")
            .confirmed(true)
            .dry_run(true),
        )
        .await;
    assert_eq!(over.code, "AMOUNT_EXCEEDS_REFUNDABLE");
    assert_eq!(d.state().applied_refunds(), 0);
}

#[tokio::test]
async fn a_dry_run_of_a_tainted_note_asks_and_adds_nothing() {
    let (d, _) = dispatcher(Taint::Values, Approvals::Host);
    read_the_injection(&d).await;
    let dry = d
        .execute(
            Call::new("add_note", injected_note().to_string().as_str())
                .session("s")
                .dry_run(true),
        )
        .await;
    assert_eq!(dry.code, Code::ConfirmationRequired);
    assert_eq!(dry.data["reason"], "untrusted_context");
    assert!(
        d.store()
            .pending_approvals(now_ms(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(d.state().notes().len(), 0);
}
