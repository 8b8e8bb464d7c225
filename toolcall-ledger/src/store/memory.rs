//! [`MemoryStore`]: the default store, in this process's memory.

use std::hash::BuildHasher;
use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::result::ToolResult;
use crate::sync::lock;

mod approvals;
mod controls;
mod hasher;
mod shard;

pub use hasher::KeyHasher;
use hasher::Slot;
use shard::{Holder, Lock, Record, RecordState, Shard, Taint, count_in, recorded_in, trim_oldest};

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
    /// Held while an approval is asked for ([`QuestionStore::ask_approval`]): the
    /// look for the same call, the count of the session's open ones and
    /// the write are one step for every asker.
    asks: Mutex<()>,
    /// Whether any question was ever asked here: until one is, a call's
    /// start knows no conversation has a question without looking through
    /// every shard's approvals.
    any_asked: std::sync::atomic::AtomicBool,
    /// The operators' controls and their history ([`ControlStore::put_controls`]).
    controls: Mutex<controls::Controls>,
    /// The version of the controls kept (0: none): a call's start that
    /// knows it reads nothing else.
    controls_version: std::sync::atomic::AtomicU64,
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
            any_asked: std::sync::atomic::AtomicBool::new(false),
            controls: Mutex::default(),
            controls_version: std::sync::atomic::AtomicU64::new(0),
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
                    + shard.rates.len()
                    + shard.signatures.len()
            })
            .sum()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// What [`CallStore::begin_call`] asks of a key within the budgets, under
    /// its shard's lock: its count, what is recorded of it, and whether the
    /// resource's lock may be taken (the key neither completed nor held by
    /// a running claim).
    fn begin_key(&self, start: &CallStart<'_>, begun: &mut CallBegun) -> bool {
        let (mut shard, slot) = self.slot(start.key);
        let calls = if start.alone {
            1
        } else {
            count_in(&mut shard.calls, slot, start.now_ms)
        };
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
            .max(shard.rates.len())
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
        shard.rates.retain(|_, w| w.until_ms > now);
        // Signatures go with their approval.
        let Shard {
            signatures,
            approvals,
            ..
        } = shard;
        signatures.retain(|id, _| approvals.contains_key(id));
        let cap = self.capacity_per_shard;
        trim_oldest(&mut shard.steps, cap, |c| c.touched_ms);
        trim_oldest(&mut shard.calls, cap, |c| c.touched_ms);
        trim_oldest(&mut shard.records, cap, |r| r.touched_ms);
        trim_oldest(&mut shard.taint, cap, |t| t.touched_ms);
        trim_oldest(&mut shard.rates, cap, |w| w.until_ms);
    }
}

impl MemoryStore {
    /// A claim of `key` taken with its call's start
    /// ([`CallStart::claim`]): only if nothing is recorded of it.
    fn claim_free(&self, key: &Key, until_ms: u64, now_ms: u64) -> bool {
        let (mut shard, slot) = self.slot(key);
        if shard.records.contains_key(&slot) {
            return false;
        }
        shard.records.insert(
            slot,
            Record {
                state: RecordState::InFlight { until_ms },
                touched_ms: now_ms,
                question: None,
            },
        );
        self.maintain(&mut shard, now_ms);
        true
    }

    /// [`CallStore::claim`], keeping `question` with a claim it acquires.
    fn claim_keeping(&self, key: &Key, lease: Lease, question: Option<&PendingApproval>) -> Claim {
        let Lease { now_ms, lease_ms } = lease;
        let (mut shard, slot) = self.slot(key);
        let until_ms = now_ms.saturating_add(lease_ms);
        let kept = question.map(|question| Box::new((question.clone(), *key, now_ms)));
        match shard.records.get_mut(&slot) {
            Some(Record {
                state: RecordState::Completed(result),
                ..
            }) => return Claim::Completed(ToolResult::clone(result)),
            Some(Record {
                state: RecordState::InFlight { until_ms: held },
                ..
            }) if *held > now_ms => {
                return Claim::InFlight;
            }
            Some(Record {
                state: state @ RecordState::InFlight { .. },
                touched_ms,
                ..
            }) => {
                // Its holder's lease ran out with no outcome: in doubt.
                *state = RecordState::InDoubt;
                *touched_ms = now_ms;
                return Claim::Abandoned;
            }
            Some(record) => {
                record.state = RecordState::InFlight { until_ms };
                record.touched_ms = now_ms;
                record.question = kept;
            }
            None => {
                shard.records.insert(
                    slot,
                    Record {
                        state: RecordState::InFlight { until_ms },
                        touched_ms: now_ms,
                        question: kept,
                    },
                );
            }
        }
        self.maintain(&mut shard, now_ms);
        Claim::Acquired
    }
}

impl CallStore for MemoryStore {
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

    // In this process, a lock taken with the start saves no request.
    fn locks_at_start(&self) -> bool {
        false
    }

