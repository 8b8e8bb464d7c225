//! The dispatcher's knobs: [`Settings`], and where approvals come from.

use std::time::Duration;

#[cfg(doc)]
use super::{Call, Dispatcher};

/// Where a high-risk call's approval comes from ([`Settings::approvals`]).
///
/// Whatever the mode, a decision recorded in the store (a person's, in the
/// approval inbox: `toolcall-inbox`) is carried out as it is when a call
/// brings its approval id ([`Call::approval`]): a denial is
/// `CONFIRMATION_DENIED` with the person's note, an approval runs the call
/// once, an approval with edits runs the edited call, validated, checked
/// and policed again as a new call, and says so (`data.edited_by_person`,
/// `data.edited_arguments`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approvals {
    /// The host says a person approved: [`Call::confirmed`], a
    /// [`Call::approval`] id nobody decided in the store, and
    /// [`Dispatcher::approve`] each approve (the reference's behaviour).
    #[default]
    Host,
    /// Only a decision recorded in the store approves: `Call::confirmed(true)`
    /// asks like any call, and a `Call::approval(id)` nobody decided yet is
    /// answered `CONFIRMATION_REQUIRED` again with the same id, which stays
    /// unused. [`Dispatcher::approve`] and [`Dispatcher::deny`] record the
    /// host's decision in the store first.
    Inbox,
}

/// The knobs of the pipeline. The defaults of the first four are the
/// reference implementation's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// Tool calls a session may make, whatever their outcome (default 10).
    pub max_steps: u64,
    /// How many times one exact call (same session, tool and validated
    /// arguments) may be made before `LOOP_DETECTED` (default 3). A
    /// read-only tool may set its own bound (`#[tool(max_repeats = N)]`),
    /// and a caller's `Policy::max_repeats` replaces both; a side effect
    /// always has this one.
    pub max_duplicate_calls: u64,
    /// Retries after a transient failure, under the same idempotency key
    /// (default 2): of the handler, and of the business check (which has no
    /// side effects), each with the same backoff.
    pub max_retries: u32,
    /// Wait before retry `n` (1-based): `n` times this (default 200 ms).
    /// Waits and the bound they put on a claim's lease saturate: large
    /// values mean long waits, never an overflow.
    pub retry_backoff: Duration,
    /// Largest raw arguments text accepted, in bytes (default 64 KiB).
    pub max_argument_bytes: usize,
    /// Deepest nesting of arrays and objects accepted in raw arguments (default 32).
    pub max_depth: usize,
    /// How long one attempt of a tool may run before `TIMEOUT`, unless the
    /// tool sets its own with `#[tool(timeout_ms = ...)]` (default: no limit).
    /// A timeout needs a tokio runtime with its timer enabled, as do the
    /// waits between retries and for a call holding a claim or a resource
    /// another call needs.
    pub timeout: Option<Duration>,
    /// How long an identical side-effecting call waits for one already in
    /// flight before answering `CALL_IN_PROGRESS` (default 10 s). A call
    /// over [`max_duplicate_calls`](Settings::max_duplicate_calls) whose
    /// identical calls are still running in this dispatcher waits as long
    /// for their answer (see [`Dispatcher`]). A wait too long for the
    /// clock to express (`Duration::MAX`) has no deadline.
    pub claim_wait: Duration,
    /// How long a person has to approve a high-risk call, and the call to
    /// be carried out once approved (default 15 min). A question about an
    /// unknown outcome never expires: it is a person's until settled.
    pub approval_ttl: Duration,
    /// How long a denial (or an edit) answers the identical calls, counted
    /// from the decision (default a day,
    /// [`DENIAL_TTL`](crate::life::DENIAL_TTL)): the decision is final, and
    /// the model is not let to ask the person again meanwhile.
    pub denial_ttl: Duration,
    /// The conversation of calls that name none ([`Call::session`]);
    /// `None`, the default, refuses them with `CONVERSATION_REQUIRED`. An
    /// application with one conversation (a command line, a test) names it
    /// here, on purpose.
    pub default_session: Option<String>,
    /// How many questions to a person one conversation of one caller may
    /// have open at once (default 20): a looping agent cannot bury the
    /// others' in the inbox. One more is refused with its own code, and
    /// nothing runs.
    pub max_pending_approvals: usize,
    /// How many questions to a person one caller may have open at once, in
    /// all its conversations together (default 100): a client that names a
    /// fresh conversation for every call is bounded all the same. A
    /// question about an unknown outcome is never refused for either bound:
    /// it must reach a person.
    pub max_pending_per_caller: usize,
    /// How many questions to a person one principal (the person or client
    /// behind a caller, [`Caller::with_principal`](crate::Caller::with_principal))
    /// may have open at once, in all its conversations together (default
    /// 20): several principals mapped to one caller share its bound, and
    /// none can fill it for the others.
    pub max_pending_per_principal: usize,
    /// Whether callers that name the same conversation share it (default
    /// `false`). A call's identity always includes its caller: replays, the
    /// loop guard's counts, claims and questions to a person never cross
    /// callers. Apart (the default), each caller's calls in a conversation
    /// are a conversation of their own too: its step budget and the taint
    /// of untrusted output it read. Shared, the step budget and the taint
    /// are the conversation's, whoever calls: one caller's read of
    /// untrusted output makes the others' side effects in it ask a person.
    pub callers_share_conversations: bool,
    /// How long a claim on a key, or a lock on a resource, holds without
    /// being renewed (default 30 s). While a call runs, the dispatcher renews
    /// both every third of this, so a live call is never taken over however
    /// long it runs; a process that dies frees them within this time.
    pub claim_lease: Duration,
    /// The most of a result's model text the model gets, in bytes, unless
    /// the tool sets its own with `#[tool(max_output_bytes = ...)]`
    /// (default: no bound). A larger result is cut to fit and stays valid
    /// JSON of the same shape: long strings keep their head, long arrays
    /// their first items; `data.truncated` is `true` and the message tells
    /// the model to narrow its request. The budget cuts data, never
    /// control: the code, the message, the question id and `replayed`,
    /// and a failure's `data.pending`, `reason`, `tainted`, `in_doubt`,
    /// `happened`, `edited_by_person`, `edited_arguments` and `available`
    /// are kept whole at any budget, and the data keeps at least the head
    /// of its strings and the first item of its arrays, even over a very
    /// small budget. The audit keeps the whole result's size and SHA-256
    /// ([`AuditRecord::cut`](crate::AuditRecord::cut), field `result`).
    pub max_output_bytes: Option<usize>,
    /// Where a high-risk call's approval comes from (default
    /// [`Approvals::Host`], the reference's behaviour).
    pub approvals: Approvals,
}

