//! A store over another that forwards every method of the store's roles,
//! asking a [`Hook`] first what becomes of the call: what a test needs to
//! count the calls the pipeline makes, or to make chosen calls fail, over
//! any real store, without forwarding every method again for each.

use std::future::Future;
use std::ops::Deref;

use toolcall::ToolResult;
use toolcall::store::{
    ApprovalEntry, ApprovalLookup, ApprovalResult, ApprovalUse, AskApproval, DecideOutcome,
    DecisionWrite, OpenBounds, PendingApproval, PendingPage, PendingQuery, SignOutcome, Signature,
    SignatureWrite, TakeApproval,
};
use toolcall::store::{
    CallBegun, CallStart, Claim, Completion, Key, Lease, QuestionLease, RecordedOutcome,
    Transaction, Unlock, Unsettled,
};
use toolcall::store::{
    CallStore, ControlStore, LockStore, QuestionStore, Store, StoreError, TaintStore,
};
use toolcall::store::{ControlsChange, ControlsWrite, Exposure, LockAsk, RateWindow};
use toolcall::store::{StoredControls, TaintHit, TaintSource};

use Access::{Read, Write};

/// Whether a method only reads the store, or may change it: a hook that
/// loses answers can only lose those of calls that did something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads, changing nothing.
    Read,
    /// May write.
    Write,
}

/// What becomes of one call, as the hook says.
#[derive(Debug)]
pub enum Pass {
    /// Forwarded, and its answer returned.
    On,
    /// Not forwarded: the caller gets this error.
    Refuse(StoreError),
    /// Forwarded, and its answer lost: the caller gets this error.
    Lose(StoreError),
}

/// Told of every call before it is forwarded, by the name of its method
/// in the store's traits (`wait_approval` is not forwarded: its default
/// asks [`approval`](QuestionStore::approval), which is).
pub trait Hook: Send + Sync + 'static {
    /// What becomes of the call of `method`.
    fn before(&self, method: &'static str, access: Access) -> Pass;
}

/// `inner`, each call of which goes by `hook` first. It reads as its hook
/// (through `Deref`), so that a test drives the hook on the store it gave
/// the pipeline.
#[derive(Debug, Default)]
pub struct Wrapped<S, H> {
    inner: S,
    hook: H,
}

impl<S, H> Wrapped<S, H> {
    /// `inner`, with a hook that starts as its default.
    pub fn new(inner: S) -> Self
    where
        H: Default,
    {
        Self::with(inner, H::default())
    }

    /// `inner`, with `hook`.
    pub fn with(inner: S, hook: H) -> Self {
        Wrapped { inner, hook }
    }

    /// The store underneath, to look at it past the hook.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The hook.
    pub fn hook(&self) -> &H {
        &self.hook
    }
}

impl<S, H> Deref for Wrapped<S, H> {
    type Target = H;

    fn deref(&self) -> &H {
        &self.hook
    }
}

impl<S: Store, H: Hook> Wrapped<S, H> {
    /// `call` (not started yet: a future does nothing until awaited), as
    /// the hook says of `method`.
    async fn pass<T>(
        &self,
        method: &'static str,
        access: Access,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match self.hook.before(method, access) {
            Pass::On => call.await,
            Pass::Refuse(error) => Err(error),
            Pass::Lose(error) => {
                let _ = call.await;
                Err(error)
            }
        }
    }
}

impl<S: Store, H: Hook> CallStore for Wrapped<S, H> {
    async fn next_step(&self, session: &str, now_ms: u64) -> Result<u64, StoreError> {
        let call = self.inner.next_step(session, now_ms);
        self.pass("next_step", Write, call).await
    }

    async fn begin_call(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        self.pass("begin_call", Write, self.inner.begin_call(start))
            .await
    }

    fn locks_at_start(&self) -> bool {
        self.inner.locks_at_start()
    }

    async fn peek_step(&self, session: &str) -> Result<u64, StoreError> {
        self.pass("peek_step", Read, self.inner.peek_step(session))
            .await
    }

    async fn count_call(&self, key: &Key, now_ms: u64) -> Result<u64, StoreError> {
        let call = self.inner.count_call(key, now_ms);
        self.pass("count_call", Write, call).await
    }

    async fn uncount_call(&self, key: &Key) -> Result<(), StoreError> {
        self.pass("uncount_call", Write, self.inner.uncount_call(key))
            .await
    }

    async fn outcome(&self, key: &Key) -> Result<Option<RecordedOutcome>, StoreError> {
        self.pass("outcome", Read, self.inner.outcome(key)).await
    }

    async fn claim(&self, key: &Key, lease: Lease) -> Result<Claim, StoreError> {
        self.pass("claim", Write, self.inner.claim(key, lease))
            .await
    }

    async fn claim_asking(
        &self,
        key: &Key,
        asking: &QuestionLease<'_>,
    ) -> Result<Claim, StoreError> {
        let call = self.inner.claim_asking(key, asking);
        self.pass("claim_asking", Write, call).await
    }

    async fn unsettled(&self, now_ms: u64, limit: usize) -> Result<Vec<Unsettled>, StoreError> {
        let call = self.inner.unsettled(now_ms, limit);
        self.pass("unsettled", Read, call).await
    }

    async fn renew(&self, key: &Key, lease: Lease) -> Result<bool, StoreError> {
        self.pass("renew", Write, self.inner.renew(key, lease))
            .await
    }

    async fn complete(&self, key: &Key, result: &ToolResult) -> Result<(), StoreError> {
        let call = self.inner.complete(key, result);
        self.pass("complete", Write, call).await
    }

    async fn complete_unlocking(&self, done: &Completion<'_>) -> Result<bool, StoreError> {
        let call = self.inner.complete_unlocking(done);
        self.pass("complete_unlocking", Write, call).await
    }

