//! What the pipeline remembers between calls: step counts, duplicate counts,
//! idempotency records (in flight, completed, or of unknown outcome),
//! pending approvals and the taint of untrusted output.
//!
//! [`Store`] is the contract; [`MemoryStore`] keeps it in this process,
//! bounded in time and size. Durable stores implement the same trait with the
//! same semantics, so that a restarted process, or another replica, replays
//! what was done before instead of doing it again. A call's count and record,
//! and a resource's lock, are kept under a [`Key`]: a SHA-256 digest the
//! dispatcher made, as its bytes, with its hex text for a store that keeps
//! text.
//!
//! # Approvals
//!
//! A host deciding for a person needs three of the approval types here: a
//! [`PendingApproval`] (the question, bound to one exact call), an
//! [`ApprovalDecision`] (the person's answer, kept with it until a call uses
//! it up) and what came of it, an [`ApprovalResult`] (read back in an
//! [`ApprovalEntry`]). The dispatcher's own way to decide is
//! `Decision`, with `Dispatcher::approve`
//! and `Dispatcher::deny`; an inbox records a
//! person's with [`QuestionStore::decide_approval`], which says whether it was the
//! one ([`DecideOutcome`]). The rest ([`Binding`], [`TakeApproval`],
//! [`AskApproval`], the `Pending*` query types) is the contract a [`Store`]
//! implements.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::result::ToolResult;

pub use crate::error::StoreError;
pub use crate::provenance::{TaintSource, UntrustedText};
pub use crate::question::{
    ApprovalDecision, ApprovalEntry, ApprovalResult, AskApproval, Binding, DecideOutcome,
    OpenBounds, PendingApproval, Requester, SignOutcome, Signature, TakeApproval,
};

/// Everything the pipeline remembers, behind one contract.
///
/// Keys are idempotency keys (they already contain the session), each a
/// [`Key`]: a digest, which a store in memory keeps as its 32 bytes and a
/// store of text as [`Key::as_str`]. Every method is one atomic step: two callers racing on one key see one winner.
/// Times are wall-clock milliseconds since the Unix epoch, so that records
/// mean the same to every process that shares a store.
///
/// # The states of a key
///
/// | state | how it gets there | what an identical call does |
/// |---|---|---|
/// | free | never claimed, [`release`](CallStore::release)d, or purged | runs the whole pipeline |
/// | claimed | [`claim`](CallStore::claim), kept alive by [`renew`](CallStore::renew) | waits for it, then replays its result (or `CALL_IN_PROGRESS`) |
/// | completed | [`complete`](CallStore::complete) | is answered with the stored result, `replayed: true` |
/// | in doubt | [`doubt`](CallStore::doubt): the last attempt's outcome is unknown; or a claim whose lease ran out with no outcome | is settled without the check, the policy and the approval it already passed: `reconcile`, a run under the same key for a backend that honours it, or a person |
///
/// A claim whose lease ran out (its holder died) is in doubt: [`outcome`](CallStore::outcome)
/// says [`InDoubt`](RecordedOutcome::InDoubt), and [`claim`](CallStore::claim)
/// turns it in doubt and answers [`Claim::Abandoned`]. Every store says so
/// to every process that shares it.
///
/// Resource locks ([`lock_resource`](LockStore::lock_resource)) are a separate
/// namespace: they order calls on one resource (an order, an account)
/// across every process that shares the store.
pub trait Store: CallStore + QuestionStore + LockStore + TaintStore + ControlStore {}

/// Every type that takes every role is a store.
impl<T: CallStore + QuestionStore + LockStore + TaintStore + ControlStore> Store for T {}

