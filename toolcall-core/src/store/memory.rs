//! [`MemoryStore`]: the default store, in this process's memory.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::audit::lock;
use crate::result::ToolResult;

const SHARDS: usize = 16;

/// The default store: in this process's memory, sharded so that concurrent
/// conversations rarely share a lock, and bounded: entries untouched for
/// longer than the retention window are dropped, and each kind of entry is
/// capped, the oldest dropped first.
///
/// Dropping a completed record means an identical call after that runs
/// again, under the same idempotency key: a backend that deduplicates by key
/// still applies it once.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: KeyHasher,
    retention_ms: u64,
    capacity_per_shard: usize,
    /// Held while an approval is asked for ([`Store::ask_approval`]): the
    /// look for the same call, the count of the session's open ones and
    /// the write are one step for every asker.
    asks: Mutex<()>,
    /// Whether any approval held a person's decision: until one does, a
    /// call's start knows no session has a decided approval without
    /// looking through every shard's approvals.
    any_decided: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
struct Shard {
    steps: HashMap<String, Counted>,
    calls: HashMap<Slot, Counted, KeyHasher>,
    records: HashMap<Slot, Record, KeyHasher>,
    approvals: HashMap<String, ApprovalEntry>,
    locks: HashMap<Slot, Lock, KeyHasher>,
    taint: HashMap<String, Taint>,
    writes: u64,
}

/// What one session's untrusted output left: the fingerprints of its values.
#[derive(Debug)]
struct Taint {
    prints: std::collections::HashSet<String>,
    touched_ms: u64,
}

#[derive(Debug)]
struct Lock {
    holder: Holder,
    until_ms: u64,
}

/// Who holds a lock, as the text it was given: inline when short (the
/// dispatcher's tokens are 49 bytes), so that taking a lock allocates
/// nothing; on the heap otherwise.
#[derive(Debug)]
enum Holder {
    Inline {
        len: u8,
        bytes: [u8; Holder::INLINE],
    },
    Heap(Box<str>),
}

impl Holder {
    const INLINE: usize = 56;

    fn of(text: &str) -> Holder {
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

    fn is(&self, text: &str) -> bool {
        match self {
            Holder::Inline { len, bytes } => &bytes[..usize::from(*len)] == text.as_bytes(),
            Holder::Heap(held) => **held == *text,
        }
    }
}

#[derive(Debug)]
struct Counted {
    count: u64,
    touched_ms: u64,
}

#[derive(Debug)]
struct Record {
    state: RecordState,
    touched_ms: u64,
}

#[derive(Debug)]
enum RecordState {
    InFlight { until_ms: u64 },
    Completed(ToolResult),
    InDoubt,
}

/// A key of the maps of calls, records and resource locks: the [`Key`]'s
/// 32 bytes, hashed as one write (the digest is already uniform).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot([u8; 32]);

impl Slot {
    fn of(key: &Key) -> Slot {
        Slot(*key.digest())
    }
}

impl Hash for Slot {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(&self.0);
    }
}

/// The hash of the maps keyed by idempotency and resource keys, of the
/// shard choice, and of the dispatcher's count of identical calls in
/// flight: SHA-256 digests the dispatcher computed, so a few
/// multiplications by a key drawn per map spread them as well as SipHash
/// does, at a fraction of its cost. Whoever picks a call's arguments cannot
/// aim at a bucket without the seed.
#[derive(Clone, Debug)]
pub(crate) struct KeyHasher {
    seed: u64,
}

impl KeyHasher {
    fn new() -> Self {
        use std::hash::BuildHasher as _;
        // The standard library's random keys, drawn once per store.
        KeyHasher {
            seed: std::collections::hash_map::RandomState::new().hash_one(0x746f_6f6c_u64) | 1,
        }
    }
}

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher::new()
    }
}

impl BuildHasher for KeyHasher {
    type Hasher = Folded;

    fn build_hasher(&self) -> Folded {
        Folded(self.seed)
    }
}

/// [`KeyHasher`]'s state: the bytes folded eight at a time.
pub(crate) struct Folded(u64);

