//! Stage 8: execution. One claim per idempotency key, so identical calls
//! racing each other execute once; bounded retries under that key; a
//! timeout per attempt; panics caught; a call whose outcome is unknown kept
//! *in doubt* until an identical call finds out.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use serde_json::{Map, Value};

use super::arguments::Prepared;
use super::asked::{CallParts, Doubt, JsonArguments, unprotected};
use super::catch::{CatchUnwind, panic_text};
use super::doubt::{Reconciled, Settled};
use super::messages::{Details, Failure};
use super::retry::{Attempt, Retry, Waiting, millis};
use super::stages::{HeldLock, Stage, Stages};
use crate::args::Members;
use crate::error::ToolError;
use crate::life::{AfterUnknown, Backend, after_unknown};
use crate::result::{Data, ToolResult};
use crate::store::{
    Claim, Completion, Key, Lease, QuestionLease, RecordedOutcome, Store, StoreError, Transaction,
    Unlock, now_ms,
};
use crate::tool::{CallContext, ToolSpec, Validated};

/// A claim outlives its holder's work by this much before another caller
/// may take the key over (a holder that crashed never releases it).
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// How long a result that could not be recorded is recorded again before
/// the call is left in doubt.
const RECORD_AGAIN: Duration = Duration::from_millis(250);

/// The longest message of a check's or handler's rejection the model gets
/// whole: 2 KiB.
const MAX_MESSAGE: usize = 2048;

/// Why execution gave no result.
pub(super) enum Unfinished {
    /// The tool did not run, or said no: nothing happened.
    Known(ToolResult),
    /// The attempt failed before any effect, the handler says
    /// ([`ToolError::NotApplied`]): tried again plainly while retries are
    /// left, and nothing happened if none are.
    NotApplied(ToolResult),
    /// The last attempt failed transiently or timed out: the effect may or
    /// may not have happened. The result is the answer if nobody finds out.
    Unknown(ToolResult),
    /// As `Unknown`, and the tool's `reconcile` was asked already and could
    /// not tell.
    StillUnknown(ToolResult),
}

impl Unfinished {
    pub(super) fn into_result(self) -> ToolResult {
        match self {
            Unfinished::Known(result)
            | Unfinished::NotApplied(result)
            | Unfinished::Unknown(result)
            | Unfinished::StillUnknown(result) => result,
        }
    }
}

