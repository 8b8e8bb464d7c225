//! A shared store: the [`Store`] contract over an [`Arc`](std::sync::Arc) of one.

use super::{Transaction, Unlock};
use std::future::Future;

use crate::result::ToolResult;

use super::{
    ApprovalEntry, ApprovalLookup, ApprovalResult, ApprovalUse, AskApproval, CallBegun, CallStart,
    CallStore, Claim, Completion, ControlStore, ControlsChange, ControlsWrite, DecideOutcome,
    DecisionWrite, Exposure, Key, Lease, LockAsk, LockStore, OpenBounds, PendingApproval,
    PendingPage, PendingQuery, QuestionLease, QuestionStore, RateWindow, RecordedOutcome,
    SignOutcome, Signature, SignatureWrite, Store, StoreError, StoredControls, TaintHit,
    TaintSource, TaintStore, TakeApproval, Unsettled,
};

/// A shared store: several dispatchers (or tests) over one set of records.
impl<T: Store> CallStore for std::sync::Arc<T> {
    fn next_step(
        &self,
        session: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).next_step(session, now_ms)
    }

    fn peek_step(&self, session: &str) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).peek_step(session)
    }

    fn begin_call(
        &self,
        start: &CallStart<'_>,
    ) -> impl Future<Output = Result<CallBegun, StoreError>> + Send {
        (**self).begin_call(start)
    }

    fn locks_at_start(&self) -> bool {
        (**self).locks_at_start()
    }

    fn complete_unlocking(
        &self,
        done: &Completion<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).complete_unlocking(done)
    }

    fn transaction(&self) -> Option<std::sync::Arc<dyn Transaction>> {
        (**self).transaction()
    }

    fn complete_in(
        &self,
        transaction: &dyn Transaction,
        key: &Key,
        result: &ToolResult,
        unlock: Option<Unlock<'_>>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).complete_in(transaction, key, result, unlock)
    }

    fn count_call(
        &self,
        key: &Key,
        now_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).count_call(key, now_ms)
    }

    fn uncount_call(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).uncount_call(key)
    }

    fn outcome(
        &self,
        key: &Key,
    ) -> impl Future<Output = Result<Option<RecordedOutcome>, StoreError>> + Send {
        (**self).outcome(key)
    }

    fn claim(
        &self,
        key: &Key,
        lease: Lease,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        (**self).claim(key, lease)
    }

    fn claim_asking(
        &self,
        key: &Key,
        asking: &QuestionLease<'_>,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        (**self).claim_asking(key, asking)
    }

    fn unsettled(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Unsettled>, StoreError>> + Send {
        (**self).unsettled(now_ms, limit)
    }

    fn renew(
        &self,
        key: &Key,
        lease: Lease,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).renew(key, lease)
    }

    fn complete(
        &self,
        key: &Key,
        result: &ToolResult,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).complete(key, result)
    }

    fn release(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).release(key)
    }

    fn doubt(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).doubt(key)
    }
}

impl<T: Store> QuestionStore for std::sync::Arc<T> {
    fn put_approval(
        &self,
        approval: &PendingApproval,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).put_approval(approval)
    }

    fn take_approval(
        &self,
        taking: &ApprovalUse<'_>,
    ) -> impl Future<Output = Result<TakeApproval, StoreError>> + Send {
        (**self).take_approval(taking)
    }

    fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<PendingApproval>, StoreError>> + Send {
        (**self).pending_approvals(now_ms, limit)
    }

    fn ask_approval(
        &self,
        approval: &PendingApproval,
        bounds: impl Into<OpenBounds> + Send,
    ) -> impl Future<Output = Result<AskApproval, StoreError>> + Send {
        (**self).ask_approval(approval, bounds)
    }

    fn find_approval(
        &self,
        lookup: &ApprovalLookup<'_>,
    ) -> impl Future<Output = Result<Option<ApprovalEntry>, StoreError>> + Send {
        (**self).find_approval(lookup)
    }

    fn pending_page(
        &self,
        query: &PendingQuery<'_>,
    ) -> impl Future<Output = Result<PendingPage, StoreError>> + Send {
        (**self).pending_page(query)
    }

    fn decide_approval(
        &self,
        deciding: &DecisionWrite<'_>,
    ) -> impl Future<Output = Result<DecideOutcome, StoreError>> + Send {
        (**self).decide_approval(deciding)
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

    fn give_back_approval(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).give_back_approval(id)
    }

    fn wait_approval(
        &self,
        id: &str,
        until_ms: u64,
    ) -> impl Future<Output = Result<Option<ApprovalEntry>, StoreError>> + Send {
        (**self).wait_approval(id, until_ms)
    }

    fn sign_approval(
        &self,
        signing: &SignatureWrite<'_>,
    ) -> impl Future<Output = Result<SignOutcome, StoreError>> + Send {
        (**self).sign_approval(signing)
    }

    fn signatures(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Vec<Signature>, StoreError>> + Send {
        (**self).signatures(id)
    }
}

impl<T: Store> LockStore for std::sync::Arc<T> {
    fn lock_resource(
        &self,
        lock: &LockAsk<'_>,
        now_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).lock_resource(lock, now_ms)
    }

    fn unlock_resource(
        &self,
        resource: &Key,
        holder: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).unlock_resource(resource, holder)
    }
}

impl<T: Store> TaintStore for std::sync::Arc<T> {
    fn add_taint(
        &self,
        seen: &Exposure<'_>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).add_taint(seen)
    }

    fn taint_sources(
        &self,
        session: &str,
    ) -> impl Future<Output = Result<Vec<TaintSource>, StoreError>> + Send {
        (**self).taint_sources(session)
    }

    fn tainted(
        &self,
        session: &str,
        fingerprints: &[String],
    ) -> impl Future<Output = Result<TaintHit, StoreError>> + Send {
        (**self).tainted(session, fingerprints)
    }
}

impl<T: Store> ControlStore for std::sync::Arc<T> {
    fn controls(
        &self,
        known: u64,
    ) -> impl Future<Output = Result<Option<StoredControls>, StoreError>> + Send {
        (**self).controls(known)
    }

    fn put_controls(
        &self,
        write: &ControlsWrite<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).put_controls(write)
    }

    fn controls_history(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<ControlsChange>, StoreError>> + Send {
        (**self).controls_history(limit)
    }

    fn take_rate(
        &self,
        window: &RateWindow<'_>,
        limit: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        (**self).take_rate(window, limit)
    }

    fn rate_count(
        &self,
        bucket: &str,
        window_start_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        (**self).rate_count(bucket, window_start_ms)
    }
}