impl std::hash::Hasher for Folded {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            self.0 = (self.0 ^ word).wrapping_mul(K).rotate_left(29);
        }
        for &byte in chunks.remainder() {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(K).rotate_left(29);
        }
        // The length too: a word of zeros folds as one zero byte does.
        self.0 = (self.0 ^ bytes.len() as u64)
            .wrapping_mul(K)
            .rotate_left(29);
    }

    fn finish(&self) -> u64 {
        // A last mix so the high bits (hashbrown's tags) depend on every byte.
        let h = self.0 ^ (self.0 >> 32);
        h.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ (h >> 29)
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(Duration::from_secs(24 * 60 * 60), 1_000_000)
    }
}

impl MemoryStore {
    /// A store that keeps entries for `retention` after their last use, and
    /// at most about `capacity` entries of each kind.
    pub fn new(retention: Duration, capacity: usize) -> Self {
        MemoryStore {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: KeyHasher::new(),
            retention_ms: u64::try_from(retention.as_millis()).unwrap_or(u64::MAX),
            capacity_per_shard: capacity.div_ceil(SHARDS).max(1),
            asks: Mutex::new(()),
            any_decided: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn shard(&self, key: &str) -> std::sync::MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_of(key)])
    }

    /// The shard of a key of calls, records or locks, and its slot there.
    fn slot(&self, key: &Key) -> (std::sync::MutexGuard<'_, Shard>, Slot) {
        let slot = Slot::of(key);
        (lock(&self.shards[self.shard_of_slot(&slot)]), slot)
    }

    /// As [`shard_of`](Self::shard_of), for the maps keyed by [`Slot`].
    fn shard_of_slot(&self, slot: &Slot) -> usize {
        ((self.hasher.hash_one(slot) >> 32) as usize) % SHARDS
    }

    /// Bits 32 and up: the shard's own map places a key by the low bits
    /// of the same hash and tags it with the top seven, so a shard taken
    /// from either would leave its map one sixteenth of its places, or of
    /// its tags.
    fn shard_of(&self, key: &str) -> usize {
        ((self.hasher.hash_one(key) >> 32) as usize) % SHARDS
    }

    /// How many entries the store holds, of every kind: for tests and metrics.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let shard = lock(shard);
                shard.steps.len()
                    + shard.calls.len()
                    + shard.records.len()
                    + shard.approvals.len()
                    + shard.locks.len()
                    + shard.taint.len()
            })
            .sum()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The approvals `keep` admits, of every shard, cloned (one shard
    /// locked at a time).
    fn approvals_where(&self, keep: impl Fn(&ApprovalEntry) -> bool) -> Vec<ApprovalEntry> {
        self.shards
            .iter()
            .flat_map(|shard| {
                lock(shard)
                    .approvals
                    .values()
                    .filter(|entry| keep(entry))
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Keeps `approval` as given, unused.
    fn insert_approval(&self, approval: &PendingApproval) {
        if approval.decision.is_some() {
            self.note_decided();
        }
        let now = now_ms();
        let mut shard = self.shard(&approval.id);
        shard.approvals.insert(
            approval.id.clone(),
            ApprovalEntry {
                approval: approval.clone(),
                used_ms: None,
                result: None,
            },
        );
        self.maintain(&mut shard, now);
    }

    /// Notes that an approval holds a person's decision (before the
    /// decision is written, so that no call's start misses it).
    fn note_decided(&self) {
        self.any_decided
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// What [`Store::begin_call`] asks of a key within the budgets, under
    /// its shard's lock: its count, what is recorded of it, and whether the
    /// resource's lock may be taken (the key neither completed nor held by
    /// a running claim).
    fn begin_key(&self, start: &CallStart<'_>, begun: &mut CallBegun) -> bool {
        let (mut shard, slot) = self.slot(start.key);
        let calls = count_in(&mut shard.calls, slot, start.now_ms);
        begun.calls = Some(calls);
        let mut may_lock = false;
        // What is recorded of the key is read only for a side effect's
        // start (a read-only call asks for neither).
        if calls <= start.max_calls && (start.outcome || start.lock.is_some()) {
            let recorded = recorded_in(&shard, &slot, start.now_ms);
            may_lock = !matches!(
                recorded,
                Some(RecordedOutcome::Completed(_) | RecordedOutcome::InFlight)
            );
            if start.outcome {
                begun.outcome = recorded;
            }
        }
        self.maintain(&mut shard, start.now_ms);
        may_lock
    }

    /// After a write, now and then, drop what is too old or too much.
    fn maintain(&self, shard: &mut Shard, now: u64) {
        shard.writes += 1;
        let over = shard
            .steps
            .len()
            .max(shard.calls.len())
            .max(shard.records.len())
            .max(shard.taint.len())
            > self.capacity_per_shard;
        if !over && !shard.writes.is_multiple_of(4096) {
            return;
        }
        let cutoff = now.saturating_sub(self.retention_ms);
        shard.steps.retain(|_, c| c.touched_ms >= cutoff);
        shard.calls.retain(|_, c| c.touched_ms >= cutoff);
        shard.records.retain(|_, r| r.touched_ms >= cutoff);
        shard.taint.retain(|_, t| t.touched_ms >= cutoff);
        // Undecided approvals go at their expiry; decided ones stay in the
        // history for the retention window after it.
        shard.approvals.retain(|_, a| {
            a.approval.expires_ms >= now
                || (a.approval.decision.is_some() && a.approval.expires_ms >= cutoff)
        });
        shard.locks.retain(|_, l| l.until_ms > now);
        let cap = self.capacity_per_shard;
        trim_oldest(&mut shard.steps, cap, |c| c.touched_ms);
        trim_oldest(&mut shard.calls, cap, |c| c.touched_ms);
        trim_oldest(&mut shard.records, cap, |r| r.touched_ms);
        trim_oldest(&mut shard.taint, cap, |t| t.touched_ms);
    }
}

/// Drops the oldest entries until a tenth under `cap`, so trimming is rare.
fn trim_oldest<K, V, H: BuildHasher>(
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

/// Whether two approvals were asked for the same call: the same session,
/// caller, tool, digest and reason.
fn same_call(a: &PendingApproval, b: &PendingApproval) -> bool {
    a.session == b.session
        && a.caller == b.caller
        && a.tool == b.tool
        && a.digest == b.digest
        && a.reason == b.reason
}

/// What `shard` recorded of the key in `slot`, as [`Store::outcome`] says it.
fn recorded_in(shard: &Shard, slot: &Slot, now_ms: u64) -> Option<RecordedOutcome> {
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

fn count_in<K: Hash + Eq, H: BuildHasher>(
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

impl Store for MemoryStore {
    async fn next_step(&self, session: &str, now: u64) -> Result<u64, StoreError> {
        let mut shard = self.shard(session);
        let count = match shard.steps.get_mut(session) {
            Some(counted) => {
                counted.count += 1;
                counted.touched_ms = now;
                counted.count
            }
            None => count_in(&mut shard.steps, session.to_owned(), now),
        };
        self.maintain(&mut shard, now);
        Ok(count)
    }

    async fn peek_step(&self, session: &str) -> Result<u64, StoreError> {
        let shard = self.shard(session);
        Ok(shard.steps.get(session).map_or(0, |c| c.count))
    }

    async fn add_taint(&self, session: &str, fingerprints: &[String]) -> Result<(), StoreError> {
        let now = now_ms();
        let mut shard = self.shard(session);
        let taint = shard.taint.entry(session.to_owned()).or_insert(Taint {
            prints: Default::default(),
            touched_ms: now,
        });
        taint.prints.extend(fingerprints.iter().cloned());
        taint.touched_ms = now;
        self.maintain(&mut shard, now);
        Ok(())
    }

    async fn tainted(
        &self,
        session: &str,
        fingerprints: &[String],
    ) -> Result<TaintHit, StoreError> {
        let shard = self.shard(session);
        Ok(match shard.taint.get(session) {
            None => TaintHit::default(),
            Some(taint) => TaintHit {
                any: true,
                seen: fingerprints
                    .iter()
                    .filter(|print| taint.prints.contains(*print))
                    .cloned()
                    .collect(),
            },
        })
    }

    async fn count_call(&self, key: &Key, now: u64) -> Result<u64, StoreError> {
        let (mut shard, slot) = self.slot(key);
        let count = count_in(&mut shard.calls, slot, now);
        self.maintain(&mut shard, now);
        Ok(count)
    }

    async fn uncount_call(&self, key: &Key) -> Result<(), StoreError> {
        let (mut shard, slot) = self.slot(key);
        if let Some(entry) = shard.calls.get_mut(&slot) {
            entry.count = entry.count.saturating_sub(1);
        }
        Ok(())
    }

    async fn outcome(&self, key: &Key) -> Result<Option<RecordedOutcome>, StoreError> {
        let (shard, slot) = self.slot(key);
        Ok(recorded_in(&shard, &slot, now_ms()))
    }

    async fn begin_call(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        let mut begun = CallBegun::default();
        {
            let mut shard = self.shard(start.session);
            begun.step = match shard.steps.get_mut(start.session) {
                Some(counted) => {
                    counted.count += 1;
                    counted.touched_ms = start.now_ms;
                    counted.count
                }
                None => count_in(&mut shard.steps, start.session.to_owned(), start.now_ms),
            };
            if start.taint {
                begun.tainted = Some(shard.taint.contains_key(start.session));
            }
            self.maintain(&mut shard, start.now_ms);
        }
        if start.decided && !self.any_decided.load(std::sync::atomic::Ordering::SeqCst) {
            begun.decided = Some(false);
        }
        if begun.step > start.max_steps {
            return Ok(begun);
        }
        if self.begin_key(start, &mut begun)
            && let Some(lock) = start.lock
        {
            begun.locked = self
                .lock_resource(lock.resource, lock.holder, start.now_ms, lock.lease_ms)
                .await?;
        }
        Ok(begun)
    }

    async fn complete_unlocking(
        &self,
        key: &Key,
        result: &ToolResult,
        resource: &Key,
        holder: &str,
    ) -> Result<bool, StoreError> {
        self.complete(key, result).await?;
        self.unlock_resource(resource, holder).await?;
        Ok(true)
    }

    async fn claim(&self, key: &Key, now_ms: u64, lease_ms: u64) -> Result<Claim, StoreError> {
        let (mut shard, slot) = self.slot(key);
        let until_ms = now_ms.saturating_add(lease_ms);
        match shard.records.get_mut(&slot) {
            Some(Record {
                state: RecordState::Completed(result),
                ..
            }) => return Ok(Claim::Completed(result.clone())),
            Some(Record {
                state: RecordState::InFlight { until_ms: held },
                ..
            }) if *held > now_ms => {
                return Ok(Claim::InFlight);
            }
            Some(Record {
                state: state @ RecordState::InFlight { .. },
                touched_ms,
            }) => {
                // Its holder's lease ran out with no outcome: in doubt.
                *state = RecordState::InDoubt;
                *touched_ms = now_ms;
                return Ok(Claim::Abandoned);
            }
            Some(record) => {
                record.state = RecordState::InFlight { until_ms };
                record.touched_ms = now_ms;
            }
            None => {
                shard.records.insert(
                    slot,
                    Record {
                        state: RecordState::InFlight { until_ms },
                        touched_ms: now_ms,
                    },
                );
            }
        }
        self.maintain(&mut shard, now_ms);
        Ok(Claim::Acquired)
    }

    async fn complete(&self, key: &Key, result: &ToolResult) -> Result<(), StoreError> {
        let now = now_ms();
        let (mut shard, slot) = self.slot(key);
        shard.records.insert(
            slot,
            Record {
                state: RecordState::Completed(result.clone()),
                touched_ms: now,
            },
        );
        Ok(())
    }

    async fn renew(&self, key: &Key, now_ms: u64, lease_ms: u64) -> Result<bool, StoreError> {
        let (mut shard, slot) = self.slot(key);
        match shard.records.get_mut(&slot) {
            Some(Record {
                state: RecordState::InFlight { until_ms },
                touched_ms,
            }) => {
                *until_ms = now_ms.saturating_add(lease_ms);
                *touched_ms = now_ms;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(&self, key: &Key) -> Result<(), StoreError> {
        let (mut shard, slot) = self.slot(key);
        if let Some(Record {
            state: RecordState::InFlight { .. },
            ..
        }) = shard.records.get(&slot)
        {
            shard.records.remove(&slot);
        }
        Ok(())
    }

    async fn doubt(&self, key: &Key) -> Result<(), StoreError> {
        let now = now_ms();
        let (mut shard, slot) = self.slot(key);
        match shard.records.get_mut(&slot) {
            Some(Record {
                state: RecordState::Completed(_),
                ..
            }) => {}
            Some(record) => {
                record.state = RecordState::InDoubt;
                record.touched_ms = now;
            }
            None => {
                shard.records.insert(
                    slot,
                    Record {
                        state: RecordState::InDoubt,
                        touched_ms: now,
                    },
                );
            }
        }
        Ok(())
    }

    async fn put_approval(&self, approval: &PendingApproval) -> Result<(), StoreError> {
        self.insert_approval(approval);
        Ok(())
    }

    async fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> Result<TakeApproval, StoreError> {
        let mut shard = self.shard(id);
        let Some(entry) = shard.approvals.get_mut(id) else {
            return Ok(TakeApproval::Invalid);
        };
        if entry.used_ms.is_some() || !binding.matches(&entry.approval) {
            return Ok(TakeApproval::Invalid);
        }
        let expired = entry.approval.expires_ms <= now_ms;
        let taken = if entry.approval.decision.is_some() {
            // Kept for the history, used up.
            entry.used_ms = Some(now_ms);
            entry.approval.clone()
        } else {
            shard
                .approvals
                .remove(id)
                .expect("present: looked up above under the same lock")
                .approval
        };
        Ok(if expired {
            TakeApproval::Expired
        } else {
            TakeApproval::Taken(taken)
        })
    }

    async fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        let mut open: Vec<PendingApproval> = self
            .shards
            .iter()
            .flat_map(|shard| {
                lock(shard)
                    .approvals
                    .values()
                    .filter(|entry| entry.is_open(now_ms))
                    .map(|entry| entry.approval.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        open.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        open.truncate(limit);
        Ok(open)
    }

    async fn ask_approval(
        &self,
        approval: &PendingApproval,
        max_open: usize,
    ) -> Result<AskApproval, StoreError> {
        let _asking = lock(&self.asks);
        let at = approval.created_ms;
        let mut existing: Option<ApprovalEntry> = None;
        let mut open = 0usize;
        for shard in self.shards.iter() {
            for entry in lock(shard).approvals.values() {
                let a = &entry.approval;
                if a.session != approval.session {
                    continue;
                }
                if entry.is_open(at) {
                    open += 1;
                }
                if same_call(a, approval)
                    && entry.used_ms.is_none()
                    && a.expires_ms > at
                    && existing.as_ref().is_none_or(|e| {
                        (a.created_ms, &a.id) > (e.approval.created_ms, &e.approval.id)
                    })
                {
                    existing = Some(entry.clone());
                }
            }
        }
        if let Some(entry) = existing {
            return Ok(AskApproval::Existing(entry));
        }
        if open >= max_open {
            return Ok(AskApproval::Full { open });
        }
        self.insert_approval(approval);
        Ok(AskApproval::Created)
    }

    async fn find_approval(
        &self,
        binding: &Binding<'_>,
        reason: Option<&str>,
        now_ms: u64,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        Ok(self
            .approvals_where(|entry| {
                binding.matches(&entry.approval)
                    && entry.approval.reason.as_deref() == reason
                    && entry.used_ms.is_none()
                    && entry.approval.expires_ms > now_ms
            })
            .into_iter()
            .max_by(|a, b| {
                (a.approval.created_ms, &a.approval.id)
                    .cmp(&(b.approval.created_ms, &b.approval.id))
            }))
    }

    async fn pending_page(&self, query: &PendingQuery<'_>) -> Result<PendingPage, StoreError> {
        let mut open: Vec<PendingApproval> = self
            .approvals_where(|entry| query.admits(entry))
            .into_iter()
            .map(|entry| entry.approval)
            .collect();
        let total = open.len() as u64;
        open.retain(|a| query.after_cursor(a));
        open.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        if query.order == PendingOrder::NewestFirst {
            open.reverse();
        }
        let more = open.len() > query.limit;
        open.truncate(query.limit);
        let next = match open.last() {
            Some(last) if more => Some(PendingCursor::after(last).to_string()),
            _ => None,
        };
        Ok(PendingPage {
            items: open,
            total,
            next,
        })
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> Result<DecideOutcome, StoreError> {
        let mut shard = self.shard(id);
        let Some(entry) = shard.approvals.get_mut(id) else {
            return Ok(DecideOutcome::Invalid);
        };
        Ok(
            if entry.approval.decision.is_some() || entry.used_ms.is_some() {
                DecideOutcome::AlreadyDecided
            } else if entry.approval.expires_ms <= now_ms {
                DecideOutcome::Expired
            } else {
                self.note_decided();
                entry.approval.decision = Some(decision.clone());
                DecideOutcome::Decided
            },
        )
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
        Ok(self.shard(id).approvals.get(id).cloned())
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        let mut decided: Vec<ApprovalEntry> = self
            .shards
            .iter()
            .flat_map(|shard| {
                lock(shard)
                    .approvals
                    .values()
                    .filter(|entry| entry.approval.decision.is_some())
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect();
        decided.sort_by_key(|entry| {
            let decided_ms = entry.approval.decision.as_ref().map_or(0, |d| d.decided_ms);
            (std::cmp::Reverse(decided_ms), entry.approval.id.clone())
        });
        decided.truncate(limit);
        Ok(decided)
    }

    async fn settle_approval(&self, id: &str, result: &ApprovalResult) -> Result<(), StoreError> {
        let mut shard = self.shard(id);
        if let Some(entry) = shard.approvals.get_mut(id)
            && entry.approval.decision.is_some()
        {
            entry.result = Some(result.clone());
        }
        Ok(())
    }

    async fn lock_resource(
        &self,
        resource: &Key,
        holder: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        let (mut shard, slot) = self.slot(resource);
        let until_ms = now_ms.saturating_add(lease_ms);
        match shard.locks.get_mut(&slot) {
            Some(lock) if !lock.holder.is(holder) && lock.until_ms > now_ms => return Ok(false),
            Some(lock) => {
                if !lock.holder.is(holder) {
                    lock.holder = Holder::of(holder);
                }
                lock.until_ms = until_ms;
            }
            None => {
                shard.locks.insert(
                    slot,
                    Lock {
                        holder: Holder::of(holder),
                        until_ms,
                    },
                );
            }
        }
        self.maintain(&mut shard, now_ms);
        Ok(true)
    }

    async fn unlock_resource(&self, resource: &Key, holder: &str) -> Result<(), StoreError> {
        let (mut shard, slot) = self.slot(resource);
        if shard.locks.get(&slot).is_some_and(|l| l.holder.is(holder)) {
            shard.locks.remove(&slot);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn a_call_start_says_no_approval_is_decided_only_until_a_person_decides_one() {
        block_on(async {
            let store = MemoryStore::default();
            let key = Key::sha256("call");
            let mut start = CallStart::new("s", &key, 1, 100);
            start.decided = true;
            let begun = store.begin_call(&start).await.unwrap();
            assert_eq!(begun.decided, Some(false), "nothing decided yet");
            let question = |id: &str, decision| PendingApproval {
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
            };
            store.put_approval(&question("a", None)).await.unwrap();
            let begun = store.begin_call(&start).await.unwrap();
            assert_eq!(begun.decided, Some(false), "asked, not decided");
            let yes = ApprovalDecision {
                approved: true,
                by: "p".into(),
                note: String::new(),
                edited_arguments: None,
                decided_ms: 2,
            };
            assert_eq!(
                store.decide_approval("a", &yes, 2).await.unwrap(),
                DecideOutcome::Decided
            );
            let begun = store.begin_call(&start).await.unwrap();
            assert_eq!(begun.decided, None, "a decision exists: the caller looks");

            // An approval stored with its decision counts too.
            let other = MemoryStore::default();
            other.put_approval(&question("b", Some(yes))).await.unwrap();
            let begun = other.begin_call(&start).await.unwrap();
            assert_eq!(begun.decided, None);
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
                    .lock_resource(&resource, holder, at, 60_000)
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
                    .lock_resource(&resource, &longer, later, 1_000)
                    .await
                    .unwrap()
            );
            assert!(
                !store
                    .lock_resource(&resource, empty, later, 1_000)
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
}

#[cfg(test)]
mod hasher_tests {
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    use super::{Key, KeyHasher, Slot};

    fn hex_key(i: u64) -> String {
        crate::canonical::idempotency_key("s", "t", &serde_json::Value::from(i))
    }

    fn key(hex: &str) -> Key {
        hex.parse().expect("a key's text")
    }

    #[test]
    fn every_byte_and_the_length_count() {
        let hasher = KeyHasher::new();
        let base = hex_key(0);
        let mut seen = HashSet::new();
        assert!(seen.insert(hasher.hash_one(&base)));
        // One digit changed at each of the 64 places.
        for at in 0..base.len() {
            let mut changed = base.clone().into_bytes();
            changed[at] = if changed[at] == b'0' { b'1' } else { b'0' };
            let changed = String::from_utf8(changed).expect("hex");
            assert!(seen.insert(hasher.hash_one(&changed)), "digit {at}");
        }
        // Trailing zero bytes and every length up to two blocks.
        let zeros = "\0".repeat(70);
        for len in 0..=zeros.len() {
            assert!(seen.insert(hasher.hash_one(&zeros[..len])), "{len} zeros");
        }
    }

    #[test]
    fn the_keys_of_one_shard_still_spread_over_its_maps_places_and_tags() {
        // A shard's map places keys by the low bits of the same hash and
        // tags them with the top seven: neither may be what picks the shard.
        let store = super::MemoryStore::default();
        let mut low = vec![HashSet::new(); super::SHARDS];
        let mut top = vec![HashSet::new(); super::SHARDS];
        for i in 0..4_000 {
            let key = hex_key(i);
            // Sessions pick shards by their text, keys of calls by their slot.
            for (hash, shard) in [
                (store.hasher.hash_one(&key), store.shard_of(&key)),
                (
                    store.hasher.hash_one(Slot::of(&self::key(&key))),
                    store.shard_of_slot(&Slot::of(&self::key(&key))),
                ),
            ] {
                low[shard].insert(hash & 15);
                top[shard].insert(hash >> 57);
            }
        }
        // About 250 keys a shard: all 16 low values and about 110 of the 128
        // tags turn up (the hash is seeded anew each run, so the bounds sit
        // far below that); a shard picked by either would show 1, or 8.
        for shard in 0..super::SHARDS {
            assert!(
                low[shard].len() >= 12,
                "shard {shard}: low bits {:?}",
                low[shard]
            );
            assert!(
                top[shard].len() > 64,
                "shard {shard}: {} tags",
                top[shard].len()
            );
        }
    }

    #[test]
    fn keys_spread_over_buckets_and_tags() {
        let hasher = KeyHasher::new();
        let (mut buckets, mut tags) = (vec![0u32; 1024], vec![0u32; 128]);
        for i in 0..20_000 {
            let h = hasher.hash_one(hex_key(i));
            buckets[(h & 1023) as usize] += 1;
            tags[(h >> 57) as usize] += 1;
        }
        // About 19.5 per bucket and 156 per tag; a poor hash piles them up.
        assert!(
            buckets.iter().all(|&n| n < 50),
            "{:?}",
            buckets.iter().max()
        );
        assert!(tags.iter().all(|&n| n > 80 && n < 260), "{tags:?}");
    }
}
