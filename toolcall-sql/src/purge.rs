//! Retention and purging: what a purge deletes ([`Purged`] counts it by
//! kind), and when a store purges by itself ([`Retention`]).
//!
//! A store deletes, a batch of at most [`BATCH`] rows of each kind after
//! every so many writes ([`Retention::set_every`]) through a handle, or all at once when
//! asked:
//!
//! * steps, call counts and records untouched for the retention window,
//!   except a claim whose lease is still running;
//! * undecided approvals past their expiry, and decided ones (the inbox's
//!   history) once their expiry is older than the retention window;
//! * resource locks whose lease ran out;
//! * the taint of untrusted output, untouched for the retention window;
//! * rate limits' windows that ended;
//! * signatures of approvals no longer kept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::to_sql;

/// Rows of each kind one automatic purge deletes at most, so that a write
/// that triggers it stays short.
pub const BATCH: i64 = 10_000;

/// What a purge deleted, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    /// Step counts of sessions untouched for the retention window.
    pub steps: usize,
    /// Call counts untouched for the retention window.
    pub calls: usize,
    /// Idempotency records untouched for the retention window (never a
    /// claim whose lease is running).
    pub records: usize,
    /// Approvals past their expiry.
    pub approvals: usize,
    /// Resource locks whose lease ran out.
    pub locks: usize,
    /// Rows of untrusted output's taint (a session's mark, a fingerprint)
    /// untouched for the retention window.
    pub taint: usize,
    /// Rate limits' windows that ended.
    pub rates: usize,
    /// Signatures of approvals no longer kept (taken undecided, or purged).
    pub signatures: usize,
}

impl Purged {
    /// Rows deleted, of every kind.
    pub fn total(&self) -> usize {
        self.steps
            + self.calls
            + self.records
            + self.approvals
            + self.locks
            + self.taint
            + self.rates
            + self.signatures
    }
}

/// One kind of row a purge deletes: its table, the condition an expired
/// row meets, and the order a batch takes them in.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// The field of [`Purged`] that counts it.
    pub name: &'static str,
    /// Its table.
    pub table: &'static str,
    /// The indexed column its condition reads (`None`: no index serves
    /// it): see [`oldest_first`](Kind::oldest_first).
    oldest_first: Option<&'static str>,
    /// The condition, with `{cutoff}` for the retention's cutoff and
    /// `{now}` for the time of the purge.
    condition: &'static str,
}

impl Kind {
    /// The condition an expired row meets, with `cutoff` and `now` the
    /// statement's parameters (`?1`, `$1`...) for the retention's cutoff
    /// ([`Retention::cutoff`]) and the time of the purge.
    pub fn condition(&self, cutoff: &str, now: &str) -> String {
        self.condition
            .replace("{cutoff}", cutoff)
            .replace("{now}", now)
    }

    /// ` ORDER BY` the indexed column the condition reads, or nothing when
    /// no index serves it: a batch takes the oldest rows first, and walks
    /// that index to find them even in a plan made without the values
    /// (Postgres's generic plans), where a condition alone would have it
    /// read the whole table at every batch.
    pub fn oldest_first(&self) -> String {
        self.oldest_first
            .map(|column| format!(" ORDER BY {column}"))
            .unwrap_or_default()
    }
}

/// Every kind a purge deletes, in the order of [`purged`]'s counts.
pub const KINDS: [Kind; 8] = [
    Kind {
        name: "steps",
        table: "toolcall_steps",
        oldest_first: Some("touched_ms"),
        condition: "touched_ms < {cutoff}",
    },
    Kind {
        name: "calls",
        table: "toolcall_calls",
        oldest_first: Some("touched_ms"),
        condition: "touched_ms < {cutoff}",
    },
    // Never a claim whose lease is running.
    Kind {
        name: "records",
        table: "toolcall_records",
        oldest_first: Some("touched_ms"),
        condition: "touched_ms < {cutoff} AND (state <> 'in_flight' OR until_ms <= {now})",
    },
    // Undecided approvals go at their expiry; decided ones stay in the
    // inbox's history for the retention window after it.
    Kind {
        name: "approvals",
        table: "toolcall_approvals",
        oldest_first: Some("expires_ms"),
        condition: "expires_ms <= {now} AND (decision IS NULL OR expires_ms < {cutoff})",
    },
    Kind {
        name: "locks",
        table: "toolcall_locks",
        oldest_first: Some("until_ms"),
        condition: "until_ms <= {now}",
    },
    Kind {
        name: "taint",
        table: "toolcall_taint",
        oldest_first: Some("touched_ms"),
        condition: "touched_ms < {cutoff}",
    },
    Kind {
        name: "rates",
        table: "toolcall_rates",
        oldest_first: Some("until_ms"),
        condition: "until_ms <= {now}",
    },
    // Kept as long as their approval is. The approval is looked up by its
    // key for each signature: `LIMIT 1 OFFSET 0` keeps the lookup a
    // subquery, which Postgres would otherwise turn into a join that reads
    // every approval at every batch.
    Kind {
        name: "signatures",
        table: "toolcall_signatures",
        oldest_first: None,
        condition: "NOT EXISTS (SELECT 1 FROM toolcall_approvals AS a \
                    WHERE a.id = toolcall_signatures.id LIMIT 1 OFFSET 0)",
    },
];

/// What a purge deleted, from its counts of each of [`KINDS`], in order.
pub fn purged(counts: [usize; 8]) -> Purged {
    Purged {
        steps: counts[0],
        calls: counts[1],
        records: counts[2],
        approvals: counts[3],
        locks: counts[4],
        taint: counts[5],
        rates: counts[6],
        signatures: counts[7],
    }
}

/// A store's retention window and how often it purges by itself, with the
/// writes counted toward the next purge.
#[derive(Debug)]
pub struct Retention {
    window_ms: u64,
    every: u64,
    writes: AtomicU64,
}

impl Default for Retention {
    /// 24 hours; a purge every 1000 writes.
    fn default() -> Self {
        Retention {
            window_ms: 24 * 60 * 60 * 1000,
            every: 1000,
            writes: AtomicU64::new(0),
        }
    }
}

impl Retention {
    /// Keeps steps, call counts and records for `window` after their last
    /// use.
    pub fn set_window(&mut self, window: Duration) {
        self.window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
    }

    /// Purges after every `writes` writes; 0 never does.
    pub fn set_every(&mut self, writes: u64) {
        self.every = writes;
    }

    /// What was last touched before this (as the columns hold milliseconds)
    /// is older than the window at `now_ms`.
    pub fn cutoff(&self, now_ms: u64) -> i64 {
        to_sql(now_ms.saturating_sub(self.window_ms))
    }

    /// Counts one write: `true` when it is the one that purges a batch
    /// ([`BATCH`]). A failed purge is not the writer's failure (its write
    /// is done): the next turn tries again.
    pub fn wrote(&self) -> bool {
        let writes = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        self.every > 0 && writes.is_multiple_of(self.every)
    }
}
