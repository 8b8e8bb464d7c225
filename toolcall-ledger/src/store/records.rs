//! What a store's methods take and answer, besides a question's records
//! ([`crate::question`]): a call's record and claim, the start of a call,
//! the pages of the inbox, the operators' controls as kept.

use serde::{Deserialize, Serialize};

use super::{ApprovalDecision, Binding, Key, PendingApproval, TaintSource};
use crate::result::ToolResult;

/// What the store knows of a key's call beyond "nothing yet".
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // returned once per call, never stored
#[non_exhaustive]
pub enum RecordedOutcome {
    /// The call completed: its stored result is the answer to every
    /// identical call from then on. Boxed: the other outcomes carry
    /// nothing, and an outcome travels inside [`CallBegun`] with every
    /// call's start, a side effect's and a read's alike, moved at each
    /// step; inline, the answer made each of those a copy of its 160
    /// bytes.
    Completed(Box<ToolResult>),
    /// The call's effect is unknown: its last attempt failed in a way that
    /// leaves it open (a lost response, a timeout), or its claim's lease ran
    /// out with no outcome (the process died after the claim). It may or may
    /// not have happened. The next identical call asks the tool's
    /// `reconcile` function, runs it again under the same key when the
    /// tool's backend honours the key (`#[tool(idempotent_backend)]`), and
    /// otherwise never runs it blindly: a person answers it.
    InDoubt,
    /// An identical call holds the key and its lease still runs: it is
    /// executing now (in this process or another), or died so recently that
    /// its lease has not run out yet. An identical call waits for it.
    InFlight,
}

/// What a claim on an idempotency key found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Claim {
    /// The caller now holds the key and must execute, then
    /// [`complete`](super::CallStore::complete) or [`release`](super::CallStore::release) it.
    Acquired,
    /// The call was completed before: its stored result.
    Completed(ToolResult),
    /// Another caller holds the key and its lease has not run out.
    InFlight,
    /// A caller held the key and its lease ran out with no outcome recorded
    /// (its process died, or its call was dropped, after the claim): the
    /// effect may have happened. The key is now *in doubt* and held by
    /// nobody; the caller settles it as the tool's backend allows (see
    /// [`RecordedOutcome::InDoubt`]).
    Abandoned,
}

/// A key whose outcome is unknown, and the question its claim kept
/// (`CallStore::unsettled`).
#[derive(Clone, Debug, PartialEq)]
pub struct Unsettled {
    /// The call's idempotency key.
    pub key: Key,
    /// The question a person is asked about it.
    pub question: PendingApproval,
}

/// What a session's taint says of one call ([`TaintStore::tainted`](super::TaintStore::tainted)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaintHit {
    /// Whether the session saw any untrusted output at all.
    pub any: bool,
    /// Those of the fingerprints asked about that an untrusted output of the
    /// session held, in the order asked.
    pub seen: Vec<String>,
}

impl TaintHit {
    /// A hit: whether the session saw untrusted output, and which of the
    /// fingerprints asked about it held.
    pub fn new(any: bool, seen: Vec<String>) -> Self {
        TaintHit { any, seen }
    }
}

