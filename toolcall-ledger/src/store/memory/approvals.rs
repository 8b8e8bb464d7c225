//! The approval helpers of [`MemoryStore`]: listing, keeping and
//! matching the approvals of every shard.

use super::MemoryStore;
use crate::store::{ApprovalEntry, PendingApproval, now_ms};
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
