//! The questions of [`MemoryStore`]: its [`QuestionStore`], and the helpers
//! that list, keep and match the questions of every shard.

use super::MemoryStore;
use crate::store::{
    ApprovalEntry, ApprovalLookup, ApprovalResult, ApprovalUse, AskApproval, DecideOutcome,
    DecisionWrite, OpenBounds, PendingApproval, PendingCursor, PendingOrder, PendingPage,
    PendingQuery, QuestionStore, SignOutcome, Signature, SignatureWrite, StoreError, TakeApproval,
    now_ms,
};
use crate::sync::lock;

impl MemoryStore {
    /// The approvals `keep` admits, of every shard, cloned (one shard
    /// locked at a time).
    pub(super) fn approvals_where(
        &self,
        keep: impl Fn(&ApprovalEntry) -> bool,
    ) -> Vec<ApprovalEntry> {
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
    pub(super) fn insert_approval(&self, approval: &PendingApproval) {
        self.note_asked();
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

    /// Notes that a question was asked (before it is written, so that no
    /// call's start misses it).
    pub(super) fn note_asked(&self) {
        self.any_asked
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Whether two approvals were asked for the same call by the same
/// requester: the same session, caller, tool, digest, reason and principal.
pub(super) fn same_call(a: &PendingApproval, b: &PendingApproval) -> bool {
    a.session == b.session
        && a.caller == b.caller
        && a.tool == b.tool
        && a.digest == b.digest
        && a.reason == b.reason
        && a.same_requester(b)
}

impl QuestionStore for MemoryStore {
    async fn put_approval(&self, approval: &PendingApproval) -> Result<(), StoreError> {
        self.insert_approval(approval);
        Ok(())
    }

    async fn take_approval(&self, taking: &ApprovalUse<'_>) -> Result<TakeApproval, StoreError> {
        let (id, binding, now_ms) = (taking.id, taking.binding, taking.now_ms);
        let mut shard = self.shard(id);
        let Some(entry) = shard.approvals.get_mut(id) else {
            return Ok(TakeApproval::Invalid);
        };
        if entry.used_ms.is_some() || !binding.matches(&entry.approval) {
            return Ok(TakeApproval::Invalid);
        }
        if entry.approval.expires_ms <= now_ms {
            // Left as it is: an expired question reads expired to everyone
            // after, never used up by a take that could not carry it out.
            return Ok(TakeApproval::Expired);
        }
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
        Ok(TakeApproval::Taken(taken))
    }

    async fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        let mut open: Vec<PendingApproval> = self
            .approvals_where(|entry| entry.is_open(now_ms))
            .into_iter()
            .map(|entry| entry.approval)
            .collect();
        open.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        open.truncate(limit);
        Ok(open)
    }

    async fn ask_approval(
        &self,
        approval: &PendingApproval,
        bounds: impl Into<OpenBounds> + Send,
    ) -> Result<AskApproval, StoreError> {
        let bounds = bounds.into();
        let _asking = lock(&self.asks);
        let at = approval.created_ms;
        let mut existing: Option<ApprovalEntry> = None;
        let (mut in_conversation, mut of_caller, mut of_requester) = (0usize, 0usize, 0usize);
        let requester = approval.requester();
        for shard in self.shards.iter() {
            for entry in lock(shard).approvals.values() {
                let a = &entry.approval;
                if a.caller != approval.caller {
                    continue;
                }
                if entry.is_open(at) {
                    of_caller += 1;
                    if a.session == approval.session {
                        in_conversation += 1;
                    }
                    if requester.is_some() && a.requester() == requester {
                        of_requester += 1;
                    }
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
        if let Some(full) = bounds.over(in_conversation, of_caller, of_requester) {
            return Ok(full);
        }
        self.insert_approval(approval);
        Ok(AskApproval::Created)
    }

    async fn find_approval(
        &self,
        lookup: &ApprovalLookup<'_>,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        Ok(self
            .approvals_where(|entry| {
                lookup.binding.matches(&entry.approval)
                    && entry.approval.reason.as_deref() == lookup.reason
                    && entry.approval.expires_ms > lookup.now_ms
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
        deciding: &DecisionWrite<'_>,
    ) -> Result<DecideOutcome, StoreError> {
        let decision = deciding.decision;
        let mut shard = self.shard(deciding.id);
        let Some(entry) = shard.approvals.get_mut(deciding.id) else {
            return Ok(DecideOutcome::Invalid);
        };
        Ok(
            if entry.approval.decision.is_some() || entry.used_ms.is_some() {
                DecideOutcome::AlreadyDecided
            } else if entry.approval.expires_ms <= deciding.now_ms {
                DecideOutcome::Expired
            } else {
                self.note_asked();
                entry.approval.decision = Some(decision.clone());
                // A denial or an edit stands for its own period.
                if let Some(until) = decision.lasts_until_ms {
                    entry.approval.expires_ms = entry.approval.expires_ms.max(until);
                }
                DecideOutcome::Decided
            },
        )
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
        Ok(self.shard(id).approvals.get(id).cloned())
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        let mut decided = self.approvals_where(|entry| entry.approval.decision.is_some());
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

    async fn give_back_approval(&self, id: &str) -> Result<bool, StoreError> {
        // Under the lock of questions asked: no identical question is asked
        // between the look and the change.
        let _asking = lock(&self.asks);
        let given = |entry: &ApprovalEntry| {
            entry.approval.decision.is_some() && entry.used_ms.is_some() && entry.result.is_none()
        };
        let approval = match self.shard(id).approvals.get(id) {
            Some(entry) if given(entry) => entry.approval.clone(),
            _ => return Ok(false),
        };
        for shard in self.shards.iter() {
            if lock(shard).approvals.values().any(|other| {
                other.approval.id != approval.id
                    && other.used_ms.is_none()
                    && same_call(&other.approval, &approval)
            }) {
                return Ok(false);
            }
        }
        let mut shard = self.shard(id);
        match shard.approvals.get_mut(id) {
            Some(entry) if given(entry) => {
                entry.used_ms = None;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn sign_approval(&self, signing: &SignatureWrite<'_>) -> Result<SignOutcome, StoreError> {
        Ok(self.sign(signing))
    }

    async fn signatures(&self, id: &str) -> Result<Vec<Signature>, StoreError> {
        Ok(self.signed(id))
    }
}
