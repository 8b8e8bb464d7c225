//! What the host supplies is bounded where it is kept, the same everywhere;
//! a dry run takes no step, and its record says so; an answer cut to a
//! budget keeps what the model must act on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolcall::__private::echo::{MAX_CALL_ID_BYTES, MAX_ID_BYTES, MAX_NOTE_BYTES};
use toolcall::store::prelude::*;
use toolcall::{
    Approvals, Call, Caller, Code, Ctx, Decision, Dispatcher, MemoryAudit, Policy, Rejection, tool,
    tools,
};

/// Pays someone. Amount in cents.
#[tool(side_effect, high_risk)]
fn pay(
    ctx: &Ctx<AtomicU32>,
    /// Who gets the money.
    to: String,
    /// The amount, in cents.
    cents: i64,
) -> Result<Value, Rejection> {
    ctx.state.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"paid": cents, "to": to}))
}

/// Looks a payee up. No side effects.
#[tool]
fn payee(
    /// The payee's id.
    to: String,
) -> Result<String, Rejection> {
    Ok(to)
}

const PAY: &str = r#"{"to": "acct-7", "cents": 500}"#;

#[tokio::test]
async fn host_texts_are_bounded_where_they_are_kept_and_the_same_everywhere() {
    let paid = Arc::new(AtomicU32::new(0));
    let audit = MemoryAudit::new();
    let huge = "c".repeat(1 << 20);
    let caller = Caller::new(huge.clone(), Policy::new().allow(["pay", "payee"]));
    assert!(caller.id().len() <= MAX_ID_BYTES, "{}", caller.id().len());
    let d = Dispatcher::builder(tools![pay, payee].unwrap(), Arc::clone(&paid))
        .callers([caller.clone()])
        .approvals(Approvals::Inbox)
        .audit(audit.clone())
        .build()
        .unwrap();
    let session = "s".repeat(1 << 20);
    let call_id = "i".repeat(1 << 20);
    let asked = d
        .execute(
            Call::new("pay", PAY)
                .session(&session)
                .caller(&caller)
                .call_id(&call_id),
        )
        .await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    let id = asked.question_id.unwrap();

    // The audit record is small, and says which texts it kept bounded.
    let record = &audit.records()[0];
    let line = serde_json::to_string(record).unwrap();
    assert!(
        line.len() < 8 * 1024,
        "a bounded record: {} bytes",
        line.len()
    );
    assert!(record.session_id.len() <= MAX_ID_BYTES && record.session_id.contains("sha256:"));
    assert!(record.caller.len() <= MAX_ID_BYTES && record.caller.contains("sha256:"));
    let kept_id = record.call_id.as_deref().unwrap();
    assert!(kept_id.len() <= MAX_CALL_ID_BYTES && kept_id.contains("sha256:"));

    // The store holds the same bounded texts, and the approval is found by
    // the conversation as the host names it, whole.
    let entry = d.store().approval(&id).await.unwrap().unwrap();
    assert_eq!(entry.approval.session, record.session_id);
    assert_eq!(entry.approval.caller, record.caller);
    let note = "n".repeat(1 << 20);
    let denied = d
        .deny(
            Decision::new(&id, &session).caller(&caller).by("ana"),
            &note,
        )
        .await;
    assert_eq!(denied.code, Code::ConfirmationDenied, "{denied:?}");
    assert!(
        denied.message.len() < MAX_NOTE_BYTES + 512,
        "{}",
        denied.message.len()
    );
    let kept = d.store().approval(&id).await.unwrap().unwrap();
    let kept_note = &kept.approval.decision.unwrap().note;
    assert!(kept_note.len() <= MAX_NOTE_BYTES && kept_note.contains("sha256:"));
    assert_eq!(paid.load(Ordering::SeqCst), 0);

    // One conversation is one conversation, however long its id; another
    // that differs only at its end is another.
    let mut other = session.clone();
    other.pop();
    other.push('t');
    for (conversation, steps) in [(&session, 2), (&other, 1)] {
        let looked = d
            .execute(
                Call::new("payee", r#"{"to": "acct-7"}"#)
                    .session(conversation)
                    .caller(&caller),
            )
            .await;
        assert!(looked.ok, "{looked:?}");
        let bounded = toolcall::__private::echo::bound(conversation, MAX_ID_BYTES);
        let scope = d.settings().conversation_scope(caller.id(), &bounded);
        assert_eq!(d.store().peek_step(&scope).await.unwrap(), steps);
    }
    assert!(
        audit
            .records()
            .iter()
            .all(|r| serde_json::to_string(r).unwrap().len() < 8 * 1024)
    );
}

#[tokio::test]
async fn a_dry_runs_record_carries_no_step() {
    let paid = Arc::new(AtomicU32::new(0));
    let audit = MemoryAudit::new();
    let d = Dispatcher::builder(tools![pay, payee].unwrap(), Arc::clone(&paid))
        .audit(audit.clone())
        .build()
        .unwrap();
    // One call for both: the real one must be the dry run's twin.
    let call = Call::new("payee", r#"{"to": "a"}"#).session("s");
    let dry = d.execute(call.dry_run(true)).await;
    assert_eq!(dry.code, Code::DryRun);
    let real = d.execute(call).await;
    assert!(real.ok);
    let records = audit.records();
    assert_eq!(records[0].step, None, "a dry run takes no step");
    let line = serde_json::to_value(&records[0]).unwrap();
    assert!(line.get("step").is_none(), "{line}");
    assert_eq!(records[1].step, Some(1));
    let scope = d.settings().conversation_scope("default", "s");
    assert_eq!(d.store().peek_step(&scope).await.unwrap(), 1);
    // A record written before may say its step; it still reads.
    let old: toolcall::AuditRecord = serde_json::from_value(json!({
        "session_id": "s", "caller": "c", "step": 4, "tool": "payee", "arguments": "{}",
        "confirmed": false, "ok": true, "code": "OK", "replayed": false, "duration_ms": 0.1
    }))
    .unwrap();
    assert_eq!(old.step, Some(4));
}

/// Reads a customer's messages: text others wrote, and long.
#[tool(untrusted_output)]
fn inbox_messages(
    /// The order.
    order_id: String,
) -> Result<Value, Rejection> {
    let text = "Hello, my parcel arrived damaged, please help me with a refund soon. ";
    Ok(json!({
        "order_id": order_id,
        "messages": [
            {"from": "customer", "text": text.repeat(3)},
            {"from": "customer", "text": text.repeat(2)},
        ],
    }))
}

#[tokio::test]
async fn a_cut_answer_keeps_what_the_model_must_act_on_at_any_budget() {
    let paid = Arc::new(AtomicU32::new(0));
    for budget in [64, 128, 256, 300, 400] {
        let d = Dispatcher::builder(tools![pay, inbox_messages].unwrap(), Arc::clone(&paid))
            .max_output_bytes(Some(budget))
            .build()
            .unwrap();
        let read = d
            .execute(Call::new("inbox_messages", r#"{"order_id": "ORD-1002"}"#).session("s"))
            .await;
        assert!(read.ok, "{budget}: {read:?}");
        assert_eq!(read.data["truncated"], true, "{budget}");
        assert_eq!(read.data["order_id"], "ORD-1002", "{budget}: {read:?}");
        let messages = read.data["messages"].as_array().unwrap();
        assert!(!messages.is_empty(), "{budget}: the first message stays");
        assert!(
            messages[0]["text"]
                .as_str()
                .unwrap()
                .starts_with("Hello, m"),
            "{budget}: its head stays: {read:?}"
        );

        // After untrusted output, the payment waits for a person: the
        // question keeps its pending call, why, and its id, whole.
        let asked = d
            .execute(Call::new("pay", r#"{"to": "acct-7", "cents": 500}"#).session("s"))
            .await;
        assert_eq!(asked.code, Code::ConfirmationRequired, "{budget}");
        assert_eq!(
            asked.data["pending"],
            json!({"to": "acct-7", "cents": 500}),
            "{budget}: {asked:?}"
        );
        assert_eq!(asked.data["reason"], "untrusted_context", "{budget}");
        assert!(asked.question_id.is_some(), "{budget}");
        assert_eq!(asked.message, "pay needs user approval before it runs.");
        let text = asked.to_model_text();
        assert!(
            text.contains("\"pending\"") && text.contains("question_id"),
            "{text}"
        );
    }
    assert_eq!(paid.load(Ordering::SeqCst), 0);
}