    async fn begin_call(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        if let Some(known) = start.controls
            && self.controls(known).await?.is_some()
        {
            return Ok(CallBegun {
                controls_moved: true,
                ..CallBegun::default()
            });
        }
        let mut begun = CallBegun::default();
        {
            let mut shard = self.shard(start.session);
            begun.step = match shard.steps.get_mut(start.session) {
                // A conversation of one call keeps no step.
                _ if start.alone => 1,
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
        if start.questions && !self.any_asked.load(std::sync::atomic::Ordering::SeqCst) {
            begun.questions = Some(false);
        }
        if begun.step > start.max_steps {
            return Ok(begun);
        }
        if self.begin_key(start, &mut begun)
            && let Some(lock) = start.lock
        {
            begun.locked = self.lock_resource(&lock, start.now_ms).await?;
        }
        // What the start read of the key (a replay, a claim held, a doubt)
        // leaves it unclaimed without looking again.
        if let Some(until_ms) = start.claim
            && begun.outcome.is_none()
            && begun.calls.is_some_and(|calls| calls <= start.max_calls)
            && (start.lock.is_none() || begun.locked)
            && (!start.taint || begun.tainted == Some(false))
            && (!start.questions || begun.questions == Some(false))
        {
            begun.claimed = self.claim_free(start.key, until_ms, start.now_ms);
        }
        Ok(begun)
    }

    async fn complete_unlocking(&self, done: &Completion<'_>) -> Result<bool, StoreError> {
        self.complete(done.key, done.result).await?;
        self.unlock_resource(done.resource, done.holder).await?;
        Ok(true)
    }

    async fn claim(&self, key: &Key, lease: Lease) -> Result<Claim, StoreError> {
        Ok(self.claim_keeping(key, lease, None))
    }

    async fn claim_asking(
        &self,
        key: &Key,
        asking: &QuestionLease<'_>,
    ) -> Result<Claim, StoreError> {
        Ok(self.claim_keeping(key, asking.lease, Some(asking.question)))
    }

    async fn unsettled(&self, now_ms: u64, limit: usize) -> Result<Vec<Unsettled>, StoreError> {
        let mut found: Vec<(u64, Unsettled)> = Vec::new();
        for shard in self.shards.iter() {
            let shard = lock(shard);
            for record in shard.records.values() {
                let unknown = match record.state {
                    RecordState::InDoubt => true,
                    RecordState::InFlight { until_ms } => until_ms <= now_ms,
                    RecordState::Completed(_) => false,
                };
                if let (true, Some(kept)) = (unknown, &record.question) {
                    let (question, key, asked_ms) = &**kept;
                    found.push((
                        *asked_ms,
                        Unsettled {
                            key: *key,
                            question: question.clone(),
                        },
                    ));
                }
            }
        }
        found.sort_by(|a, b| (a.0, a.1.key.as_str()).cmp(&(b.0, b.1.key.as_str())));
        found.truncate(limit);
        Ok(found.into_iter().map(|(_, unsettled)| unsettled).collect())
    }

    async fn complete(&self, key: &Key, result: &ToolResult) -> Result<(), StoreError> {
        let now = now_ms();
        let (mut shard, slot) = self.slot(key);
        shard.records.insert(
            slot,
            Record {
                state: RecordState::Completed(Box::new(result.clone())),
                touched_ms: now,
                question: None,
            },
        );
        Ok(())
    }

    async fn renew(&self, key: &Key, lease: Lease) -> Result<bool, StoreError> {
        let Lease { now_ms, lease_ms } = lease;
        let (mut shard, slot) = self.slot(key);
        match shard.records.get_mut(&slot) {
            Some(Record {
                state: RecordState::InFlight { until_ms },
                touched_ms,
                ..
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
                        question: None,
                    },
                );
            }
        }
        Ok(())
    }
}

impl LockStore for MemoryStore {
    async fn lock_resource(&self, lock: &LockAsk<'_>, now_ms: u64) -> Result<bool, StoreError> {
        let (resource, holder, lease_ms) = (lock.resource, lock.holder, lock.lease_ms);
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

impl TaintStore for MemoryStore {
    async fn add_taint(&self, seen: &Exposure<'_>) -> Result<(), StoreError> {
        let (session, fingerprints, source) = (seen.session, seen.fingerprints, seen.source);
        let now = now_ms();
        let mut shard = self.shard(session);
        let taint = shard.taint.entry(session.to_owned()).or_insert(Taint {
            prints: Default::default(),
            sources: Vec::new(),
            touched_ms: now,
        });
        taint.prints.extend(fingerprints.iter().cloned());
        crate::provenance::keep(&mut taint.sources, source);
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

    async fn taint_sources(&self, session: &str) -> Result<Vec<TaintSource>, StoreError> {
        let shard = self.shard(session);
        Ok(shard
            .taint
            .get(session)
            .map(|taint| taint.sources.clone())
            .unwrap_or_default())
    }
}

impl ControlStore for MemoryStore {
    async fn controls(&self, known: u64) -> Result<Option<StoredControls>, StoreError> {
        Ok(self.read_controls(known))
    }

    async fn put_controls(&self, write: &ControlsWrite<'_>) -> Result<bool, StoreError> {
        Ok(self.write_controls(write))
    }

    async fn controls_history(&self, limit: usize) -> Result<Vec<ControlsChange>, StoreError> {
        Ok(self.controls_changes(limit))
    }

    async fn take_rate(&self, window: &RateWindow<'_>, limit: u64) -> Result<bool, StoreError> {
        Ok(self.take_in_window(window, limit))
    }

    async fn rate_count(&self, bucket: &str, window_start_ms: u64) -> Result<u64, StoreError> {
        Ok(self.count_in_window(bucket, window_start_ms))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod hasher_tests;