    fn transaction(&self) -> Option<std::sync::Arc<dyn Transaction>> {
        self.inner.transaction()
    }

    async fn complete_in(
        &self,
        transaction: &dyn Transaction,
        key: &Key,
        result: &ToolResult,
        unlock: Option<Unlock<'_>>,
    ) -> Result<(), StoreError> {
        let call = self.inner.complete_in(transaction, key, result, unlock);
        self.pass("complete_in", Write, call).await
    }

    async fn release(&self, key: &Key) -> Result<(), StoreError> {
        self.pass("release", Write, self.inner.release(key)).await
    }

    async fn doubt(&self, key: &Key) -> Result<(), StoreError> {
        self.pass("doubt", Write, self.inner.doubt(key)).await
    }
}

impl<S: Store, H: Hook> QuestionStore for Wrapped<S, H> {
    async fn put_approval(&self, approval: &PendingApproval) -> Result<(), StoreError> {
        let call = self.inner.put_approval(approval);
        self.pass("put_approval", Write, call).await
    }

    async fn take_approval(&self, taking: &ApprovalUse<'_>) -> Result<TakeApproval, StoreError> {
        let call = self.inner.take_approval(taking);
        self.pass("take_approval", Write, call).await
    }

    async fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        let call = self.inner.pending_approvals(now_ms, limit);
        self.pass("pending_approvals", Read, call).await
    }

    async fn ask_approval(
        &self,
        approval: &PendingApproval,
        bounds: impl Into<OpenBounds> + Send,
    ) -> Result<AskApproval, StoreError> {
        let call = self.inner.ask_approval(approval, bounds.into());
        self.pass("ask_approval", Write, call).await
    }

    async fn find_approval(
        &self,
        lookup: &ApprovalLookup<'_>,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        let call = self.inner.find_approval(lookup);
        self.pass("find_approval", Read, call).await
    }

    async fn pending_page(&self, query: &PendingQuery<'_>) -> Result<PendingPage, StoreError> {
        let call = self.inner.pending_page(query);
        self.pass("pending_page", Read, call).await
    }

    async fn decide_approval(
        &self,
        deciding: &DecisionWrite<'_>,
    ) -> Result<DecideOutcome, StoreError> {
        let call = self.inner.decide_approval(deciding);
        self.pass("decide_approval", Write, call).await
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
        self.pass("approval", Read, self.inner.approval(id)).await
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        let call = self.inner.decided_approvals(limit);
        self.pass("decided_approvals", Read, call).await
    }

    async fn settle_approval(&self, id: &str, result: &ApprovalResult) -> Result<(), StoreError> {
        let call = self.inner.settle_approval(id, result);
        self.pass("settle_approval", Write, call).await
    }

    async fn give_back_approval(&self, id: &str) -> Result<bool, StoreError> {
        let call = self.inner.give_back_approval(id);
        self.pass("give_back_approval", Write, call).await
    }

    async fn sign_approval(&self, signing: &SignatureWrite<'_>) -> Result<SignOutcome, StoreError> {
        let call = self.inner.sign_approval(signing);
        self.pass("sign_approval", Write, call).await
    }

    async fn signatures(&self, id: &str) -> Result<Vec<Signature>, StoreError> {
        self.pass("signatures", Read, self.inner.signatures(id))
            .await
    }
}

impl<S: Store, H: Hook> LockStore for Wrapped<S, H> {
    async fn lock_resource(&self, lock: &LockAsk<'_>, now_ms: u64) -> Result<bool, StoreError> {
        let call = self.inner.lock_resource(lock, now_ms);
        self.pass("lock_resource", Write, call).await
    }

    async fn unlock_resource(&self, resource: &Key, holder: &str) -> Result<(), StoreError> {
        let call = self.inner.unlock_resource(resource, holder);
        self.pass("unlock_resource", Write, call).await
    }
}

impl<S: Store, H: Hook> TaintStore for Wrapped<S, H> {
    async fn add_taint(&self, seen: &Exposure<'_>) -> Result<(), StoreError> {
        self.pass("add_taint", Write, self.inner.add_taint(seen))
            .await
    }

    async fn taint_sources(&self, session: &str) -> Result<Vec<TaintSource>, StoreError> {
        let call = self.inner.taint_sources(session);
        self.pass("taint_sources", Read, call).await
    }

    async fn tainted(&self, session: &str, prints: &[String]) -> Result<TaintHit, StoreError> {
        let call = self.inner.tainted(session, prints);
        self.pass("tainted", Read, call).await
    }
}

impl<S: Store, H: Hook> ControlStore for Wrapped<S, H> {
    async fn controls(&self, known: u64) -> Result<Option<StoredControls>, StoreError> {
        self.pass("controls", Read, self.inner.controls(known))
            .await
    }

    async fn put_controls(&self, write: &ControlsWrite<'_>) -> Result<bool, StoreError> {
        let call = self.inner.put_controls(write);
        self.pass("put_controls", Write, call).await
    }

    async fn controls_history(&self, limit: usize) -> Result<Vec<ControlsChange>, StoreError> {
        let call = self.inner.controls_history(limit);
        self.pass("controls_history", Read, call).await
    }

    async fn take_rate(&self, window: &RateWindow<'_>, limit: u64) -> Result<bool, StoreError> {
        let call = self.inner.take_rate(window, limit);
        self.pass("take_rate", Write, call).await
    }

    async fn rate_count(&self, bucket: &str, window_start_ms: u64) -> Result<u64, StoreError> {
        let call = self.inner.rate_count(bucket, window_start_ms);
        self.pass("rate_count", Read, call).await
    }
}
