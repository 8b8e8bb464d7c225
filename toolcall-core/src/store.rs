//! What the pipeline remembers between calls: step counts, duplicate counts,
//! idempotency records (in flight, completed, or of unknown outcome) and
//! pending approvals.
//!
//! [`Store`] is the contract; [`MemoryStore`] keeps it in this process,
//! bounded in time and size. Durable stores implement the same trait with the
//! same semantics, so that a restarted process, or another replica, replays
//! what was done before instead of doing it again.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::lock;
use crate::result::ToolResult;

/// What the store knows of a key's call beyond "nothing yet".
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // returned once per call, never stored
#[non_exhaustive]
pub enum Outcome {
    /// The call completed: its stored result is the answer to every
    /// identical call from then on.
    Completed(ToolResult),
    /// The call's last attempt failed in a way that leaves its effect
    /// unknown (a lost response, a timeout): it may or may not have happened.
    /// The next identical call runs it again under the same key (a backend
    /// that deduplicates by key applies it once) or asks the tool's
    /// `reconcile` function what happened.
    InDoubt,
}

/// What a claim on an idempotency key found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Claim {
    /// The caller now holds the key and must execute, then
    /// [`complete`](Store::complete) or [`release`](Store::release) it.
    Acquired,
    /// The call was completed before: its stored result.
    Completed(ToolResult),
    /// Another caller holds the key and its lease has not run out.
    InFlight,
}

/// An approval a person has not given yet, bound to one exact call. Stores
/// keep it as it is and give it back whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The confirmation id handed to the host.
    pub id: String,
    /// The conversation of the call.
    pub session: String,
    /// The caller's id.
    pub caller: String,
    /// The tool.
    pub tool: String,
    /// Hex SHA-256 of the canonical validated arguments.
    pub digest: String,
    /// The validated arguments, as shown to the person.
    pub arguments: Value,
    /// The session's step count when the call asked for approval.
    pub step: u64,
    /// When it was asked for, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it stops being valid, in milliseconds since the Unix epoch.
    pub expires_ms: u64,
}

/// What an approval must match to be used.
#[derive(Clone, Copy, Debug)]
pub struct Binding<'a> {
    /// The session of the call being approved.
    pub session: &'a str,
    /// The caller's id.
    pub caller: &'a str,
    /// The tool, when the host names it.
    pub tool: Option<&'a str>,
    /// The digest of the arguments, when the call brings its own.
    pub digest: Option<&'a str>,
}

impl Binding<'_> {
    /// Whether `approval` was asked for this exact call.
    pub fn matches(&self, approval: &PendingApproval) -> bool {
        approval.session == self.session
            && approval.caller == self.caller
            && self.tool.is_none_or(|tool| tool == approval.tool)
            && self.digest.is_none_or(|digest| digest == approval.digest)
    }
}

/// What taking an approval found.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // returned once per decision, never stored
#[non_exhaustive]
pub enum TakeApproval {
    /// It matched, and is now used up.
    Taken(PendingApproval),
    /// It existed but ran out of time; it is gone now.
    Expired,
    /// No such approval, already used, or asked for another call. Nothing
    /// was changed.
    Invalid,
}

/// A store could not be reached or answered nonsense.
#[derive(Debug)]
pub struct StoreError(Box<dyn std::error::Error + Send + Sync>);

