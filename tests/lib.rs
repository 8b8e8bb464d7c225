//! What the integration tests share: a tool that uses every attribute
//! `#[tool]` offers (for the macro tests and the schema/validator
//! agreement), and the conformance suite every `Store` must pass.

use serde_json::json;
use toolcall::store::{Binding, Claim, PendingApproval, Store, TakeApproval, now_ms};
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

// ------------------------------------------------ the Store conformance suite

fn result(n: i64) -> ToolResult {
    ToolResult::success("pay", json!({"n": n}).as_object().unwrap().clone())
}

fn approval(id: &str, expires_ms: u64) -> PendingApproval {
    PendingApproval {
        id: id.to_owned(),
        session: "s".into(),
        caller: "c".into(),
        tool: "pay".into(),
        digest: "d1".into(),
        arguments: json!({"cents": 1}),
        step: 3,
        created_ms: now_ms(),
        expires_ms,
    }
}

const BOUND: Binding<'static> = Binding {
    session: "s",
    caller: "c",
    tool: Some("pay"),
    digest: Some("d1"),
};

/// The whole contract, on one store; `other` is a second handle on the same
/// data (the same store, or another connection to the same file).
pub async fn conformance(store: &impl Store, other: &impl Store) {
    // Counters are per session and per key, and shared by handles.
    assert_eq!(store.next_step("a").await.unwrap(), 1);
    assert_eq!(other.next_step("a").await.unwrap(), 2);
    assert_eq!(store.next_step("b").await.unwrap(), 1);
    assert_eq!(store.count_call("k1").await.unwrap(), 1);
    assert_eq!(other.count_call("k1").await.unwrap(), 2);
    assert_eq!(store.count_call("k2").await.unwrap(), 1);

    // One claim wins; the lease ends it; release frees it.
    let now = now_ms();
    assert_eq!(
        store.claim("k1", now, 1_000).await.unwrap(),
        Claim::Acquired
    );
    assert_eq!(
        other.claim("k1", now, 1_000).await.unwrap(),
        Claim::InFlight
    );
    assert_eq!(
        other.claim("k1", now + 1_001, 1_000).await.unwrap(),
        Claim::Acquired,
        "lease ran out"
    );
    other.release("k1").await.unwrap();
    assert_eq!(
        store.claim("k1", now, 1_000).await.unwrap(),
        Claim::Acquired,
        "released: free again"
    );
    assert_eq!(store.completed("k1").await.unwrap(), None);

    // A completed record is the answer from then on, and release keeps it.
    store.complete("k1", &result(7)).await.unwrap();
    assert_eq!(other.completed("k1").await.unwrap(), Some(result(7)));
    assert_eq!(
        other.claim("k1", now + 10_000_000, 1_000).await.unwrap(),
        Claim::Completed(result(7))
    );
    other.release("k1").await.unwrap();
    assert_eq!(store.completed("k1").await.unwrap(), Some(result(7)));

    // Approvals: bound, single use, expiring.
    store
        .put_approval(&approval("p1", now + 60_000))
        .await
        .unwrap();
    for wrong in [
        Binding {
            session: "other",
            ..BOUND
        },
        Binding {
            caller: "other",
            ..BOUND
        },
        Binding {
            tool: Some("other"),
            ..BOUND
        },
        Binding {
            digest: Some("d2"),
            ..BOUND
        },
    ] {
        assert_eq!(
            other.take_approval("p1", &wrong, now).await.unwrap(),
            TakeApproval::Invalid
        );
    }
    assert_eq!(
        other.take_approval("forged", &BOUND, now).await.unwrap(),
        TakeApproval::Invalid
    );
    match other.take_approval("p1", &BOUND, now).await.unwrap() {
        TakeApproval::Taken(taken) => assert_eq!(
            taken,
            approval("p1", now + 60_000).with_created(taken.created_ms)
        ),
        other => panic!("expected the approval, got {other:?}"),
    }
    assert_eq!(
        store.take_approval("p1", &BOUND, now).await.unwrap(),
        TakeApproval::Invalid,
        "single use"
    );
    let loose = Binding {
        tool: None,
        digest: None,
        ..BOUND
    };
    store.put_approval(&approval("p2", now + 10)).await.unwrap();
    assert_eq!(
        store.take_approval("p2", &loose, now + 10).await.unwrap(),
        TakeApproval::Expired
    );
    assert_eq!(
        store.take_approval("p2", &loose, now).await.unwrap(),
        TakeApproval::Invalid,
        "gone once expired"
    );
}

trait WithCreated {
    fn with_created(self, created_ms: u64) -> Self;
}

impl WithCreated for PendingApproval {
    fn with_created(mut self, created_ms: u64) -> Self {
        self.created_ms = created_ms;
        self
    }
}