impl<St: Store> Stages<St> {
    /// Stage 8: runs the handler, retrying transient failures as the
    /// [`Retry`] policy says; a side effect only under a claim on its key,
    /// so that identical calls run it once. `doubt`: whether the key's last
    /// run ended with an unknown outcome, and how this call settles it (see
    /// [`Doubt`]).
    pub(super) async fn run_retrying(
        &self,
        prepared: &mut Prepared<'_>,
        cx: &CallContext<'_>,
        doubt: Doubt,
    ) -> Stage<ToolResult> {
        if spec_redacts(prepared.spec) {
            // What the stored result must not repeat: from the arguments.
            // (What a person settling an unknown outcome reads is made
            // only if the outcome is unknown: see `CallParts::arguments`.)
            self.json(prepared)?;
        }
        let validated = prepared.validated.take();
        let mut claimed = prepared.claimed.take();
        let Prepared {
            spec,
            members,
            key,
            json,
            session,
            caller,
            step,
            lock,
            ..
        } = prepared;
        let (spec, key, members) = (*spec, &*key, &*members);
        let name = spec.name();
        if !spec.side_effect() {
            return match self.run_attempts(spec, validated, members, cx).await {
                Ok(data) => Ok(ToolResult::success(name, data)),
                Err(unfinished) => Err(unfinished.into_result()),
            };
        }
        let call = CallParts {
            spec,
            key,
            arguments: JsonArguments::of(json, members),
            session,
            caller,
            step: *step,
        };
        let mut doubt = doubt;
        // The person's settlement this run carries out, to record what came of it.
        let mut settling = None;
        loop {
            if let Doubt::Unknown = doubt {
                // Boxed: a call in doubt is rare.
                match Box::pin(self.settle_doubt(&call, cx)).await {
                    Settled::Run(id) => {
                        settling = id;
                        doubt = Doubt::Rerun;
                    }
                    Settled::Answer(answer) => return answer,
                }
            }
            // Claimed with the call's start, which found nothing recorded
            // of the key: no doubt to settle, while the claim holds.
            if let Some(until_ms) = claimed.take()
                && self.still_claimed(key, until_ms, spec).await
            {
                break;
            }
            match self.claim(spec, key, &call).await? {
                Claimed::Acquired => break,
                Claimed::Replayed(stored) => return Ok(stored),
                // The dead holder's claim is the doubt just settled: now
                // recorded in doubt, the key is claimed at once.
                Claimed::Abandoned if doubt == Doubt::Rerun => {}
                // Its holder died with the outcome unknown: settle it first.
                Claimed::Abandoned => doubt = Doubt::Unknown,
            }
        }
        crate::crash::point(crate::crash::AFTER_CLAIM);
        // A store that lends a transaction lends it to the claimed run: what
        // the handler writes in it commits with the result, or not at all.
        let transaction = self.store.transaction();
        let lent;
        let cx = match &transaction {
            Some(transaction) => {
                lent = CallContext {
                    transaction: Some(transaction),
                    session: Arc::clone(&cx.session),
                    ..*cx
                };
                &lent
            }
            None => cx,
        };
        let lease = self.lease(spec);
        // In a block: the attempts' future is dead once they ended, and
        // takes no room beside the stages after them.
        let outcome = {
            let running = pin!(self.run_attempts(spec, validated, members, cx));
            while_renewing(running, lease, |lease| self.store.renew(key, lease)).await
        };
        // The result's record frees the call's resource lock too, unless
        // a person's settlement is still to be recorded under it.
        let holding = lock.as_deref().filter(|_| settling.is_none());
        let answer = self.finish(&call, cx, outcome, holding).await;
        if let Some(id) = settling {
            match &answer {
                Ok(result) | Err(result) => self.settle(&id, result).await,
            }
        }
        answer
    }

    /// What the attempts of a claimed side effect come to: the result
    /// recorded under its key (freeing `holding`, the resource lock, with
    /// it); a failure with nothing done, the key released; an unknown
    /// outcome asked of the backend (`reconcile`), or recorded in doubt.
    async fn finish(
        &self,
        call: &CallParts<'_>,
        cx: &CallContext<'_>,
        outcome: Result<Data, Unfinished>,
        holding: Option<&HeldLock>,
    ) -> Stage<ToolResult> {
        let (spec, key, name) = (call.spec, call.key, call.spec.name());
        match outcome {
            Ok(data) => {
                self.complete(spec, key, &call.arguments, data, holding, cx.transaction)
                    .await
            }
            Err(Unfinished::Known(failure) | Unfinished::NotApplied(failure)) => {
                // Not run, or refused: the next identical call may run it.
                self.release(name, key).await;
                Err(failure)
            }
            Err(Unfinished::Unknown(failure)) => match Box::pin(self.reconcile(spec, cx)).await {
                Reconciled::Done(data) => {
                    self.complete(spec, key, &call.arguments, data, None, None)
                        .await
                }
                Reconciled::NotDone => {
                    self.release(name, key).await;
                    Err(failure)
                }
                Reconciled::NotAsked | Reconciled::Unknown => {
                    Err(Box::pin(self.in_doubt(call, failure.code)).await)
                }
            },
            Err(Unfinished::StillUnknown(failure)) => {
                Err(Box::pin(self.in_doubt(call, failure.code)).await)
            }
        }
    }

