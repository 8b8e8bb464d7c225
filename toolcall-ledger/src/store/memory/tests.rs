use crate::store::{ApprovalUse, DecisionWrite, LockAsk, RateWindow, SignatureWrite};
use std::collections::HashMap;

use serde_json::Value;

use super::shard::Counted;
use super::*;

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

/// A question `id` of session `s`, asked at 1, open for ever.
fn question(id: &str, decision: Option<ApprovalDecision>) -> PendingApproval {
    PendingApproval {
        id: id.into(),
        session: "s".into(),
        caller: "c".into(),
        tool: "pay".into(),
        digest: "d".into(),
        arguments: Value::Null,
        step: 1,
        created_ms: 1,
        expires_ms: u64::MAX,
        decision,
        reason: None,
        tainted: Vec::new(),
        answerers: Default::default(),
        principal: None,
        provenance: Vec::new(),
    }
}

#[test]
fn a_call_start_says_no_question_is_asked_only_until_one_is() {
    block_on(async {
        let store = MemoryStore::default();
        let key = Key::sha256("call");
        let mut start = CallStart::new("s", &key, 1, 100);
        start.questions = true;
        let begun = store.begin_call(&start).await.unwrap();
        assert_eq!(begun.questions, Some(false), "nothing asked yet");
        store.put_approval(&question("a", None)).await.unwrap();
        let begun = store.begin_call(&start).await.unwrap();
        assert_eq!(begun.questions, None, "asked: the caller looks");
        let yes = ApprovalDecision {
            approved: true,
            by: "p".into(),
            note: String::new(),
            edited_arguments: None,
            decided_ms: 2,
            lasts_until_ms: None,
        };
        assert_eq!(
            store
                .decide_approval(&DecisionWrite {
                    id: "a",
                    decision: &yes,
                    now_ms: 2
                })
                .await
                .unwrap(),
            DecideOutcome::Decided
        );
        let begun = store.begin_call(&start).await.unwrap();
        assert_eq!(begun.questions, None, "decided: the caller looks");

        // An approval stored with its decision counts too.
        let other = MemoryStore::default();
        other.put_approval(&question("b", Some(yes))).await.unwrap();
        let begun = other.begin_call(&start).await.unwrap();
        assert_eq!(begun.questions, None);
    });
}

#[test]
fn a_lock_is_its_holders_whatever_the_length_of_the_holders_text() {
    let store = MemoryStore::default();
    let resource = Key::sha256(b"order ORD-1001");
    let at = now_ms();
    let inline = "x".repeat(Holder::INLINE);
    let longer = format!("{inline}y");
    let prefix = "x".repeat(Holder::INLINE - 1);
    let empty = "";
    block_on(async {
        let lock = async |holder: &str| {
            store
                .lock_resource(
                    &LockAsk {
                        resource: &resource,
                        holder,
                        lease_ms: 60_000,
                    },
                    at,
                )
                .await
                .unwrap()
        };
        assert!(lock(&inline).await);
        assert!(lock(&inline).await, "its holder takes it again");
        for other in [longer.as_str(), prefix.as_str(), empty] {
            assert!(!lock(other).await, "{other:?} took {inline:?}'s lock");
            store.unlock_resource(&resource, other).await.unwrap();
            assert!(!lock(other).await, "{other:?} freed {inline:?}'s lock");
        }
        store.unlock_resource(&resource, &inline).await.unwrap();
        assert!(lock(&longer).await);
        for other in [inline.as_str(), prefix.as_str(), empty] {
            assert!(!lock(other).await, "{other:?} took {longer:?}'s lock");
        }
        store.unlock_resource(&resource, &longer).await.unwrap();
        assert!(lock(empty).await);
        assert!(!lock(&inline).await);
        // Once its lease is over, anyone takes it, and holds it.
        let later = at + 60_001;
        assert!(
            store
                .lock_resource(
                    &LockAsk {
                        resource: &resource,
                        holder: &longer,
                        lease_ms: 1_000
                    },
                    later
                )
                .await
                .unwrap()
        );
        assert!(
            !store
                .lock_resource(
                    &LockAsk {
                        resource: &resource,
                        holder: empty,
                        lease_ms: 1_000
                    },
                    later
                )
                .await
                .unwrap()
        );
    });
}

