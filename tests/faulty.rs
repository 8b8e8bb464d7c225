//! A store that fails on demand, over a real one: what a store that goes
//! away does to the pipeline. Failures are injected, not waited for.

use std::sync::Mutex;

use toolcall::ToolResult;
use toolcall::store::CallStore;
use toolcall::store::ControlStore;
use toolcall::store::LockStore;
use toolcall::store::QuestionStore;
use toolcall::store::TaintStore;
use toolcall::store::{
    ApprovalDecision, ApprovalEntry, ApprovalResult, AskApproval, Binding, CallBegun, CallStart,
    Claim, ControlsChange, DecideOutcome, Key, OpenBounds, PendingApproval, PendingPage,
    PendingQuery, RecordedOutcome, SignOutcome, Signature, Store, StoreError, StoredControls,
    TaintHit, TaintSource, TakeApproval, Unsettled,
};

/// How the store fails while an outage lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outage {
    /// Nothing reaches the store: every method fails before it does
    /// anything.
    Down,
    /// Writes reach the store, and their answer is lost: the write took
    /// effect, and the caller is told it failed. Reads fail too.
    AnswersLost,
}

/// An outage: how, of which methods (`None`: all), for how many calls.
#[derive(Clone, Copy, Debug)]
struct Fault {
    outage: Outage,
    only: Option<&'static str>,
    left: u32,
}

/// A store over `inner` that fails as [`Faulty::fail`] says.
#[derive(Debug)]
pub struct Faulty<S> {
    inner: S,
    fault: Mutex<Option<Fault>>,
    failed: Mutex<u32>,
}

impl<S> Faulty<S> {
    /// `inner`, failing nothing yet.
    pub fn new(inner: S) -> Self {
        Faulty {
            inner,
            fault: Mutex::new(None),
            failed: Mutex::new(0),
        }
    }

    /// The store underneath.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Fails the next `calls` calls of the method `only` (its name, as in
    /// the `Store` trait), or of every method, as `outage` says.
    pub fn fail(&self, outage: Outage, only: Option<&'static str>, calls: u32) {
        *self.fault.lock().unwrap() = Some(Fault {
            outage,
            only,
            left: calls,
        });
    }

    /// Ends the outage.
    pub fn heal(&self) {
        *self.fault.lock().unwrap() = None;
    }

    /// How many calls failed so far.
    pub fn failed(&self) -> u32 {
        *self.failed.lock().unwrap()
    }

    /// Whether the call of `method` fails, and how; counts it.
    fn hit(&self, method: &'static str) -> Option<Outage> {
        let mut fault = self.fault.lock().unwrap();
        let current = (*fault)?;
        if current.only.is_some_and(|only| only != method) || current.left == 0 {
            return None;
        }
        *fault = Some(Fault {
            left: current.left - 1,
            ..current
        });
        *self.failed.lock().unwrap() += 1;
        Some(current.outage)
    }

    fn error(method: &str) -> StoreError {
        StoreError::new(format!("the store went away during {method}"))
    }
}

/// A read: fails before it reaches the store, in either outage.
macro_rules! read {
    ($self:ident, $name:literal, $call:expr) => {{
        if $self.hit($name).is_some() {
            return Err(Self::error($name));
        }
        $call.await
    }};
}

/// A write: fails before it reaches the store (`Down`), or after, with its
/// answer lost (`AnswersLost`).
macro_rules! write {
    ($self:ident, $name:literal, $call:expr) => {{
        match $self.hit($name) {
            Some(Outage::Down) => Err(Self::error($name)),
            Some(Outage::AnswersLost) => {
                let _ = $call.await;
                Err(Self::error($name))
            }
            None => $call.await,
        }
    }};
}

impl<S: Store> CallStore for Faulty<S> {
    async fn next_step(&self, session: &str, now_ms: u64) -> Result<u64, StoreError> {
        write!(self, "next_step", self.inner.next_step(session, now_ms))
    }

    async fn begin_call(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        write!(self, "begin_call", self.inner.begin_call(start))
    }

    async fn peek_step(&self, session: &str) -> Result<u64, StoreError> {
        read!(self, "peek_step", self.inner.peek_step(session))
    }

    async fn count_call(&self, key: &Key, now_ms: u64) -> Result<u64, StoreError> {
        write!(self, "count_call", self.inner.count_call(key, now_ms))
    }

    async fn uncount_call(&self, key: &Key) -> Result<(), StoreError> {
        write!(self, "uncount_call", self.inner.uncount_call(key))
    }

    async fn outcome(&self, key: &Key) -> Result<Option<RecordedOutcome>, StoreError> {
        read!(self, "outcome", self.inner.outcome(key))
    }

    async fn claim(&self, key: &Key, now_ms: u64, lease_ms: u64) -> Result<Claim, StoreError> {
        write!(self, "claim", self.inner.claim(key, now_ms, lease_ms))
    }

    async fn claim_asking(
        &self,
        key: &Key,
        now_ms: u64,
        lease_ms: u64,
        question: &PendingApproval,
    ) -> Result<Claim, StoreError> {
        write!(
            self,
            "claim",
            self.inner.claim_asking(key, now_ms, lease_ms, question)
        )
    }

    async fn unsettled(&self, now_ms: u64, limit: usize) -> Result<Vec<Unsettled>, StoreError> {
        read!(self, "unsettled", self.inner.unsettled(now_ms, limit))
    }

    async fn renew(&self, key: &Key, now_ms: u64, lease_ms: u64) -> Result<bool, StoreError> {
        write!(self, "renew", self.inner.renew(key, now_ms, lease_ms))
    }

