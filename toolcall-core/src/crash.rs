//! Crash points: named places in the pipeline where a test may stop the
//! process, to prove what survives a crash there.
//!
//! The library never stops itself: it calls the hook an application
//! installed with [`set_hook`], and nothing at all when none is (one atomic
//! load). A crash test installs a hook that announces the point and blocks,
//! then kills the process from outside (`SIGKILL`), as a real crash would.
//! The points:
//!
//! | point | where |
//! |---|---|
//! | [`AFTER_START`] | a call's start was made (on Postgres, a side effect's key claimed with it); no stage after it ran |
//! | [`AFTER_CLAIM`] | a side effect's key was claimed; its handler has not run |
//! | [`RETRY_BACKOFF`] | a transient failure; the wait before the next attempt |
//! | [`BEFORE_COMPLETE`] | the handler returned; its result is not stored yet |
//! | [`AFTER_COMPLETE`] | the result is stored; the call is neither answered nor audited yet |
//! | [`AWAITING_APPROVAL`] | a question to a person was stored; nobody has answered |
//! | [`BEFORE_DECISION`] | the inbox is about to record a person's decision |
//! | [`AFTER_DECISION`] | the inbox recorded a person's decision; it has not answered |

use std::sync::OnceLock;

/// A call's start was made: its step and count kept, its resource locked,
/// and, on a store that claims with the start, a side effect's key claimed;
/// no stage after it (the checks, the limits, the approval) ran.
pub const AFTER_START: &str = "after_start";
/// A side effect's key was claimed; its handler has not run.
pub const AFTER_CLAIM: &str = "after_claim";
/// A transient failure of the handler: the wait before the next attempt.
pub const RETRY_BACKOFF: &str = "retry_backoff";
/// The handler returned; its result is not stored yet.
pub const BEFORE_COMPLETE: &str = "before_complete";
/// The result is stored; the call is neither answered nor audited yet.
pub const AFTER_COMPLETE: &str = "after_complete";
/// A question to a person was stored; nobody has answered it.
pub const AWAITING_APPROVAL: &str = "awaiting_approval";
/// The inbox is about to record a person's decision.
pub const BEFORE_DECISION: &str = "before_decision";
/// The inbox recorded a person's decision and has not answered the page.
pub const AFTER_DECISION: &str = "after_decision";

static HOOK: OnceLock<fn(&'static str)> = OnceLock::new();

/// Installs the hook every crash point calls with its name, once per
/// process; `false` if one was installed before (it stays).
pub fn set_hook(hook: fn(&'static str)) -> bool {
    HOOK.set(hook).is_ok()
}

/// Calls the installed hook, if any, with `point`.
#[inline]
pub fn point(point: &'static str) {
    if let Some(hook) = HOOK.get() {
        hook(point);
    }
}