/// A conversation's steps, a call's count and its idempotency record: begun, claimed, renewed, completed, released or in doubt; and the unknown outcomes left to a person ([`unsettled`](CallStore::unsettled)).
///
/// One of the roles of a [`Store`]: see it for the contract they share.
pub trait CallStore: ControlStore + Send + Sync + 'static {
    /// Counts one step of `session`, at `now_ms` (the call's time), and
    /// returns the new count. A session id can be long (the host chooses
    /// it): a store that indexes it should index a fixed-length digest of
    /// it instead (hex SHA-256, as the SQLite and Postgres stores do).
    fn next_step(
        &self,
        session: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Begins a call: counts its step ([`next_step`](CallStore::next_step));
    /// then, if the step is within `start.max_steps`, its key
    /// ([`count_call`](CallStore::count_call)); then, if the count is within
    /// `start.max_calls`, reads what is recorded of the key when asked
    /// ([`outcome`](CallStore::outcome)) and takes the resource lock asked for
    /// ([`lock_resource`](LockStore::lock_resource)) when the key is neither
    /// completed nor held by a running claim; and says whether the session
    /// saw untrusted output, and whether the conversation has a question,
    /// when asked. A store that can also claims the key when
    /// [`CallStart::claim`] asks it to and nothing stands in the way (see
    /// there), in the same transaction. Each part means what its own
    /// method means; a store may make them in one round trip.
    ///
    /// This default reads the controls' version first when asked
    /// ([`controls`](ControlStore::controls)), then makes the step, the count and
    /// the read one after the other, and neither locks, nor claims, nor looks
    /// at the taint or the approvals
    /// (`locked: false`, `claimed: false`, `tainted: None`, `questions: None`):
    /// the caller then does those its own way.
    fn begin_call(
        &self,
        start: &CallStart<'_>,
    ) -> impl Future<Output = Result<CallBegun, StoreError>> + Send {
        async move {
            if let Some(known) = start.controls
                && self.controls(known).await?.is_some()
            {
                return Ok(CallBegun {
                    controls_moved: true,
                    ..CallBegun::default()
                });
            }
            let step = if start.alone {
                1
            } else {
                self.next_step(start.session, start.now_ms).await?
            };
            let mut begun = CallBegun {
                step,
                ..CallBegun::default()
            };
            if step > start.max_steps {
                return Ok(begun);
            }
            let calls = if start.alone {
                1
            } else {
                self.count_call(start.key, start.now_ms).await?
            };
            begun.calls = Some(calls);
            if start.outcome && calls <= start.max_calls {
                begun.outcome = self.outcome(start.key).await?;
            }
            Ok(begun)
        }
    }

    /// Whether a side effect's start is to ask for its resource's lock
    /// ([`CallStart::lock`]): `true`, this default, for a store a request
    /// away, where the lock taken with the start saves one. A store in the
    /// caller's process saves nothing by it and answers `false`
    /// ([`MemoryStore`]): the lock is then taken when the business check
    /// begins, and a call its start finds completed (a replay) never
    /// computes its lock's key.
    fn locks_at_start(&self) -> bool {
        true
    }

    /// The step count of `session` as it is, without counting one (0 for a
    /// session never seen): what a dry run reads.
    fn peek_step(&self, session: &str) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Counts one more call with `key`, at `now_ms`, and returns the new
    /// count.
    fn count_call(
        &self,
        key: &Key,
        now_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Takes back one count of `key` (never below zero): the call was
    /// answered `CONFIRMATION_REQUIRED`, which is a question to a person, not
    /// a repetition by the model.
    fn uncount_call(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What is known of the call with `key`: completed (with its result), in
    /// doubt (recorded so, or claimed by a lease that ran out), claimed by
    /// a lease that still runs, or nothing (`None`: free).
    fn outcome(
        &self,
        key: &Key,
    ) -> impl Future<Output = Result<Option<RecordedOutcome>, StoreError>> + Send;

    /// Tries to take `key` for execution until `lease.now_ms +
    /// lease.lease_ms`. A key that is free or in doubt is acquired; one
    /// claimed by a lease that ran out at `lease.now_ms` is turned in doubt,
    /// not acquired ([`Claim::Abandoned`]).
    fn claim(
        &self,
        key: &Key,
        lease: Lease,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// [`claim`](CallStore::claim) for `asking.lease`, keeping with the claim
    /// `asking.question`: the question a person is asked if the call's
    /// outcome stays unknown: its lease runs out with no outcome (its
    /// process died, or could not record one), or it is recorded in doubt.
    /// [`unsettled`](CallStore::unsettled) lists those
    /// questions, so that an unknown outcome reaches a person without
    /// waiting for an identical call. The question is kept until the key
    /// completes, is released, or is claimed again.
    ///
    /// This default claims and keeps nothing: such a store's unknown
    /// outcomes reach a person only when an identical call finds them.
    fn claim_asking(
        &self,
        key: &Key,
        asking: &QuestionLease<'_>,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        self.claim(key, asking.lease)
    }

    /// The keys whose outcome is unknown at `now_ms` (in doubt, or claimed
    /// by a lease that ran out) and the questions their claims kept
    /// ([`claim_asking`](CallStore::claim_asking)), at most `limit`, oldest
    /// claim first. Each question is as it was kept: the caller asks it
    /// ([`ask_approval`](QuestionStore::ask_approval)) with an id and times of its
    /// own ([`surface`](crate::decide::surface)).
    ///
    /// This default has none.
    fn unsettled(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Unsettled>, StoreError>> + Send {
        let _ = (now_ms, limit);
        async { Ok(Vec::new()) }
    }

    /// Extends the claim on `key` to `lease.now_ms + lease.lease_ms`, while
    /// its call is still running. `false` if the key is no longer claimed
    /// (it completed, or was released).
    fn renew(
        &self,
        key: &Key,
        lease: Lease,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Stores the result of the call holding `key` and frees the claim.
    fn complete(
        &self,
        key: &Key,
        result: &ToolResult,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Stores `done.result` for the call holding `done.key` and frees the
    /// claim, as [`complete`](CallStore::complete) does; and, when the store
    /// can do both at once, frees the lock on `done.resource` if
    /// `done.holder` still has it, as
    /// [`unlock_resource`](LockStore::unlock_resource) does: `true` then. With
    /// `false` the lock is left as it was, for the caller to free.
    ///
    /// This default completes, and leaves the lock.
    fn complete_unlocking(
        &self,
        done: &Completion<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        async move {
            self.complete(done.key, done.result).await?;
            Ok(false)
        }
    }

    /// A transaction on the store's own database, for a side effect's
    /// handler to write the application's tables in
    /// (`Ctx::transaction`): the store commits it with the call's result
    /// ([`complete_in`](CallStore::complete_in)), so that the handler's
    /// writes and the record that the call ran are kept together or not at
    /// all. Nothing is sent until the handler asks for the transaction's
    /// connection; one it never asked for changes nothing.
    ///
    /// `None` (this default): the store offers none, and handlers write
    /// as they would without it.
    fn transaction(&self) -> Option<std::sync::Arc<dyn Transaction>> {
        None
    }

    /// Stores `result` for the call holding `key` inside `transaction` (one
    /// [`transaction`](CallStore::transaction) gave, that the handler
    /// began), frees `unlock`'s resource lock there if its holder still
    /// has it, and commits. An error leaves it unknown whether the commit
    /// took (a connection lost during it): the caller treats the outcome as
    /// unknown, and never records the result again outside the transaction.
    ///
    /// This default refuses: a store that offers no transaction is never
    /// given one.
    fn complete_in(
        &self,
        transaction: &dyn Transaction,
        key: &Key,
        result: &ToolResult,
        unlock: Option<Unlock<'_>>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (transaction, key, result, unlock);
        async { Err(StoreError::new("this store offers no transaction")) }
    }

    /// Frees the claim on `key` without a result: the call did not run. The
    /// next identical call may claim it again. A completed or in-doubt key is
    /// left as it is.
    fn release(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Frees the claim on `key` and remembers the call as in doubt: it ran,
    /// and whether it took effect is unknown. Durable like a completion.
    fn doubt(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// A store's transaction lent to one side effect's handler
/// ([`CallStore::transaction`]); the handler reaches it as the store's own
/// type, through `Ctx::transaction`.
pub trait Transaction: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Whether the handler began it (asked for its connection): only then
    /// is the call's result committed in it.
    fn begun(&self) -> bool;

    /// Undoes what was done in it so far, so that the next attempt of the
    /// handler starts afresh (and a failed one leaves nothing).
    fn roll_back(&self);
}

/// The resource lock a result's commit frees ([`CallStore::complete_in`]).
#[derive(Clone, Copy, Debug)]
pub struct Unlock<'a> {
    /// The resource whose lock is freed.
    pub resource: &'a Key,
    /// Who must still hold that lock for it to be freed.
    pub holder: &'a str,
}

/// The questions put to people ([`PendingApproval`]): asked once per call and requester, decided once, taken once by the call that carries the decision out, and what came of it; listed for the inbox, waited for, signed by several people.
///
/// One of the roles of a [`Store`]: see it for the contract they share.
pub trait QuestionStore: Send + Sync + 'static {
    /// Keeps an approval until it is taken or expires.
    fn put_approval(
        &self,
        approval: &PendingApproval,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Uses up the approval `taking.id` if it matches `taking.binding` and has
    /// not expired at `taking.now_ms`: the one place an approval, and the decision kept with
    /// it, is used, once. An undecided approval is gone once taken; a
    /// decided one stays in the history ([`decided_approvals`](QuestionStore::decided_approvals)),
    /// marked used, and is never taken again. One of this call that has
    /// expired is answered [`TakeApproval::Expired`] and left as it is: it
    /// reads expired to every answer after, until the purge removes it.
    fn take_approval(
        &self,
        taking: &ApprovalUse<'_>,
    ) -> impl Future<Output = Result<TakeApproval, StoreError>> + Send;

    /// The approvals a person may decide at `now_ms`: undecided, unused and
    /// unexpired, oldest first, at most `limit`.
    fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<PendingApproval>, StoreError>> + Send;

    /// Asks for `approval`, once per call, atomically (of two askers racing
    /// with the same call, in one process or several, one creates it):
    ///
    /// * if an approval for the same session, caller, tool, digest and
    ///   reason exists, unused and unexpired at `approval.created_ms`
    ///   (decided or not), nothing is written and it is
    ///   [`Existing`](AskApproval::Existing);
    /// * else if the conversation (the approval's session and caller) has
    ///   `bounds.conversation` or more open approvals (undecided, unused,
    ///   unexpired), nothing is written and it is [`Full`](AskApproval::Full);
    ///   if the caller has `bounds.caller` or more in all its
    ///   conversations, it is [`CallerFull`](AskApproval::CallerFull)
    ///   ([`OpenBounds::over`] says which);
    /// * else `approval` is stored: [`Created`](AskApproval::Created).
    ///
    /// A session id can be long: a store that indexes it should index a
    /// fixed-length digest of it (see [`next_step`](CallStore::next_step)).
    fn ask_approval(
        &self,
        approval: &PendingApproval,
        bounds: impl Into<OpenBounds> + Send,
    ) -> impl Future<Output = Result<AskApproval, StoreError>> + Send;

    /// The newest approval asked for exactly this call (`lookup.binding`'s
    /// session, caller, tool and digest, and the same `lookup.reason`),
    /// unexpired at `lookup.now_ms`, decided or not, **used or not** (a used denial still
    /// answers the identical calls after it); `None` if there is none. A
    /// binding without a tool or a digest matches any.
    fn find_approval(
        &self,
        lookup: &ApprovalLookup<'_>,
    ) -> impl Future<Output = Result<Option<ApprovalEntry>, StoreError>> + Send;

    /// A page of the approvals a person may decide at `query.now_ms`
    /// (undecided, unused, unexpired), filtered by session and tool, oldest
    /// or newest first (by when asked, then by id), at most `query.limit`,
    /// after `query.cursor`; with the true count of those matching the
    /// filters, and the cursor of the next page when there is one.
    fn pending_page(
        &self,
        query: &PendingQuery<'_>,
    ) -> impl Future<Output = Result<PendingPage, StoreError>> + Send;

    /// Records a person's decision `deciding.decision` on the approval
    /// `deciding.id`, atomically: of two
    /// decisions at once (a double click, two people, two replicas) exactly
    /// one is [`Decided`](DecideOutcome::Decided), and a decision is never
    /// changed. An approval expired at `deciding.now_ms`, or already used, is
    /// not decided.
    fn decide_approval(
        &self,
        deciding: &DecisionWrite<'_>,
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

    /// Gives back the decision on approval `id` that a call used up and
    /// did not act on (it ran nothing: another call held its resource, or
    /// the operators had stopped the tool or the caller), so
    /// that the next call carrying it out takes it
    /// ([`take_approval`](QuestionStore::take_approval)) and nobody is asked again.
    /// `Ok(true)`: it is unused again. `Ok(false)`, changing nothing: it is
    /// not kept, not decided, not used, already settled
    /// ([`settle_approval`](QuestionStore::settle_approval)), or an identical call's
    /// question is unused meanwhile (that one stands).
    fn give_back_approval(&self, id: &str)
    -> impl Future<Output = Result<bool, StoreError>> + Send;

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
                let settled = entry.as_ref().is_none_or(|e| !e.state(now).is_open());
                if settled || now >= until_ms {
                    return Ok(entry);
                }
                let pause = (until_ms - now).min(200);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }
    }

    /// Signs the approval `signing.id` as `signing.signer`, for a question
    /// that needs `signing.needed` distinct people: keeps the signature and,
    /// when it is the `needed`-th, records `signing.decision` (approved; its
    /// `by` replaced by the signers' names in signing order, joined with
    /// `, `) in the same atomic step, so that two last signatures racing
    /// decide once. Refuses, and changes nothing, for an approval decided,
    /// expired at `signing.now_ms` or unknown, and for a second signature of
    /// one person.
    ///
    /// This default keeps no signatures: an error.
    fn sign_approval(
        &self,
        signing: &SignatureWrite<'_>,
    ) -> impl Future<Output = Result<SignOutcome, StoreError>> + Send {
        let _ = signing;
        async { Err(no_controls("signatures")) }
    }

    /// The signatures on the approval `id`, oldest first (none for an
    /// approval that needs one person, or an unknown one).
    ///
    /// This default keeps none: an empty list.
    fn signatures(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Vec<Signature>, StoreError>> + Send {
        let _ = id;
        async { Ok(Vec::new()) }
    }
}

/// Locks on resources (an order, an account) that order the calls on one resource across every process sharing the store.
///
/// One of the roles of a [`Store`]: see it for the contract they share.
pub trait LockStore: Send + Sync + 'static {
    /// Takes (or, for the same `lock.holder`, extends) the lock on
    /// `lock.resource` until `now_ms + lock.lease_ms`. `false` while another
    /// holder's lease runs.
    fn lock_resource(
        &self,
        lock: &LockAsk<'_>,
        now_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Frees the lock on `resource` if `holder` still has it; a lock another
    /// holder took since is left alone.
    fn unlock_resource(
        &self,
        resource: &Key,
        holder: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// Which conversations read untrusted output, and the fingerprints of what they read.
///
/// One of the roles of a [`Store`]: see it for the contract they share.
pub trait TaintStore: Send + Sync + 'static {
    /// Remembers that `seen.session` saw untrusted output, the fingerprints
    /// of its values (`seen.fingerprints`: hex digests, never the text; none
    /// at all marks the session only), and where it came from: `seen.source`,
    /// [`bounded`](TaintSource::bounded),
    /// kept with the session's newest [`MAX_SOURCES`](crate::provenance::MAX_SOURCES)
    /// ([`keep`](crate::provenance::keep)). Kept, like the session's step
    /// count, for the retention window after the last one.
    fn add_taint(&self, seen: &Exposure<'_>)
    -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The sources of `session`'s taint that [`add_taint`](TaintStore::add_taint)
    /// kept, newest first, at most [`MAX_SOURCES`](crate::provenance::MAX_SOURCES);
    /// none for a session that read no untrusted output.
    fn taint_sources(
        &self,
        session: &str,
    ) -> impl Future<Output = Result<Vec<TaintSource>, StoreError>> + Send;

    /// Whether `session` saw untrusted output, and which of `fingerprints`
    /// one held.
    fn tainted(
        &self,
        session: &str,
        fingerprints: &[String],
    ) -> impl Future<Output = Result<TaintHit, StoreError>> + Send;
}

/// The operators' controls (one versioned document and its history), the rate limits' windows, counted fleet-wide. Every method has a default that keeps nothing: a store without controls answers that it keeps none.
///
/// One of the roles of a [`Store`]: see it for the contract they share.
pub trait ControlStore: Send + Sync + 'static {
    /// The operators' controls, unless their version is `known` (0: none
    /// read yet): `Ok(None)` when the version kept is `known`, or nothing
    /// was ever written. Read at every call's start, so one indexed read.
    ///
    /// This default keeps none: `Ok(None)` always.
    fn controls(
        &self,
        known: u64,
    ) -> impl Future<Output = Result<Option<StoredControls>, StoreError>> + Send {
        let _ = known;
        async { Ok(None) }
    }

    /// Writes `write.document` as the controls' next version, if the version
    /// kept is `write.expected` (0: none yet), and keeps `write.change` (its
    /// `version` set to the one written) in the history, in one atomic step:
    /// `Ok(true)`.
    /// `Ok(false)`: another writer came first; nothing was written.
    ///
    /// This default keeps none: an error.
    fn put_controls(
        &self,
        write: &ControlsWrite<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = write;
        async { Err(no_controls("operators' controls")) }
    }

    /// The latest `limit` changes of the controls, newest first.
    ///
    /// This default keeps none: an empty list.
    fn controls_history(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<ControlsChange>, StoreError>> + Send {
        let _ = limit;
        async { Ok(Vec::new()) }
    }

    /// Counts one call against the rate limit `window.bucket` in the fixed
    /// window that starts at `window.start_ms` (a multiple of
    /// `window.length_ms`), if fewer than `limit` were counted in it:
    /// `Ok(true)`. `Ok(false)`: the window is full; nothing was counted.
    /// Every process that shares the store shares the count. A store may
    /// forget windows that ended (`start_ms` + `length_ms` in the past).
    ///
    /// This default counts nothing: an error (a rate limit cannot be kept).
    fn take_rate(
        &self,
        window: &RateWindow<'_>,
        limit: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (window, limit);
        async { Err(no_controls("rate limits")) }
    }

    /// How many calls were counted against `bucket` in the window that
    /// starts at `window_start_ms`, counting none (what a dry run reads).
    ///
    /// This default counts nothing: an error.
    fn rate_count(
        &self,
        bucket: &str,
        window_start_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let _ = (bucket, window_start_ms);
        async { Err(no_controls("rate limits")) }
    }
}

/// A store that keeps no operators' controls (its
/// [`put_controls`](ControlStore::put_controls) or
/// [`take_rate`](ControlStore::take_rate) was not written).
fn no_controls(what: &str) -> StoreError {
    StoreError::new(format!("this store keeps no {what}"))
}

/// The fixed-length key a durable store indexes a session by: hex SHA-256 of
/// the session id, so that a session id of any length fits an index (a
/// Postgres B-tree entry holds at most about 2.7 KB). Shared by the stores of
/// this workspace; not a public API.
#[doc(hidden)]
pub fn session_key(session: &str) -> String {
    use sha2::Digest as _;
    crate::hex::hex(&sha2::Sha256::digest(session.as_bytes()))
}

/// Milliseconds since the Unix epoch, now. Shared by the pipeline and the
/// stores of this workspace; not a public API.
#[doc(hidden)]
pub fn now_ms() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    #[cfg(feature = "testing")]
    let now = now.saturating_add(clock::skew_ms());
    now
}

/// A clock a test drives (the `testing` feature): time moves forward on
/// this thread when the test says so, so that questions expire, denials
/// run out and waits end without anyone waiting for them. Only for tests
/// that run on one thread (a current-thread runtime): each thread has its
/// own clock.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod clock {
    use std::cell::Cell;
    use std::time::Duration;

    thread_local! {
        static SKEW_MS: Cell<u64> = const { Cell::new(0) };
    }

    /// Moves this thread's clock forward by `by`.
    pub fn advance(by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        SKEW_MS.with(|skew| skew.set(skew.get().saturating_add(by)));
    }

    /// Puts this thread's clock back on the wall clock.
    pub fn reset() {
        SKEW_MS.with(|skew| skew.set(0));
    }

    pub(super) fn skew_ms() -> u64 {
        SKEW_MS.with(Cell::get)
    }
}

/// The store and its roles, to call a store's methods on a store of a
/// known type (`use toolcall::store::prelude::*;`); a function generic over
/// `St: Store` has them already.
pub mod prelude {
    pub use super::{
        CallStore as _, ControlStore as _, LockStore as _, QuestionStore as _, Store,
        TaintStore as _,
    };
}

mod key;
mod memory;
mod pending;
mod records;
mod shared;

pub use key::{Key, KeyError};
#[doc(hidden)]
pub use memory::KeyHasher;
pub use memory::MemoryStore;
pub use pending::{PendingCursor, PendingOrder, PendingPage, PendingQuery, PendingQueryError};
pub use records::{
    ApprovalLookup, ApprovalUse, CallBegun, CallStart, Claim, Completion, ControlsChange,
    ControlsWrite, DecisionWrite, Exposure, Lease, LockAsk, QuestionLease, RateWindow,
    RecordedOutcome, SignatureWrite, StoredControls, TaintHit, Unsettled,
};
