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
    /// A person's decision, once one is recorded ([`Store::decide_approval`],
    /// the inbox's): it travels with the approval until a call uses it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalDecision>,
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

/// A person's decision on a pending approval, kept with it in the store
/// until an agent's call uses it up ([`Store::take_approval`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// Whether the call may run.
    pub approved: bool,
    /// Who decided (the inbox's signed-in person), for the audit.
    pub by: String,
    /// Why, as the person wrote it (shown to the model on a denial).
    #[serde(default)]
    pub note: String,
    /// The arguments the person approved instead of the model's, when they
    /// changed them: the call runs with these, validated, checked and
    /// policed again as a new call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_arguments: Option<Value>,
    /// When it was decided, in milliseconds since the Unix epoch.
    pub decided_ms: u64,
}

/// What recording a decision found ([`Store::decide_approval`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecideOutcome {
    /// This decision is the one: it is stored with the approval.
    Decided,
    /// Someone decided first (another click, another person), or an
    /// agent's call already used it up: nothing was changed.
    AlreadyDecided,
    /// It ran out of time before anyone decided: nothing was changed.
    Expired,
    /// No such approval (made up, or purged).
    Invalid,
}

/// What came of a decided approval once an agent's call used it up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalResult {
    /// Whether the call's answer was ok.
    pub ok: bool,
    /// The answer's code (`OK`, `CONFIRMATION_DENIED`, `AMOUNT_EXCEEDS_REFUNDABLE`, ...).
    pub code: String,
    /// Whether the answer was a replay of a call that had already run.
    #[serde(default)]
    pub replayed: bool,
    /// When the call was answered, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// An approval as the store keeps it, with its life after the question:
/// the decision (in [`PendingApproval::decision`]), when an agent's call
/// used it up, and what came of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalEntry {
    /// The approval, with its decision if one was recorded.
    pub approval: PendingApproval,
    /// When an agent's call used it up ([`Store::take_approval`]).
    #[serde(default)]
    pub used_ms: Option<u64>,
    /// What came of it ([`Store::settle_approval`]).
    #[serde(default)]
    pub result: Option<ApprovalResult>,
}

impl ApprovalEntry {
    /// Whether a person may still decide it at `now_ms`: undecided, unused
    /// and unexpired.
    pub fn is_open(&self, now_ms: u64) -> bool {
        self.approval.decision.is_none()
            && self.used_ms.is_none()
            && self.approval.expires_ms > now_ms
    }
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
    fn outcome(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<Outcome>, StoreError>> + Send;

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

    /// Uses up the approval `id` if it matches `binding` and has not expired
    /// at `now_ms`: the one place an approval, and the decision kept with
    /// it, is used, once. An undecided approval is gone once taken; a
    /// decided one stays in the history ([`decided_approvals`](Store::decided_approvals)),
    /// marked used, and is never taken again.
    fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> impl Future<Output = Result<TakeApproval, StoreError>> + Send;

    /// The approvals a person may decide at `now_ms`: undecided, unused and
    /// unexpired, oldest first, at most `limit`.
    fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<PendingApproval>, StoreError>> + Send;

    /// Records a person's decision on the approval `id`, atomically: of two
    /// decisions at once (a double click, two people, two replicas) exactly
    /// one is [`Decided`](DecideOutcome::Decided), and a decision is never
    /// changed. An approval expired at `now_ms`, or already used, is not
    /// decided.
    fn decide_approval(
        &self,
        id: &str,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> impl Future<Output = Result<DecideOutcome, StoreError>> + Send;

    /// The approval `id` as the store keeps it, decided or not, used or not,
    /// without using it up; `None` if there is none (or it was purged).
    fn approval(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<ApprovalEntry>, StoreError>> + Send;

    /// The decided approvals, most recently decided first, at most `limit`:
    /// who decided what, and what came of it.
    fn decided_approvals(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<ApprovalEntry>, StoreError>> + Send;

    /// Records what came of a decided approval that a call used up. Nothing
    /// happens for an approval that is not kept (undecided, or purged).
    fn settle_approval(
        &self,
        id: &str,
        result: &ApprovalResult,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Waits until the approval `id` is decided, used up or gone, or until
    /// `until_ms`, and returns it as it is then (`None`: there is none). A
    /// store that can be woken (Postgres: `LISTEN`) is; this default asks
    /// every 200 ms.
    fn wait_approval(
        &self,
        id: &str,
        until_ms: u64,
    ) -> impl Future<Output = Result<Option<ApprovalEntry>, StoreError>> + Send {
        async move {
            loop {
                let entry = self.approval(id).await?;
                let now = now_ms();
                let settled = entry
                    .as_ref()
                    .is_none_or(|e| e.approval.decision.is_some() || e.used_ms.is_some());
                if settled || now >= until_ms {
                    return Ok(entry);
                }
                let pause = (until_ms - now).min(200);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    }

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

    fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<PendingApproval>, StoreError>> + Send {
        (**self).pending_approvals(now_ms, limit)
    }

    fn decide_approval(
        &self,
        id: &str,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> impl Future<Output = Result<DecideOutcome, StoreError>> + Send {
        (**self).decide_approval(id, decision, now_ms)
    }

    fn approval(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<ApprovalEntry>, StoreError>> + Send {
        (**self).approval(id)
    }

    fn decided_approvals(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<ApprovalEntry>, StoreError>> + Send {
        (**self).decided_approvals(limit)
    }

    fn settle_approval(
        &self,
        id: &str,
        result: &ApprovalResult,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).settle_approval(id, result)
    }

    fn wait_approval(
        &self,
        id: &str,
        until_ms: u64,
    ) -> impl Future<Output = Result<Option<ApprovalEntry>, StoreError>> + Send {
        (**self).wait_approval(id, until_ms)
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
    approvals: HashMap<String, ApprovalEntry>,
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
        shard.approvals.insert(
            approval.id.clone(),
            ApprovalEntry {
                approval: approval.clone(),
                used_ms: None,
                result: None,
            },
        );
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
        if shard
            .locks
            .get(resource)
            .is_some_and(|l| l.holder == holder)
        {
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