    /// Releases the claim on `key` of a call that did not run (or that its
    /// `reconcile` says did not take effect): the next identical call may
    /// run it. A store that fails here leaves the claim to its lease.
    pub(super) async fn release(&self, name: &str, key: &Key) {
        if let Err(error) = self.store.release(key).await {
            tracing::error!(tool = name, %error, "a claim could not be released; it ends with its lease");
        }
    }

    /// Stores a side effect's result, then answers with it. The stored
    /// copy (what replays answer) has the call's sensitive values scrubbed
    /// from it, wherever the tool's output repeated them. With `lock`, the
    /// call's resource lock is freed with it when the store can
    /// ([`CallStore::complete_unlocking`]). With a `transaction` the
    /// handler began, the result commits in it, with what the handler wrote
    /// ([`CallStore::complete_in`]).
    pub(super) async fn complete(
        &self,
        spec: &ToolSpec,
        key: &Key,
        arguments: &JsonArguments<'_>,
        data: Data,
        lock: Option<&HeldLock>,
        transaction: Option<&Arc<dyn Transaction>>,
    ) -> Stage<ToolResult> {
        let name = spec.name();
        let result = ToolResult::success(name, data);
        let redaction = spec.redaction();
        let stored = if redaction.is_empty() {
            None
        } else {
            let secrets = redaction.secrets(self.arguments_in(spec, arguments)?);
            let mut copy = Value::Object(Map::clone(&result.data));
            crate::redact::scrub(&mut copy, &secrets);
            match copy {
                // Boxed: only tools with sensitive values have it.
                Value::Object(data) => Some(Box::new(ToolResult::success(name, data))),
                _ => None,
            }
        };
        crate::crash::point(crate::crash::BEFORE_COMPLETE);
        let stored = stored.as_deref().unwrap_or(&result);
        if let Some(transaction) = transaction.filter(|transaction| transaction.begun()) {
            return Box::pin(self.complete_in(name, &**transaction, key, stored, lock))
                .await
                .map(|()| result);
        }
        let recorded = match lock {
            Some(HeldLock {
                resource,
                holder,
                freed: Some(freed),
            }) => {
                // No renewal may take the lock again once it is freed.
                freed.store(true, Ordering::Release);
                let recorded = self
                    .store
                    .complete_unlocking(&Completion {
                        key,
                        result: stored,
                        resource,
                        holder,
                    })
                    .await;
                freed.store(matches!(recorded, Ok(true)), Ordering::Release);
                recorded.map(|_| ())
            }
            _ => self.store.complete(key, stored).await,
        };
        let recorded = match recorded {
            Ok(()) => Ok(()),
            // A store that lost its connection is often back at once: the
            // result is recorded again, a few times, before the call is
            // left in doubt.
            Err(error) => {
                tracing::warn!(tool = name, %error, "a result could not be recorded; trying again");
                self.record_again(key, stored).await
            }
        };
        match recorded {
            Ok(()) => {
                crate::crash::point(crate::crash::AFTER_COMPLETE);
                Ok(result)
            }
            // The tool ran but nothing remembers it: its claim's lease runs
            // out and the key is in doubt (a person settles it; its claim's
            // question is listed). Not a plain "ok", nor "nothing was done".
            Err(error) => {
                tracing::error!(tool = name, %error, "a result could not be recorded; the call is in doubt");
                Err(self.fail_unrecorded(name))
            }
        }
    }