#[test]
fn old_and_excess_entries_are_dropped() {
    let store = MemoryStore::new(Duration::from_secs(3600), 160);
    block_on(async {
        for i in 0..10_000u32 {
            let mut digest = [0u8; 32];
            digest[..4].copy_from_slice(&i.to_be_bytes());
            store
                .count_call(&Key::from_digest(digest), now_ms())
                .await
                .unwrap();
        }
    });
    // 16 shards of at most 10 calls each, trimmed to 9 when over.
    assert!(store.len() <= 160, "{}", store.len());
    assert!(store.len() >= 100, "{}", store.len());
}

#[test]
fn trimming_keeps_the_newest() {
    let mut map: HashMap<String, Counted> = (0..100)
        .map(|i| {
            (
                format!("k{i}"),
                Counted {
                    count: 1,
                    touched_ms: i,
                },
            )
        })
        .collect();
    trim_oldest(&mut map, 50, |c| c.touched_ms);
    assert_eq!(map.len(), 45);
    assert!(map.contains_key("k99") && !map.contains_key("k0"));
}

#[test]
fn ended_rate_windows_and_the_signatures_of_gone_approvals_are_forgotten() {
    block_on(async {
        // A capacity of 16: one entry per shard, so every write trims.
        let store = MemoryStore::new(Duration::from_secs(60), 16);
        let now = now_ms();
        let ended = RateWindow {
            bucket: "old",
            start_ms: 0,
            length_ms: 1_000,
        };
        assert!(store.take_rate(&ended, 5).await.unwrap());
        assert!(store.take_rate(&ended, 5).await.unwrap());
        let start = now - now % 60_000;
        // Forty windows still open, and as many more as it takes for one to
        // land in the ended window's shard (the hash is seeded anew each
        // run, so which shard a bucket lands in is not known in advance).
        let old_shard = store.shard_of("old");
        let mut landed = false;
        for i in 0..10_000 {
            let bucket = format!("b{i}");
            landed |= store.shard_of(&bucket) == old_shard;
            let open = RateWindow {
                bucket: &bucket,
                start_ms: start,
                length_ms: 60_000,
            };
            assert!(store.take_rate(&open, 5).await.unwrap());
            if i >= 39 && landed {
                break;
            }
        }
        assert!(
            landed,
            "no bucket in ten thousand landed in one shard of 16"
        );
        assert_eq!(store.rate_count("old", 0).await.unwrap(), 0, "ended: gone");
        let kept: usize = store.shards.iter().map(|s| lock(s).rates.len()).sum();
        assert!(kept <= 16, "one window a shard: {kept}");

        let asked = PendingApproval {
            created_ms: now,
            expires_ms: now + 60_000,
            ..question("q", None)
        };
        store.put_approval(&asked).await.unwrap();
        let yes = ApprovalDecision {
            approved: true,
            by: String::new(),
            note: String::new(),
            edited_arguments: None,
            decided_ms: now,
            lasts_until_ms: None,
        };
        let signed = store
            .sign_approval(&SignatureWrite {
                id: "q",
                signer: "ana",
                needed: 2,
                decision: &yes,
                now_ms: now,
            })
            .await;
        assert_eq!(signed.unwrap(), SignOutcome::Signed { signatures: 1 });
        let binding = Binding {
            session: "s",
            caller: "c",
            tool: None,
            digest: None,
            requester: crate::store::Requester::Anyone,
        };
        // Taken undecided: the approval is gone, and its signatures with it
        // at the shard's next maintenance.
        let taken = store
            .take_approval(&ApprovalUse {
                id: "q",
                binding: &binding,
                now_ms: now,
            })
            .await
            .unwrap();
        assert!(matches!(taken, TakeApproval::Taken(_)));
        let mut shard = store.shard("q");
        shard.writes = 4095; // the next write maintains the shard
        store.maintain(&mut shard, now);
        assert!(shard.signatures.is_empty());
    });
}