impl StoreError {
    /// Wraps the store's own error.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        StoreError(error.into())
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "store unavailable: {}", self.0)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// Everything the pipeline remembers, behind one contract.
///
/// Keys are idempotency keys (they already contain the session). Every
/// method is one atomic step: two callers racing on one key see one winner.
/// Times are wall-clock milliseconds since the Unix epoch, so that records
/// mean the same to every process that shares a store.
///
/// # The states of a key
///
/// | state | how it gets there | what an identical call does |
/// |---|---|---|
/// | free | never claimed, [`release`](Store::release)d, or purged | runs the whole pipeline |
/// | claimed | [`claim`](Store::claim), kept alive by [`renew`](Store::renew) | waits for it, then replays its result (or `CALL_IN_PROGRESS`) |
/// | completed | [`complete`](Store::complete) | is answered with the stored result, `replayed: true` |
/// | in doubt | [`doubt`](Store::doubt): the last attempt's outcome is unknown | runs again under the same key, skipping the check, the policy and the approval it already passed |
///
/// A claim whose lease ran out (its holder died) is free to claim again.
///
/// Resource locks ([`lock_resource`](Store::lock_resource)) are a separate
/// namespace: they order calls on one resource (an order, an account)
/// across every process that shares the store.
pub trait Store: Send + Sync + 'static {
    /// Counts one step of `session` and returns the new count. A session id
    /// can be long (the host chooses it): a store that indexes it should
    /// index [`session_key`] of it instead.
    fn next_step(&self, session: &str) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Counts one more call with `key` and returns the new count.
    fn count_call(&self, key: &str) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Takes back one count of `key` (never below zero): the call was
    /// answered `CONFIRMATION_REQUIRED`, which is a question to a person, not
    /// a repetition by the model.
    fn uncount_call(&self, key: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What is known of the call with `key`: completed (with its result), in
    /// doubt, or nothing (`None`: free or claimed).
    fn outcome(&self, key: &str)
    -> impl Future<Output = Result<Option<Outcome>, StoreError>> + Send;

    /// Tries to take `key` for execution until `now_ms + lease_ms`. A key
    /// that is free, in doubt, or whose lease ran out is acquired.
    fn claim(
        &self,
        key: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// Extends the claim on `key` to `now_ms + lease_ms`, while its call is
    /// still running. `false` if the key is no longer claimed (it completed,
    /// or was released).
    fn renew(
        &self,
        key: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Stores the result of the call holding `key` and frees the claim.
    fn complete(
        &self,
        key: &str,
        result: &ToolResult,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Frees the claim on `key` without a result: the call did not run. The
    /// next identical call may claim it again. A completed or in-doubt key is
    /// left as it is.
    fn release(&self, key: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Frees the claim on `key` and remembers the call as in doubt: it ran,
    /// and whether it took effect is unknown. Durable like a completion.
    fn doubt(&self, key: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Keeps an approval until it is taken or expires.
    fn put_approval(
        &self,
        approval: &PendingApproval,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Uses up the approval `id` if it matches `binding` and has not expired at `now_ms`.
    fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> impl Future<Output = Result<TakeApproval, StoreError>> + Send;

    /// Takes (or, for the same `holder`, extends) the lock on `resource`
    /// until `now_ms + lease_ms`. `false` while another holder's lease runs.
    fn lock_resource(
        &self,
        resource: &str,
        holder: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Frees the lock on `resource` if `holder` still has it; a lock another
    /// holder took since is left alone.
    fn unlock_resource(
        &self,
        resource: &str,
        holder: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// A shared store: several dispatchers (or tests) over one set of records.
impl<T: Store> Store for std::sync::Arc<T> {
    fn next_step(&self, session: &str) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).next_step(session)
    }

    fn count_call(&self, key: &str) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).count_call(key)
    }

    fn uncount_call(&self, key: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).uncount_call(key)
    }

    fn outcome(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<Outcome>, StoreError>> + Send {
        (**self).outcome(key)
    }

    fn claim(
        &self,
        key: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        (**self).claim(key, now_ms, lease_ms)
    }

    fn renew(
        &self,
        key: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).renew(key, now_ms, lease_ms)
    }

    fn complete(
        &self,
        key: &str,
        result: &ToolResult,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).complete(key, result)
    }

    fn release(&self, key: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).release(key)
    }

    fn doubt(&self, key: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).doubt(key)
    }

    fn put_approval(
        &self,
        approval: &PendingApproval,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).put_approval(approval)
    }

    fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> impl Future<Output = Result<TakeApproval, StoreError>> + Send {
        (**self).take_approval(id, binding, now_ms)
    }

    fn lock_resource(
        &self,
        resource: &str,
        holder: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).lock_resource(resource, holder, now_ms, lease_ms)
    }

    fn unlock_resource(
        &self,
        resource: &str,
        holder: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).unlock_resource(resource, holder)
    }
}

