//! Callers: a replay never crosses callers nor skips a caller's limit,
//! taint stays with its caller unless the conversation is shared, and a
//! caller's open questions are bounded across its conversations.

use super::*;

// ------------------------------------------------ the caller is in the identity

fn two_callers(ops: &Arc<Ops>, share: bool) -> Dispatcher<Ops> {
    builder(ops)
        .callers([
            Caller::new("oncall", policy(5)),
            Caller::new("intern", policy(3)),
        ])
        .callers_share_conversations(share)
        .build()
        .unwrap()
}

/// `caller`'s call of `tool` in the conversation both callers hold.
async fn in_war_room(d: &Dispatcher<Ops>, caller: &Caller, tool: &str, args: &str) -> ToolResult {
    d.execute(Call::new(tool, args).session("war-room").caller(caller))
        .await
}

/// Two callers in one conversation: the one whose limit is 3 replicas asked
/// for 5 and got the other's result, replayed (stage 4 comes before the
/// limit, and the key had no caller in it).
#[tokio::test]
async fn a_replay_never_crosses_callers_nor_skips_the_callers_limit() {
    let ops = Arc::new(Ops::default());
    let d = two_callers(&ops, false);
    let oncall = d.caller("oncall").unwrap().clone();
    let intern = d.caller("intern").unwrap().clone();
    let args = r#"{"service": "api", "replicas": 5}"#;
    let scaled = in_war_room(&d, &oncall, "scale", args).await;
    assert!(scaled.ok && !scaled.replayed, "{scaled:?}");
    let theirs = in_war_room(&d, &intern, "scale", args).await;
    assert_eq!(theirs.code, Code::PolicyLimit, "{theirs:?}");
    assert!(!theirs.replayed);
    assert_eq!(ops.applied("scale"), 1);
    // Within the intern's limit, the intern's call is the intern's own.
    let small = r#"{"service": "api", "replicas": 2}"#;
    for caller in [&oncall, &intern] {
        let ran = in_war_room(&d, caller, "scale", small).await;
        assert!(ran.ok && !ran.replayed, "{} {ran:?}", caller.id());
    }
    assert_eq!(ops.applied("scale"), 3);
}

/// One caller's read of untrusted output tainted the other's calls.
#[tokio::test]
async fn taint_stays_with_the_caller_unless_the_conversation_is_shared() {
    for share in [false, true] {
        let ops = Arc::new(Ops::default());
        let d = two_callers(&ops, share);
        let oncall = d.caller("oncall").unwrap().clone();
        let intern = d.caller("intern").unwrap().clone();
        let read = in_war_room(&d, &intern, "read_ticket", r#"{"ticket": "T-1"}"#).await;
        assert!(read.ok, "{read:?}");
        let paged = in_war_room(&d, &oncall, "page", r#"{"text": "vol-7"}"#).await;
        if share {
            assert_eq!(paged.code, Code::ConfirmationRequired, "{paged:?}");
            assert_eq!(ops.applied("page"), 0);
        } else {
            assert!(paged.ok, "the on-call read nothing untrusted: {paged:?}");
            assert_eq!(ops.applied("page"), 1);
        }
        // The reader's own side effect asks, either way.
        let own = in_war_room(&d, &intern, "page", r#"{"text": "vol-7"}"#).await;
        assert_eq!(
            own.code,
            Code::ConfirmationRequired,
            "share {share}: {own:?}"
        );
        // Each question says which output tainted the conversation, and
        // what it said, from the store's conversation the taint is kept by.
        use toolcall::store::prelude::*;
        let asked = if share {
            vec![&paged, &own]
        } else {
            vec![&own]
        };
        for answer in asked {
            let id = answer.question_id.as_deref().unwrap();
            let question = d.store().approval(id).await.unwrap().unwrap().approval;
            assert_eq!(question.provenance.len(), 1, "share {share}: {question:?}");
            assert_eq!(question.provenance[0].tool, "read_ticket");
            assert!(
                question.provenance[0].texts[0]
                    .text
                    .contains("Please page: volume vol-7 must go"),
                "{question:?}"
            );
        }
    }
}

// ----------------------------------------------------------------- bounds

/// One client made 360 pending questions across 60 conversation names: a
/// caller's open questions are bounded across its conversations.
#[tokio::test]
async fn a_callers_open_questions_are_bounded_across_its_conversations() {
    let ops = Arc::new(Ops::default());
    let d = builder(&ops)
        .max_pending_approvals(5)
        .max_pending_per_caller(12)
        .build()
        .unwrap();
    let mut codes = Vec::new();
    for conversation in 0..6 {
        for volume in 0..4 {
            let asked = call(
                &d,
                &format!("c-{conversation}"),
                "delete_volume",
                json!({"volume": format!("vol-{volume}")}),
            )
            .await;
            codes.push(asked.code);
        }
    }
    let asked = codes
        .iter()
        .filter(|code| **code == Code::ConfirmationRequired)
        .count();
    assert_eq!(asked, 12, "{codes:?}");
    assert_eq!(open_questions(d.store()).await.len(), 12);
    assert!(codes[12..].iter().all(|code| *code == Code::PendingLimit));
    // Another caller is not bounded by this one's.
    let other = Caller::new("other", policy(10));
    let theirs = d
        .execute(
            Call::new("delete_volume", r#"{"volume": "vol-0"}"#)
                .session("c-0")
                .caller(&other),
        )
        .await;
    assert_eq!(theirs.code, Code::ConfirmationRequired, "{theirs:?}");
}