    /// [`complete`](Self::complete) in the handler's transaction: the
    /// result and the handler's writes commit at once, the lock freed with
    /// them. A failed commit is not recorded again outside it (the writes
    /// may be gone): the key is left in doubt, for `reconcile` or a person.
    async fn complete_in(
        &self,
        name: &'static str,
        transaction: &dyn Transaction,
        key: &Key,
        stored: &ToolResult,
        lock: Option<&HeldLock>,
    ) -> Result<(), ToolResult> {
        let (unlock, freed) = match lock {
            Some(HeldLock {
                resource,
                holder,
                freed: Some(freed),
            }) => (Some(Unlock { resource, holder }), Some(freed)),
            _ => (None, None),
        };
        if let Some(freed) = freed {
            // No renewal may take the lock again once it is freed.
            freed.store(true, Ordering::Release);
        }
        let committed = self
            .store
            .complete_in(transaction, key, stored, unlock)
            .await;
        if let Some(freed) = freed {
            freed.store(committed.is_ok(), Ordering::Release);
        }
        match committed {
            Ok(()) => {
                crate::crash::point(crate::crash::AFTER_COMPLETE);
                Ok(())
            }
            Err(error) => {
                tracing::error!(tool = name, %error, "a result could not be committed with the handler's writes; the call is in doubt");
                Err(self.fail_unrecorded(name))
            }
        }
    }

    /// Records `stored` as the result of `key` again, with the wait loop's
    /// short pauses, for a quarter of a second at most: the last error if
    /// it never took.
    pub(super) async fn record_again(
        &self,
        key: &Key,
        stored: &ToolResult,
    ) -> Result<(), StoreError> {
        let last = std::sync::Mutex::new(None);
        let recorded = Waiting::up_to(RECORD_AGAIN)
            .until(|| async {
                match self.store.complete(key, stored).await {
                    Ok(()) => Ok::<_, StoreError>(Poll::Ready(())),
                    Err(error) => {
                        *crate::audit::lock(&last) = Some(error);
                        Ok(Poll::Pending)
                    }
                }
            })
            .await?;
        match recorded {
            Some(()) => Ok(()),
            None => Err(crate::audit::lock(&last)
                .take()
                .unwrap_or_else(|| StoreError::new("the store did not answer"))),
        }
    }

    /// Takes the key, or waits (bounded) for the identical call holding it.
    /// `Some` is the stored result of a call completed meanwhile.
    /// What the store recorded of `key`. Stored results leave the store
    /// here and by [`claim`](Self::claim) only, and both mark them
    /// `replayed`: an answer read back is never a new execution.
    pub(super) async fn recorded(&self, key: &Key) -> Result<Option<RecordedOutcome>, StoreError> {
        Ok(match self.store.outcome(key).await? {
            Some(RecordedOutcome::Completed(stored)) => {
                Some(RecordedOutcome::Completed(replay(stored)))
            }
            other => other,
        })
    }

    /// Takes `key` for execution, waiting (bounded) while another call holds
    /// it: [`Claimed::Replayed`] with its stored result if it completed,
    /// [`Claimed::Abandoned`] if its holder's lease ran out with no outcome.
    async fn claim(&self, spec: &ToolSpec, key: &Key, call: &CallParts<'_>) -> Stage<Claimed> {
        let name = spec.name();
        let lease_ms = millis(self.lease(spec));
        // A call whose unknown outcome only a person can settle keeps that
        // question with its claim: should its process die, or fail to
        // record what came of it, the question is listed all the same.
        let question = if unprotected(spec) {
            Some(self.settlement_question(call)?)
        } else {
            None
        };
        let claimed = Waiting::up_to(self.settings.claim_wait)
            .until(|| async {
                let lease = Lease {
                    now_ms: now_ms(),
                    lease_ms,
                };
                let claimed = match &question {
                    Some(question) => {
                        self.store
                            .claim_asking(key, &QuestionLease { lease, question })
                            .await
                    }
                    None => self.store.claim(key, lease).await,
                };
                Ok(Poll::Ready(match claimed {
                    Ok(Claim::Acquired) => Claimed::Acquired,
                    Ok(Claim::Completed(result)) => Claimed::Replayed(replay(result)),
                    Ok(Claim::Abandoned) => Claimed::Abandoned,
                    Ok(_) => return Ok(Poll::Pending),
                    Err(error) => return Err(self.store_unavailable(name, &error)),
                }))
            })
            .await?;
        claimed.ok_or_else(|| self.fail(Failure::CallInProgress, name))
    }