/// The fixed-length key a durable store indexes a session by: hex SHA-256 of
/// the session id, so that a session id of any length fits an index (a
/// Postgres B-tree entry holds at most about 2.7 KB).
pub fn session_key(session: &str) -> String {
    use sha2::Digest as _;
    crate::canonical::hex(&sha2::Sha256::digest(session.as_bytes()))
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

// ------------------------------------------------------------------ memory

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
    hasher: std::collections::hash_map::RandomState,
    retention_ms: u64,
    capacity_per_shard: usize,
}

#[derive(Debug, Default)]
struct Shard {
    steps: HashMap<String, Counted>,
    calls: HashMap<String, Counted>,
    records: HashMap<String, Record>,
    approvals: HashMap<String, PendingApproval>,
    locks: HashMap<String, Lock>,
    writes: u64,
}

#[derive(Debug)]
struct Lock {
    holder: String,
    until_ms: u64,
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
            hasher: std::collections::hash_map::RandomState::new(),
            retention_ms: u64::try_from(retention.as_millis()).unwrap_or(u64::MAX),
            capacity_per_shard: capacity.div_ceil(SHARDS).max(1),
        }
    }

    fn shard(&self, key: &str) -> std::sync::MutexGuard<'_, Shard> {
        lock(&self.shards[(self.hasher.hash_one(key) as usize) % SHARDS])
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
            })
            .sum()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// After a write, now and then, drop what is too old or too much.
    fn maintain(&self, shard: &mut Shard, now: u64) {
        shard.writes += 1;
        let over = shard
            .steps
            .len()
            .max(shard.calls.len())
            .max(shard.records.len())
            > self.capacity_per_shard;
        if !over && !shard.writes.is_multiple_of(4096) {
            return;
        }
        let cutoff = now.saturating_sub(self.retention_ms);
        shard.steps.retain(|_, c| c.touched_ms >= cutoff);
        shard.calls.retain(|_, c| c.touched_ms >= cutoff);
        shard.records.retain(|_, r| r.touched_ms >= cutoff);
        shard.approvals.retain(|_, a| a.expires_ms >= now);
        shard.locks.retain(|_, l| l.until_ms > now);
        let cap = self.capacity_per_shard;
        trim_oldest(&mut shard.steps, cap, |c| c.touched_ms);
        trim_oldest(&mut shard.calls, cap, |c| c.touched_ms);
        trim_oldest(&mut shard.records, cap, |r| r.touched_ms);
    }
}

