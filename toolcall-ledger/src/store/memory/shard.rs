//! What a shard of [`MemoryStore`](super::MemoryStore) holds: its maps,
//! their entries, and the helpers that count, read and trim them.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

use super::{KeyHasher, Slot};
use crate::result::ToolResult;
use crate::store::{ApprovalEntry, Key, PendingApproval, RecordedOutcome, Signature};

#[derive(Debug, Default)]
pub(super) struct Shard {
    pub(super) steps: HashMap<String, Counted>,
    pub(super) calls: HashMap<Slot, Counted, KeyHasher>,
    pub(super) records: HashMap<Slot, Record, KeyHasher>,
    pub(super) approvals: HashMap<String, ApprovalEntry>,
    pub(super) locks: HashMap<Slot, Lock, KeyHasher>,
    pub(super) taint: HashMap<String, Taint>,
    /// The rate limits' windows, by bucket and start, in the bucket's
    /// shard.
    pub(super) rates: HashMap<(String, u64), Window>,
    /// The signatures of approvals, in signing order, in their approval's
    /// shard (signing and deciding are one step under its lock).
    pub(super) signatures: HashMap<String, Vec<Signature>>,
    pub(super) writes: u64,
}

/// A rate limit's fixed window: how many calls it counted, and when it
/// ends.
#[derive(Debug)]
pub(super) struct Window {
    pub(super) count: u64,
    pub(super) until_ms: u64,
}

/// What one session's untrusted output left: the fingerprints of its values.
#[derive(Debug)]
pub(super) struct Taint {
    pub(super) prints: std::collections::HashSet<String>,
    /// Newest first, bounded ([`keep`](crate::provenance::keep)).
    pub(super) sources: Vec<crate::provenance::TaintSource>,
    pub(super) touched_ms: u64,
}

#[derive(Debug)]
pub(super) struct Lock {
    pub(super) holder: Holder,
    pub(super) until_ms: u64,
}

/// Who holds a lock, as the text it was given: inline when short (the
/// dispatcher's tokens are 49 bytes), so that taking a lock allocates
/// nothing; on the heap otherwise.
#[derive(Debug)]
pub(super) enum Holder {
    Inline {
        len: u8,
        bytes: [u8; Holder::INLINE],
    },
    Heap(Box<str>),
}

impl Holder {
    pub(super) const INLINE: usize = 56;

    pub(super) fn of(text: &str) -> Holder {
        if text.len() <= Holder::INLINE {
            let mut bytes = [0u8; Holder::INLINE];
            bytes[..text.len()].copy_from_slice(text.as_bytes());
            Holder::Inline {
                len: text.len() as u8,
                bytes,
            }
        } else {
            Holder::Heap(text.into())
        }
    }

    pub(super) fn is(&self, text: &str) -> bool {
        match self {
            Holder::Inline { len, bytes } => &bytes[..usize::from(*len)] == text.as_bytes(),
            Holder::Heap(held) => **held == *text,
        }
    }
}

#[derive(Debug)]
pub(super) struct Counted {
    pub(super) count: u64,
    pub(super) touched_ms: u64,
}

#[derive(Debug)]
pub(super) struct Record {
    pub(super) state: RecordState,
    pub(super) touched_ms: u64,
    /// The question a person is asked if the outcome stays unknown
    /// ([`CallStore::claim_asking`](crate::store::CallStore::claim_asking)), and
    /// its key and when the claim was made.
    pub(super) question: Option<Box<(PendingApproval, Key, u64)>>,
}

// A record's bucket (its key's digest and the record) is one cache line;
// see `RecordState::Completed`.
const _: () = assert!(std::mem::size_of::<(Slot, Record)>() == 64);

#[derive(Debug)]
pub(super) enum RecordState {
    InFlight {
        until_ms: u64,
    },
    /// Boxed: the table's buckets are then 64 bytes, not 216. The table
    /// grows with every new side effect, and each doubling moved every
    /// record and paged in room for twice as many; the answer is boxed
    /// once, when it is recorded, and read again only by a replay.
    Completed(Box<ToolResult>),
    InDoubt,
}

/// Drops the oldest entries until a tenth under `cap`, so trimming is rare.
pub(super) fn trim_oldest<K, V, H: BuildHasher>(
    map: &mut HashMap<K, V, H>,
    cap: usize,
    touched: impl Fn(&V) -> u64,
) {
    if map.len() <= cap {
        return;
    }
    let keep = cap - cap / 10;
    let mut ages: Vec<u64> = map.values().map(&touched).collect();
    let drop = map.len() - keep;
    let (_, &mut threshold, _) = ages.select_nth_unstable(drop - 1);
    let mut dropped = 0;
    map.retain(|_, v| {
        if dropped < drop && touched(v) <= threshold {
            dropped += 1;
            false
        } else {
            true
        }
    });
}

/// What `shard` recorded of the key in `slot`, as [`CallStore::outcome`](crate::store::CallStore::outcome) says it.
#[inline]
pub(super) fn recorded_in(shard: &Shard, slot: &Slot, now_ms: u64) -> Option<RecordedOutcome> {
    match shard.records.get(slot).map(|r| &r.state) {
        Some(RecordState::Completed(result)) => Some(RecordedOutcome::Completed(result.clone())),
        Some(RecordState::InDoubt) => Some(RecordedOutcome::InDoubt),
        // A claim whose holder let its lease run out (it died, or its
        // future was dropped) left no outcome: the effect may have
        // happened.
        Some(RecordState::InFlight { until_ms }) if *until_ms <= now_ms => {
            Some(RecordedOutcome::InDoubt)
        }
        Some(RecordState::InFlight { .. }) => Some(RecordedOutcome::InFlight),
        None => None,
    }
}

#[inline]
pub(super) fn count_in<K: Hash + Eq, H: BuildHasher>(
    map: &mut HashMap<K, Counted, H>,
    key: K,
    now: u64,
) -> u64 {
    let entry = map.entry(key).or_insert(Counted {
        count: 0,
        touched_ms: now,
    });
    entry.count += 1;
    entry.touched_ms = now;
    entry.count
}
