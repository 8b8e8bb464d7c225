//! The operators' controls of [`MemoryStore`], its rate limits' windows
//! and the signatures of approvals that need more than one person.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use super::MemoryStore;
use super::shard::Window;
use crate::store::{
    ApprovalDecision, ControlsChange, ControlsWrite, RateWindow, SignOutcome, Signature,
    SignatureWrite, StoredControls, now_ms,
};
use crate::sync::lock;

/// The controls kept, and their latest changes, oldest first.
#[derive(Debug, Default)]
pub(super) struct Controls {
    current: Option<StoredControls>,
    history: VecDeque<ControlsChange>,
}

impl MemoryStore {
    /// [`ControlStore::controls`](crate::store::ControlStore::controls): nothing locked
    /// when the version kept is `known`.
    pub(super) fn read_controls(&self, known: u64) -> Option<StoredControls> {
        if self.controls_version.load(Ordering::Acquire) == known {
            return None;
        }
        lock(&self.controls)
            .current
            .clone()
            .filter(|kept| kept.version != known)
    }

    /// [`ControlStore::put_controls`](crate::store::ControlStore::put_controls), the
    /// history bounded by the store's capacity.
    pub(super) fn write_controls(&self, write: &ControlsWrite<'_>) -> bool {
        let (expected, document, change) = (write.expected, write.document, write.change);
        let mut controls = lock(&self.controls);
        let kept = controls.current.as_ref().map_or(0, |c| c.version);
        if kept != expected {
            return false;
        }
        let version = expected.saturating_add(1);
        controls.current = Some(StoredControls {
            version,
            document: document.to_owned(),
        });
        controls.history.push_back(ControlsChange {
            version,
            ..change.clone()
        });
        let cap = self.capacity_per_shard.saturating_mul(super::SHARDS);
        while controls.history.len() > cap {
            controls.history.pop_front();
        }
        self.controls_version.store(version, Ordering::Release);
        true
    }

    /// [`ControlStore::controls_history`](crate::store::ControlStore::controls_history).
    pub(super) fn controls_changes(&self, limit: usize) -> Vec<ControlsChange> {
        lock(&self.controls)
            .history
            .iter()
            .rev()
            .take(limit)
            .cloned()
            .collect()
    }

    /// [`ControlStore::take_rate`](crate::store::ControlStore::take_rate), in the
    /// bucket's shard.
    pub(super) fn take_in_window(&self, window: &RateWindow<'_>, limit: u64) -> bool {
        let mut shard = self.shard(window.bucket);
        let window = shard
            .rates
            .entry((window.bucket.to_owned(), window.start_ms))
            .or_insert(Window {
                count: 0,
                until_ms: window.start_ms.saturating_add(window.length_ms),
            });
        let counted = window.count < limit;
        if counted {
            window.count += 1;
        }
        self.maintain(&mut shard, now_ms());
        counted
    }

    /// [`ControlStore::rate_count`](crate::store::ControlStore::rate_count).
    pub(super) fn count_in_window(&self, bucket: &str, window_start_ms: u64) -> u64 {
        self.shard(bucket)
            .rates
            .get(&(bucket.to_owned(), window_start_ms))
            .map_or(0, |w| w.count)
    }

    /// [`QuestionStore::sign_approval`](crate::store::QuestionStore::sign_approval): the
    /// signature and the decision under the approval's shard's lock.
    pub(super) fn sign(&self, signing: &SignatureWrite<'_>) -> SignOutcome {
        let SignatureWrite {
            id,
            signer,
            needed,
            decision,
            now_ms,
        } = *signing;
        let mut guard = self.shard(id);
        let shard = &mut *guard;
        let Some(entry) = shard.approvals.get_mut(id) else {
            return SignOutcome::Invalid;
        };
        if entry.approval.decision.is_some() || entry.used_ms.is_some() {
            return SignOutcome::AlreadyDecided;
        }
        if entry.approval.expires_ms <= now_ms {
            return SignOutcome::Expired;
        }
        let signed = shard.signatures.entry(id.to_owned()).or_default();
        if signed.iter().any(|s| s.by == signer) {
            return SignOutcome::AlreadySigned;
        }
        signed.push(Signature {
            by: signer.to_owned(),
            at_ms: now_ms,
        });
        let signatures = u32::try_from(signed.len()).unwrap_or(u32::MAX);
        if signatures < needed {
            return SignOutcome::Signed { signatures };
        }
        let by: Vec<&str> = signed.iter().map(|s| s.by.as_str()).collect();
        entry.approval.decision = Some(ApprovalDecision {
            by: by.join(", "),
            ..decision.clone()
        });
        self.note_asked();
        SignOutcome::Decided
    }

    /// [`QuestionStore::signatures`](crate::store::QuestionStore::signatures).
    pub(super) fn signed(&self, id: &str) -> Vec<Signature> {
        self.shard(id)
            .signatures
            .get(id)
            .cloned()
            .unwrap_or_default()
    }
}