    /// Whether the claim the call's start took on `key`, its lease ending at
    /// `until_ms`, is still the call's to run under. With two thirds of
    /// its lease left (the usual case: the checks between took moments), as
    /// taken; with less, once renewed; lapsed (a check that took longer
    /// than the lease), not: the call then claims as any call does, and
    /// finds what became of the key meanwhile (an identical call may have
    /// taken it as abandoned).
    async fn still_claimed(&self, key: &Key, until_ms: u64, spec: &ToolSpec) -> bool {
        let lease_ms = millis(self.lease(spec));
        let now_ms = now_ms();
        let left = until_ms.saturating_sub(now_ms);
        if left.saturating_mul(3) >= lease_ms.saturating_mul(2) {
            return true;
        }
        left > 0
            && matches!(
                self.store.renew(key, Lease { now_ms, lease_ms }).await,
                Ok(true)
            )
    }

    /// How long a claim holds without renewal: the claim lease, or less for
    /// a tool whose every attempt is bounded (the retry policy's bound on
    /// its timeouts and the waits between them, and a margin). It is
    /// renewed while the call runs.
    pub(super) fn lease(&self, spec: &ToolSpec) -> Duration {
        let lease = self.settings.claim_lease.max(Duration::from_millis(3));
        let Some(timeout) = self.timeout_of(spec) else {
            return lease;
        };
        let bound = Retry::of(&self.settings).bound(timeout);
        bound.saturating_add(LEASE_MARGIN).min(lease)
    }

    pub(super) fn timeout_of(&self, spec: &ToolSpec) -> Option<Duration> {
        spec.timeout().or(self.settings.timeout)
    }

    /// The handler's attempts: the first, then a retry after each
    /// transient failure, while the [`Retry`] policy allows, each within
    /// the tool's timeout. Each attempt consumes its arguments: the first gets `validated` (if
    /// the call still has them), the others a fresh copy from `members`.
    pub(super) async fn run_attempts(
        &self,
        spec: &'static ToolSpec,
        validated: Option<Box<dyn Validated>>,
        members: &Members<'_>,
        cx: &CallContext<'_>,
    ) -> Result<Data, Unfinished> {
        let mut first = validated;
        // What an attempt whose outcome is unknown allows: never a retry on
        // a guess (see `life`). A read-only tool has no effect to guess at.
        let after = if spec.side_effect() {
            after_unknown(Backend::of(spec))
        } else {
            AfterUnknown::Retry
        };
        Retry::of(&self.settings)
            .run(|retries| {
                // A retry needs fresh arguments: the handler consumed the last ones.
                let args = first
                    .take()
                    .ok_or(())
                    .or_else(|()| spec.validate_members(members).map_err(drop));
                let attempt = self.attempt(spec, args, cx, retries);
                async move {
                    let attempt = attempt.await;
                    if let (Attempt::Transient(_) | Attempt::Failed(_), Some(transaction)) =
                        (&attempt, cx.transaction)
                    {
                        // What a failed attempt wrote is undone before the
                        // backend is asked about it, and before a retry.
                        transaction.roll_back();
                    }
                    match attempt {
                        Attempt::Transient(unfinished) => {
                            Box::pin(self.after_transient(spec, *unfinished, after, cx)).await
                        }
                        done_or_failed => done_or_failed,
                    }
                }
            })
            .await
            .map_err(|unfinished| *unfinished)
    }