/// What a call asks of the store as it begins ([`CallStore::begin_call`](super::CallStore::begin_call)): the
/// reads and writes the pipeline makes before stage 5, which a store that
/// talks to a server can make in one round trip.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct CallStart<'a> {
    /// The call's conversation as the store counts it: its step is counted,
    /// its taint read. The dispatcher scopes it to the caller unless callers
    /// share conversations (`Settings::callers_share_conversations`).
    pub session: &'a str,
    /// The conversation as the call named it: the session its approvals are
    /// asked in, which `decided` looks at. The same as `session` unless the
    /// dispatcher scoped that one.
    pub named: &'a str,
    /// The call's idempotency key: it is counted, when the step is within
    /// `max_steps`.
    pub key: &'a Key,
    /// When the call came: the time its step and its count are taken at.
    pub now_ms: u64,
    /// The session's step budget: a step over it counts nothing else.
    pub max_steps: u64,
    /// How many identical calls may be made: what is recorded of the key
    /// is read, and the resource locked, only for a count within it.
    pub max_calls: u64,
    /// Whether to read what is recorded of the key (a side effect's).
    pub outcome: bool,
    /// Whether to say if the session saw untrusted output.
    pub taint: bool,
    /// Whether to say if the conversation `named` has a question to a
    /// person, unexpired at `now_ms`: asked or decided, used or not (a
    /// decision, even one carried out, may answer the call; an open question
    /// may be one the host's `confirmed` does not answer).
    pub questions: bool,
    /// A resource to lock, when the call will go on to stages 5 to 8: its
    /// count within `max_calls`, and its key neither completed nor held by
    /// a running claim. The dispatcher asks for it only of a store whose
    /// [`CallStore::locks_at_start`](super::CallStore::locks_at_start) is
    /// `true`; of another it takes the lock as the business check begins.
    pub lock: Option<LockAsk<'a>>,
    /// The version of the operators' controls the call was judged by (0:
    /// none written), when the store is to make sure of it: if the version
    /// kept is another, nothing is counted, read or locked, and
    /// [`CallBegun::controls_moved`] says so (the caller reads the controls
    /// anew and starts the call again). `None`: not looked at.
    pub controls: Option<u64>,
    /// The call is its conversation's only one (a read-only call of a
    /// conversation made for it): its step is 1 and its count 1, and
    /// neither is kept.
    pub alone: bool,
    /// A side effect's claim of its key, taken with the start when the
    /// store can (`Some`: until when, in ms since the epoch): only if
    /// nothing is recorded of the key, the count is within `max_calls`, the
    /// lock asked for (if any) was taken, the session saw no untrusted
    /// output (when `taint`) and the conversation has no question (when
    /// `questions`). Such a start is a durable commit, as
    /// [`CallStore::claim`](super::CallStore::claim) is; one that claims
    /// says so in [`CallBegun::claimed`]. A store may ignore it: the
    /// caller claims at stage 8 as it would otherwise.
    pub claim: Option<u64>,
}

impl<'a> CallStart<'a> {
    /// A call's start that counts its step and (within `max_steps`) its
    /// key, and asks nothing else.
    pub fn new(session: &'a str, key: &'a Key, now_ms: u64, max_steps: u64) -> Self {
        CallStart {
            session,
            named: session,
            key,
            now_ms,
            max_steps,
            max_calls: u64::MAX,
            outcome: false,
            taint: false,
            questions: false,
            lock: None,
            controls: None,
            alone: false,
            claim: None,
        }
    }
}

/// A resource lock asked for with a call's start ([`CallStart::lock`]),
/// as [`LockStore::lock_resource`](super::LockStore::lock_resource) takes it.
#[derive(Clone, Copy, Debug)]
pub struct LockAsk<'a> {
    /// The resource's key.
    pub resource: &'a Key,
    /// Who holds it.
    pub holder: &'a str,
    /// For how long, from the call's time.
    pub lease_ms: u64,
}

/// What the store found as a call began ([`CallStore::begin_call`](super::CallStore::begin_call)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallBegun {
    /// The session's new step count.
    pub step: u64,
    /// The key's new count; `None` when the step was over the budget and
    /// the call was not counted.
    pub calls: Option<u64>,
    /// What is recorded of the key, as [`CallStore::outcome`](super::CallStore::outcome) says it: read
    /// only when asked and the count is within `max_calls` (`None`
    /// otherwise, and for a free key).
    pub outcome: Option<RecordedOutcome>,
    /// Whether the session saw untrusted output, when asked; `None` when
    /// the store did not look (the caller asks [`TaintStore::tainted`](super::TaintStore::tainted)).
    pub tainted: Option<bool>,
    /// Whether the conversation `named` has a question, unexpired, asked or
    /// decided, used or not, when asked; `None` when the store did not look
    /// (the caller asks [`QuestionStore::find_approval`](super::QuestionStore::find_approval)).
    pub questions: Option<bool>,
    /// Whether the resource asked for is now locked by its holder.
    pub locked: bool,
    /// The operators' controls kept are not the version
    /// [`CallStart::controls`] named: nothing was counted, read or locked
    /// (every other field is its default).
    pub controls_moved: bool,
    /// The key was claimed with the start ([`CallStart::claim`]): the
    /// caller holds it as it would hold a [`Claim::Acquired`](super::Claim::Acquired),
    /// and releases it ([`CallStore::release`](super::CallStore::release))
    /// if the call does not run.
    pub claimed: bool,
}

/// The operators' controls as a store keeps them
/// ([`ControlStore::put_controls`](super::ControlStore::put_controls)): a version, counted from 1 by every write, and
/// the document (JSON of [`Controls`](crate::controls::Controls)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredControls {
    /// 1 for the first document written, one more for each after.
    pub version: u64,
    /// The document, as written.
    pub document: String,
}

/// One change of the operators' controls, as the store's history keeps it:
/// who made it, when, and what it changed, in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlsChange {
    /// The version the change wrote.
    pub version: u64,
    /// Who made it (an operator's name, `admin` token's holder, a file's
    /// path).
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What changed, in words (`stopped tool refund_order: fraud wave`).
    pub summary: String,
}