impl Settings {
    /// The conversation a call of `caller` in `session` counts its steps and
    /// keeps its taint in, as the store sees it: `session` itself when
    /// callers share conversations, else `caller:<caller id length>:<caller
    /// id>/<session>`, whose parts read back unambiguously (two callers, or
    /// two sessions, never share one). What a host reads the store's step
    /// counts and taint by ([`CallStore::peek_step`](crate::store::CallStore::peek_step)).
    ///
    /// ```
    /// let settings = toolcall_core::Settings::default();
    /// assert_eq!(settings.conversation_scope("support", "chat-7"), "caller:7:support/chat-7");
    /// ```
    pub fn conversation_scope<'a>(
        &self,
        caller: &str,
        session: &'a str,
    ) -> std::borrow::Cow<'a, str> {
        if self.callers_share_conversations {
            std::borrow::Cow::Borrowed(session)
        } else {
            std::borrow::Cow::Owned(super::ids::scope_text(caller, session))
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_steps: 10,
            max_duplicate_calls: 3,
            max_retries: 2,
            retry_backoff: Duration::from_millis(200),
            max_argument_bytes: 64 * 1024,
            max_depth: 32,
            timeout: None,
            claim_wait: Duration::from_secs(10),
            approval_ttl: Duration::from_secs(15 * 60),
            denial_ttl: crate::life::DENIAL_TTL,
            max_pending_approvals: 20,
            max_pending_per_caller: 100,
            max_pending_per_principal: 20,
            callers_share_conversations: false,
            default_session: None,
            claim_lease: Duration::from_secs(30),
            max_output_bytes: None,
            approvals: Approvals::Host,
        }
    }
}