    /// What an attempt that failed transiently comes to, by [`life`]'s rule:
    /// a failure before any effect is tried again plainly (and, once the
    /// retries are spent, nothing happened); one whose outcome is unknown is
    /// tried again under the key only where the backend honours it, after
    /// asking the backend where it can be asked (done is the answer, not
    /// done is tried again), and is otherwise in doubt at once.
    ///
    /// [`life`]: crate::life
    async fn after_transient(
        &self,
        spec: &'static ToolSpec,
        unfinished: Unfinished,
        after: AfterUnknown,
        cx: &CallContext<'_>,
    ) -> Attempt<Data, Box<Unfinished>> {
        let failure = match unfinished {
            Unfinished::NotApplied(failure) => {
                return Attempt::Transient(Box::new(Unfinished::Known(failure)));
            }
            Unfinished::Unknown(failure) => failure,
            other => return Attempt::Failed(Box::new(other)),
        };
        match after {
            AfterUnknown::Retry => Attempt::Transient(Box::new(Unfinished::Unknown(failure))),
            AfterUnknown::AskBackend => match self.reconcile(spec, cx).await {
                Reconciled::Done(data) => Attempt::Done(data),
                Reconciled::NotDone => Attempt::Transient(Box::new(Unfinished::Known(failure))),
                Reconciled::NotAsked => Attempt::Failed(Box::new(Unfinished::Unknown(failure))),
                Reconciled::Unknown => Attempt::Failed(Box::new(Unfinished::StillUnknown(failure))),
            },
            _ => Attempt::Failed(Box::new(Unfinished::Unknown(failure))),
        }
    }

    /// One attempt of the handler, within the tool's timeout (`args`: the
    /// typed arguments, `Err` if they could not be made again). What it
    /// did not finish is boxed: it is rare, and the common answer moves
    /// through the retry loop.
    async fn attempt(
        &self,
        spec: &'static ToolSpec,
        args: Result<Box<dyn Validated>, ()>,
        cx: &CallContext<'_>,
        retries: u32,
    ) -> Attempt<Data, Box<Unfinished>> {
        let name = spec.name();
        let known = |result| Attempt::Failed(Box::new(Unfinished::Known(result)));
        let Ok(args) = args else {
            return known(self.fail(Failure::InternalError, name));
        };
        let running = CatchUnwind(args.call(cx));
        let outcome = match self.timeout_of(spec) {
            // Boxed with its timer: only tools with a timeout have it, and
            // inline it would widen every call's future.
            Some(limit) => match Box::pin(tokio::time::timeout(limit, running)).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    tracing::warn!(tool = name, ?limit, "the tool timed out");
                    let timeout = self.fail(Failure::Timeout, name);
                    return Attempt::Failed(Box::new(Unfinished::Unknown(timeout)));
                }
            },
            None => running.await,
        };
        match outcome {
            Ok(Ok(data)) => Attempt::Done(data),
            Ok(Err(ToolError::Transient(error))) => {
                tracing::warn!(tool = name, retries, %error, "transient failure");
                let unavailable = self.fail(Failure::UpstreamUnavailable, name);
                Attempt::Transient(Box::new(Unfinished::Unknown(unavailable)))
            }
            Ok(Err(ToolError::NotApplied(error))) => {
                tracing::warn!(tool = name, retries, %error, "failure before any effect");
                let unavailable = self.fail(Failure::UpstreamUnavailable, name);
                Attempt::Transient(Box::new(Unfinished::NotApplied(unavailable)))
            }
            Ok(Err(error)) => known(self.failure_of(name, error)),
            Err(panic) => {
                tracing::error!(tool = name, panic = panic_text(&panic), "the tool panicked");
                known(self.fail(Failure::InternalError, name))
            }
        }
    }
}

/// What a claim on a call's key found.
enum Claimed {
    Acquired,
    Replayed(ToolResult),
    Abandoned,
}