    async fn complete(&self, key: &Key, result: &ToolResult) -> Result<(), StoreError> {
        write!(self, "complete", self.inner.complete(key, result))
    }

    async fn complete_unlocking(
        &self,
        key: &Key,
        result: &ToolResult,
        resource: &Key,
        holder: &str,
    ) -> Result<bool, StoreError> {
        write!(
            self,
            "complete",
            self.inner.complete_unlocking(key, result, resource, holder)
        )
    }

    async fn release(&self, key: &Key) -> Result<(), StoreError> {
        write!(self, "release", self.inner.release(key))
    }

    async fn doubt(&self, key: &Key) -> Result<(), StoreError> {
        write!(self, "doubt", self.inner.doubt(key))
    }
}

impl<S: Store> QuestionStore for Faulty<S> {
    async fn put_approval(&self, approval: &PendingApproval) -> Result<(), StoreError> {
        write!(self, "put_approval", self.inner.put_approval(approval))
    }

    async fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> Result<TakeApproval, StoreError> {
        write!(
            self,
            "take_approval",
            self.inner.take_approval(id, binding, now_ms)
        )
    }

    async fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        read!(
            self,
            "pending_approvals",
            self.inner.pending_approvals(now_ms, limit)
        )
    }

    async fn ask_approval(
        &self,
        approval: &PendingApproval,
        bounds: impl Into<OpenBounds> + Send,
    ) -> Result<AskApproval, StoreError> {
        let bounds = bounds.into();
        write!(
            self,
            "ask_approval",
            self.inner.ask_approval(approval, bounds)
        )
    }

    async fn find_approval(
        &self,
        binding: &Binding<'_>,
        reason: Option<&str>,
        now_ms: u64,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        read!(
            self,
            "find_approval",
            self.inner.find_approval(binding, reason, now_ms)
        )
    }

    async fn pending_page(&self, query: &PendingQuery<'_>) -> Result<PendingPage, StoreError> {
        read!(self, "pending_page", self.inner.pending_page(query))
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> Result<DecideOutcome, StoreError> {
        write!(
            self,
            "decide_approval",
            self.inner.decide_approval(id, decision, now_ms)
        )
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
        read!(self, "approval", self.inner.approval(id))
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        read!(
            self,
            "decided_approvals",
            self.inner.decided_approvals(limit)
        )
    }

    async fn settle_approval(&self, id: &str, result: &ApprovalResult) -> Result<(), StoreError> {
        write!(
            self,
            "settle_approval",
            self.inner.settle_approval(id, result)
        )
    }

    async fn give_back_approval(&self, id: &str) -> Result<bool, StoreError> {
        write!(
            self,
            "give_back_approval",
            self.inner.give_back_approval(id)
        )
    }

    async fn sign_approval(
        &self,
        id: &str,
        signer: &str,
        needed: u32,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> Result<SignOutcome, StoreError> {
        write!(
            self,
            "sign_approval",
            self.inner
                .sign_approval(id, signer, needed, decision, now_ms)
        )
    }

    async fn signatures(&self, id: &str) -> Result<Vec<Signature>, StoreError> {
        read!(self, "signatures", self.inner.signatures(id))
    }
}

impl<S: Store> LockStore for Faulty<S> {
    async fn lock_resource(
        &self,
        resource: &Key,
        holder: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        write!(
            self,
            "lock_resource",
            self.inner.lock_resource(resource, holder, now_ms, lease_ms)
        )
    }

    async fn unlock_resource(&self, resource: &Key, holder: &str) -> Result<(), StoreError> {
        write!(
            self,
            "unlock_resource",
            self.inner.unlock_resource(resource, holder)
        )
    }
}

impl<S: Store> TaintStore for Faulty<S> {
    async fn add_taint(
        &self,
        session: &str,
        prints: &[String],
        source: &TaintSource,
    ) -> Result<(), StoreError> {
        write!(
            self,
            "add_taint",
            self.inner.add_taint(session, prints, source)
        )
    }

    async fn tainted(&self, session: &str, prints: &[String]) -> Result<TaintHit, StoreError> {
        read!(self, "tainted", self.inner.tainted(session, prints))
    }

    async fn taint_sources(&self, session: &str) -> Result<Vec<TaintSource>, StoreError> {
        read!(self, "taint_sources", self.inner.taint_sources(session))
    }
}

impl<S: Store> ControlStore for Faulty<S> {
    async fn controls(&self, known: u64) -> Result<Option<StoredControls>, StoreError> {
        read!(self, "controls", self.inner.controls(known))
    }

    async fn put_controls(
        &self,
        expected: u64,
        document: &str,
        change: &ControlsChange,
    ) -> Result<bool, StoreError> {
        write!(
            self,
            "put_controls",
            self.inner.put_controls(expected, document, change)
        )
    }

    async fn controls_history(&self, limit: usize) -> Result<Vec<ControlsChange>, StoreError> {
        read!(self, "controls_history", self.inner.controls_history(limit))
    }

    async fn take_rate(
        &self,
        bucket: &str,
        window_start_ms: u64,
        window_ms: u64,
        limit: u64,
    ) -> Result<bool, StoreError> {
        write!(
            self,
            "take_rate",
            self.inner
                .take_rate(bucket, window_start_ms, window_ms, limit)
        )
    }

    async fn rate_count(&self, bucket: &str, window_start_ms: u64) -> Result<u64, StoreError> {
        read!(
            self,
            "rate_count",
            self.inner.rate_count(bucket, window_start_ms)
        )
    }
}