/// Drops the oldest entries until a tenth under `cap`, so trimming is rare.
fn trim_oldest<V>(map: &mut HashMap<String, V>, cap: usize, touched: impl Fn(&V) -> u64) {
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

fn count_in(map: &mut HashMap<String, Counted>, key: &str, now: u64) -> u64 {
    let entry = match map.get_mut(key) {
        Some(entry) => entry,
        None => map.entry(key.to_owned()).or_insert(Counted {
            count: 0,
            touched_ms: now,
        }),
    };
    entry.count += 1;
    entry.touched_ms = now;
    entry.count
}

impl Store for MemoryStore {
    async fn next_step(&self, session: &str) -> Result<u64, StoreError> {
        let now = now_ms();
        let mut shard = self.shard(session);
        let count = count_in(&mut shard.steps, session, now);
        self.maintain(&mut shard, now);
        Ok(count)
    }

    async fn count_call(&self, key: &str) -> Result<u64, StoreError> {
        let now = now_ms();
        let mut shard = self.shard(key);
        let count = count_in(&mut shard.calls, key, now);
        self.maintain(&mut shard, now);
        Ok(count)
    }

    async fn uncount_call(&self, key: &str) -> Result<(), StoreError> {
        let mut shard = self.shard(key);
        if let Some(entry) = shard.calls.get_mut(key) {
            entry.count = entry.count.saturating_sub(1);
        }
        Ok(())
    }

    async fn outcome(&self, key: &str) -> Result<Option<Outcome>, StoreError> {
        let shard = self.shard(key);
        Ok(match shard.records.get(key).map(|r| &r.state) {
            Some(RecordState::Completed(result)) => Some(Outcome::Completed(result.clone())),
            Some(RecordState::InDoubt) => Some(Outcome::InDoubt),
            Some(RecordState::InFlight { .. }) | None => None,
        })
    }

    async fn claim(&self, key: &str, now_ms: u64, lease_ms: u64) -> Result<Claim, StoreError> {
        let mut shard = self.shard(key);
        let until_ms = now_ms.saturating_add(lease_ms);
        match shard.records.get_mut(key) {
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
            Some(record) => {
                record.state = RecordState::InFlight { until_ms };
                record.touched_ms = now_ms;
            }
            None => {
                shard.records.insert(
                    key.to_owned(),
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

    async fn complete(&self, key: &str, result: &ToolResult) -> Result<(), StoreError> {
        let now = now_ms();
        let mut shard = self.shard(key);
        shard.records.insert(
            key.to_owned(),
            Record {
                state: RecordState::Completed(result.clone()),
                touched_ms: now,
            },
        );
        Ok(())
    }

    async fn renew(&self, key: &str, now_ms: u64, lease_ms: u64) -> Result<bool, StoreError> {
        let mut shard = self.shard(key);
        match shard.records.get_mut(key) {
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

    async fn release(&self, key: &str) -> Result<(), StoreError> {
        let mut shard = self.shard(key);
        if let Some(Record {
            state: RecordState::InFlight { .. },
            ..
        }) = shard.records.get(key)
        {
            shard.records.remove(key);
        }
        Ok(())
    }

    async fn doubt(&self, key: &str) -> Result<(), StoreError> {
        let now = now_ms();
        let mut shard = self.shard(key);
        match shard.records.get_mut(key) {
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
                    key.to_owned(),
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
        let now = now_ms();
        let mut shard = self.shard(&approval.id);
        shard
            .approvals
            .insert(approval.id.clone(), approval.clone());
        self.maintain(&mut shard, now);
        Ok(())
    }

    async fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> Result<TakeApproval, StoreError> {
        let mut shard = self.shard(id);
        let Some(approval) = shard.approvals.get(id) else {
            return Ok(TakeApproval::Invalid);
        };
        if !binding.matches(approval) {
            return Ok(TakeApproval::Invalid);
        }
        let expired = approval.expires_ms <= now_ms;
        let approval = shard
            .approvals
            .remove(id)
            .expect("present: looked up above under the same lock");
        Ok(if expired {
            TakeApproval::Expired
        } else {
            TakeApproval::Taken(approval)
        })
    }

    async fn lock_resource(
        &self,
        resource: &str,
        holder: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut shard = self.shard(resource);
        let until_ms = now_ms.saturating_add(lease_ms);
        match shard.locks.get_mut(resource) {
            Some(lock) if lock.holder != holder && lock.until_ms > now_ms => return Ok(false),
            Some(lock) => {
                holder.clone_into(&mut lock.holder);
                lock.until_ms = until_ms;
            }
            None => {
                shard.locks.insert(
                    resource.to_owned(),
                    Lock {
                        holder: holder.to_owned(),
                        until_ms,
                    },
                );
            }
        }
        self.maintain(&mut shard, now_ms);
        Ok(true)
    }

    async fn unlock_resource(&self, resource: &str, holder: &str) -> Result<(), StoreError> {
        let mut shard = self.shard(resource);
        if shard.locks.get(resource).is_some_and(|l| l.holder == holder) {
            shard.locks.remove(resource);
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
    fn old_and_excess_entries_are_dropped() {
        let store = MemoryStore::new(Duration::from_secs(3600), 160);
        block_on(async {
            for i in 0..10_000 {
                store.count_call(&format!("key-{i}")).await.unwrap();
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