/// Runs `work`, calling `renew` with a lease from now every third of `lease`
/// until it ends, so that what it holds in the store is not taken over
/// while it is alive. A renewal that fails or finds nothing to renew stops
/// the renewals (the lease then runs out as it would have without them).
///
/// Most work ends at its first poll: the renewals (a timer, the store's
/// future) are made, boxed, only when it does not, so that the common
/// call's future carries nothing for them and no timer is set.
///
/// `work` comes pinned where it lives: moved into this future, it would take
/// its room twice (the argument, then the pinned copy).
pub(super) async fn while_renewing<T, R>(
    mut work: Pin<&mut impl Future<Output = T>>,
    lease: Duration,
    renew: impl FnMut(Lease) -> R,
) -> T
where
    R: Future<Output = Result<bool, StoreError>>,
{
    let lease_ms = millis(lease);
    let mut renew = Some(renew);
    let mut renewing = None;
    poll_fn(|cx| {
        if let Poll::Ready(output) = work.as_mut().poll(cx) {
            return Poll::Ready(output);
        }
        if let Some(renew) = renew.take() {
            renewing = Some(Box::pin(renewals(renew, lease / 3, lease_ms)));
        }
        if let Some(renewing) = renewing.as_mut() {
            let _ = renewing.as_mut().poll(cx);
        }
        Poll::Pending
    })
    .await
}

/// [`while_renewing`]'s renewals, every `every`, until one fails or finds
/// nothing to renew; then it waits for ever (the work ends it).
async fn renewals<R>(mut renew: impl FnMut(Lease) -> R, every: Duration, lease_ms: u64)
where
    R: Future<Output = Result<bool, StoreError>>,
{
    loop {
        tokio::time::sleep(every).await;
        let lease = Lease {
            now_ms: now_ms(),
            lease_ms,
        };
        match renew(lease).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(error) => {
                tracing::warn!(%error, "a lease could not be renewed");
                break;
            }
        }
    }
    std::future::pending::<()>().await;
}

impl<St> Stages<St> {
    /// The result of a check or handler that said no. A transient failure
    /// that reaches here (a check's, after its retries) means the backend
    /// is unavailable now.
    pub(super) fn failure_of(&self, name: &'static str, error: ToolError) -> ToolResult {
        match error {
            ToolError::Rejected(rejection) if rejection.breach().is_some() => {
                let breach = rejection.breach().expect("matched");
                let value = Value::from(breach.value);
                let details = Details {
                    limit: Some(&breach.name),
                    limit_value: breach.limit,
                    value: Some(&value),
                    ..Details::default()
                };
                let failure = match breach.limit {
                    Some(_) => Failure::OverLimit,
                    None => Failure::LimitNotSet,
                };
                self.fail_with(failure, name, &details, Map::new())
            }
            ToolError::Rejected(rejection) => {
                let (code, message) = rejection.into_parts();
                // A message may quote the model's input back; it stays bounded.
                let message = match crate::echo::cut(&message, MAX_MESSAGE) {
                    std::borrow::Cow::Borrowed(_) => message,
                    std::borrow::Cow::Owned(cut) => cut,
                };
                ToolResult::failure(name.to_owned(), code, message)
            }
            ToolError::Transient(error) | ToolError::NotApplied(error) => {
                tracing::warn!(tool = name, %error, "transient failure");
                self.fail(Failure::UpstreamUnavailable, name)
            }
            ToolError::Internal(error) => {
                tracing::error!(tool = name, %error, "the tool failed");
                self.fail(Failure::InternalError, name)
            }
        }
    }
}

/// Whether a side effect's stored result has values of its arguments
/// scrubbed from it (see [`Stages::complete`]).
fn spec_redacts(spec: &ToolSpec) -> bool {
    spec.side_effect() && !spec.redaction().is_empty()
}

/// A stored result, answered again (as a claim gives it, or boxed as a
/// recorded outcome holds it).
fn replay<R: std::borrow::BorrowMut<ToolResult>>(mut stored: R) -> R {
    stored.borrow_mut().replayed = true;
    stored
}

/// What the store recorded of a key, as [`Stages::recorded`] gives it:
/// a stored result is marked `replayed`.
pub(super) fn replayed(outcome: RecordedOutcome) -> RecordedOutcome {
    match outcome {
        RecordedOutcome::Completed(stored) => RecordedOutcome::Completed(replay(stored)),
        other => other,
    }
}