/// A lease: held from `now_ms` for `lease_ms`, as a claim
/// ([`CallStore::claim`](super::CallStore::claim)) and its renewal
/// ([`CallStore::renew`](super::CallStore::renew)) take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// When it is taken: the caller's time.
    pub now_ms: u64,
    /// For how long: it runs out at `now_ms + lease_ms`.
    pub lease_ms: u64,
}

/// A claim's lease and the question it keeps
/// ([`CallStore::claim_asking`](super::CallStore::claim_asking)).
#[derive(Clone, Copy, Debug)]
pub struct QuestionLease<'a> {
    /// The claim's lease.
    pub lease: Lease,
    /// The question a person is asked if the call's outcome stays unknown.
    pub question: &'a PendingApproval,
}

/// A call's result to store, and the resource lock to free with it
/// ([`CallStore::complete_unlocking`](super::CallStore::complete_unlocking)).
#[derive(Clone, Copy, Debug)]
pub struct Completion<'a> {
    /// The call's idempotency key, which it holds.
    pub key: &'a Key,
    /// What the call answered.
    pub result: &'a ToolResult,
    /// The resource whose lock is freed.
    pub resource: &'a Key,
    /// Who must still hold that lock for it to be freed.
    pub holder: &'a str,
}

/// What a session saw of untrusted output
/// ([`TaintStore::add_taint`](super::TaintStore::add_taint)).
#[derive(Clone, Copy, Debug)]
pub struct Exposure<'a> {
    /// The session that saw it.
    pub session: &'a str,
    /// The fingerprints of its values (hex digests, never the text); none
    /// marks the session only.
    pub fingerprints: &'a [String],
    /// Where it came from.
    pub source: &'a TaintSource,
}

/// A write of the operators' controls
/// ([`ControlStore::put_controls`](super::ControlStore::put_controls)).
#[derive(Clone, Copy, Debug)]
pub struct ControlsWrite<'a> {
    /// The version the writer read (0: none yet); another kept means
    /// another writer came first.
    pub expected: u64,
    /// The document to write (JSON of [`Controls`](crate::controls::Controls)).
    pub document: &'a str,
    /// The change, for the history; its `version` is set to the one written.
    pub change: &'a ControlsChange,
}

/// One fixed window of a rate limit
/// ([`ControlStore::take_rate`](super::ControlStore::take_rate)).
#[derive(Clone, Copy, Debug)]
pub struct RateWindow<'a> {
    /// The rate limit's bucket.
    pub bucket: &'a str,
    /// When the window starts: a multiple of its length.
    pub start_ms: u64,
    /// The window's length.
    pub length_ms: u64,
}

/// A call's use of an approval
/// ([`QuestionStore::take_approval`](super::QuestionStore::take_approval)).
#[derive(Clone, Copy, Debug)]
pub struct ApprovalUse<'a> {
    /// The approval's id, as the call carries it.
    pub id: &'a str,
    /// The call it must have been asked for.
    pub binding: &'a Binding<'a>,
    /// When the call uses it: it must not have expired by then.
    pub now_ms: u64,
}

/// A look for the newest question of one call
/// ([`QuestionStore::find_approval`](super::QuestionStore::find_approval)).
#[derive(Clone, Copy, Debug)]
pub struct ApprovalLookup<'a> {
    /// The call it was asked for.
    pub binding: &'a Binding<'a>,
    /// The reason it was asked for.
    pub reason: Option<&'a str>,
    /// When: it must not have expired by then.
    pub now_ms: u64,
}

/// A person's decision on one approval, to record
/// ([`QuestionStore::decide_approval`](super::QuestionStore::decide_approval)).
#[derive(Clone, Copy, Debug)]
pub struct DecisionWrite<'a> {
    /// The approval's id.
    pub id: &'a str,
    /// The decision.
    pub decision: &'a ApprovalDecision,
    /// When it is made: the approval must not have expired by then.
    pub now_ms: u64,
}

/// One person's signature on an approval that needs `needed` people
/// ([`QuestionStore::sign_approval`](super::QuestionStore::sign_approval)).
#[derive(Clone, Copy, Debug)]
pub struct SignatureWrite<'a> {
    /// The approval's id.
    pub id: &'a str,
    /// Who signs.
    pub signer: &'a str,
    /// How many distinct people the question needs.
    pub needed: u32,
    /// The decision recorded with the last signature needed.
    pub decision: &'a ApprovalDecision,
    /// When it is signed: the approval must not have expired by then.
    pub now_ms: u64,
}
