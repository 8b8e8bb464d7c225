//! What the store tests put in a store.

use serde_json::json;
use toolcall::store::{ApprovalDecision, PendingApproval, now_ms};

/// A question of the caller `c` in session `s` about a call of `pay`
/// (digest `d`, one cent), asked now, open for a minute, undecided.
pub fn asked(id: &str) -> PendingApproval {
    PendingApproval {
        id: id.to_owned(),
        session: "s".into(),
        caller: "c".into(),
        tool: "pay".into(),
        digest: "d".into(),
        arguments: json!({"cents": 1}),
        step: 1,
        created_ms: now_ms(),
        expires_ms: now_ms() + 60_000,
        decision: None,
        reason: None,
        tainted: Vec::new(),
        answerers: Default::default(),
        principal: None,
        provenance: Vec::new(),
    }
}

/// ana's yes, with `note`, decided now, as the inbox records it.
pub fn yes(note: &str) -> ApprovalDecision {
    ApprovalDecision {
        approved: true,
        by: "ana".to_owned(),
        note: note.to_owned(),
        edited_arguments: None,
        decided_ms: now_ms(),
        lasts_until_ms: None,
    }
}
