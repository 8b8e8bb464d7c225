//! The reference of the questions put to a person, written from the table
//! of a question's life, not from the library's derivation of it: each
//! question's requester, times, signatures, decision and use, and the state
//! these make at the test's clock.
//!
//! | state | approval | in doubt |
//! |---|---|---|
//! | open | a person (or N people) may approve or deny | a person says it happened, or not |
//! | signing | some of the N signatures given | - |
//! | decided | approve: the next carry-out runs it once; deny: every identical call of its requester is denied for the denial's own period, from the decision | happened: answered done, never run; not happened: run once |
//! | used (running, done) | replayed from then on, whoever asks | same |
//! | expired | undecided, or decided and not carried out, at its time: expired everywhere; the identical call asks anew | never |
//!
//! After every operation the store's own reading of each question
//! (`ApprovalEntry::state`) must be the reference's, or a change the
//! operation may make ([`Leeway`]): a decision it may take, a carry-out, a
//! decision given back for a resource held or a stop.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use toolcall::store::ApprovalEntry;
use toolcall_core::life::{QuestionState, Verdict};

use crate::{CALLERS, Identity, PRINCIPALS};

/// The test's clock moves by whole steps of this many milliseconds, and
/// every time below is a whole number of steps: what the wall clock adds
/// during a case (far less than a step) never moves a question across a
/// time of its own.
pub const STEP_MS: u64 = 20_000;
/// An approval's time (`Settings::approval_ttl`): three steps.
pub const APPROVAL_TTL: Duration = Duration::from_millis(3 * STEP_MS);
/// A denial's own period (`Settings::denial_ttl`): fifteen steps.
pub const DENIAL_TTL: Duration = Duration::from_millis(15 * STEP_MS);
pub const APPROVAL_MS: u64 = 3 * STEP_MS;
pub const DENIAL_MS: u64 = 15 * STEP_MS;

/// What a person said of a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Said {
    Approve,
    Deny,
    Happened,
    NotHappened,
}

/// Where a question stands, as the table names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Open, or signing (the signatures are compared apart).
    Open,
    Decided(Said),
    /// Taken by a call that carries the decision out: running, or done.
    Used(Said),
    Expired,
    /// Not in the store: taken undecided (the host's id, in host mode), or
    /// expired undecided and purged.
    Gone,
}

/// A question as the reference knows it.
#[derive(Clone, Debug)]
pub struct Question {
    pub id: String,
    pub identity: Identity,
    /// The principal behind the caller that asked (of [`PRINCIPALS`]).
    pub requester: Option<usize>,
    pub in_doubt: bool,
    /// Its reason, as the store keeps it.
    pub reason: Option<String>,
    /// When it was asked, on the test's clock.
    pub asked_v: u64,
    /// How many people its own record asks for.
    pub needed: u32,
    /// Whether the host may answer it (it was asked in host mode).
    pub host: bool,
    pub client: bool,
    /// Who signed, in signing order.
    pub signed: Vec<&'static str>,
    /// What was decided, and when on the test's clock.
    pub decision: Option<(Said, u64)>,
    pub used: bool,
    pub gone: bool,
    /// An open library defect left it where the table would not: what the
    /// store says of it is taken as it is, and no answer about it is
    /// predicted.
    pub astray: bool,
    /// What of its life in time the run met (for the figures): see
    /// [`Question::times`].
    pub met: u8,
}

impl Question {
    /// When it expires on the test's clock: an approval at its time, a
    /// denial at the end of its own period counted from the decision (never
    /// before the question's time); a question about an unknown outcome
    /// never.
    pub fn expires_v(&self) -> Option<u64> {
        if self.in_doubt {
            return None;
        }
        let own = self.asked_v + APPROVAL_MS;
        Some(match self.decision {
            Some((Said::Deny, at)) => own.max(at + DENIAL_MS),
            _ => own,
        })
    }

    /// Its state at `v`, from the table.
    pub fn class(&self, v: u64) -> Class {
        if self.gone {
            return Class::Gone;
        }
        let expired = self.expires_v().is_some_and(|at| v >= at);
        match (self.decision, self.used) {
            (Some((said, _)), true) => Class::Used(said),
            (None, true) => Class::Gone,
            (_, false) if expired => Class::Expired,
            (None, false) => Class::Open,
            (Some((said, _)), false) => Class::Decided(said),
        }
    }

    /// Whether it is a denial that still answers the identical calls of its
    /// requester at `v`, carried out or not.
    pub fn denies(&self, v: u64) -> bool {
        matches!(self.decision, Some((Said::Deny, at)) if v < at + DENIAL_MS)
    }

    /// Whether it still stands for its call: open, or decided and not
    /// carried out, within its time.
    pub fn live(&self, v: u64) -> bool {
        matches!(self.class(v), Class::Open | Class::Decided(_))
    }

    /// Which of its times `v` meets, one bit each: expired undecided;
    /// expired decided and not carried out; carried out and read past its
    /// time (replayed); a denial standing past the question's own time.
    pub fn times(&self, v: u64) -> u8 {
        let past = !self.in_doubt && v >= self.asked_v + APPROVAL_MS;
        match self.class(v) {
            Class::Expired if self.decision.is_none() => 1,
            Class::Expired => 2,
            Class::Used(_) if past && !self.denies(v) => 4,
            _ if past && self.denies(v) => 8,
            _ => 0,
        }
    }

    /// The person who made the call: the principal, or the caller itself.
    pub fn requester_name(&self) -> &'static str {
        requester_name(self.identity.0, self.requester)
    }
}

/// The name of whoever makes a call of `caller` as `principal`, as a
/// person deciding would be named.
pub fn requester_name(caller: usize, principal: Option<usize>) -> &'static str {
    match principal {
        Some(p) => PRINCIPALS[p],
        None => CALLERS[caller],
    }
}

/// The store's reading of a question at `now_ms`.
pub fn class_of(entry: Option<&ApprovalEntry>, now_ms: u64) -> Result<Class, String> {
    let Some(entry) = entry else {
        return Ok(Class::Gone);
    };
    Ok(match entry.state(now_ms) {
        QuestionState::Open | QuestionState::Signing { .. } => Class::Open,
        QuestionState::Decided(verdict) => Class::Decided(said(&verdict)?),
        QuestionState::Running(verdict) | QuestionState::Done(verdict, _) => {
            Class::Used(said(&verdict)?)
        }
        QuestionState::Expired => Class::Expired,
    })
}

fn said(verdict: &Verdict) -> Result<Said, String> {
    match verdict {
        Verdict::Approve => Ok(Said::Approve),
        Verdict::Deny => Ok(Said::Deny),
        Verdict::Happened => Ok(Said::Happened),
        Verdict::NotHappened => Ok(Said::NotHappened),
        Verdict::Edit(arguments) => Err(format!("an edit nobody made: {arguments}")),
    }
}

/// What one operation may change of the questions besides what the
/// reference predicted.
#[derive(Debug, Default)]
pub struct Leeway {
    /// Questions whose decision it may carry out (or give back).
    pub take: BTreeSet<String>,
    /// Questions it may take undecided: the host's id in host mode.
    pub take_undecided: BTreeSet<String>,
    /// Questions it may decide, and how (the operators' rule).
    pub decide: BTreeMap<String, Said>,
    /// The operation ran nothing for a resource another process held, or
    /// a stop: a decision it took is given back, not spent.
    pub give_back: bool,
}

/// Compares the store's reading of `q` with the table's at `v`, and takes
/// on a change the operation was allowed to make; anything else is a
/// violation.
pub fn reconcile(q: &mut Question, store: Class, v: u64, leeway: &Leeway) -> Result<(), String> {
    let expected = q.class(v);
    if store == expected {
        return Ok(());
    }
    let id = q.id.as_str();
    let take = leeway.take.contains(id);
    match (expected, store) {
        (Class::Open, Class::Decided(said) | Class::Used(said))
            if leeway.decide.get(id) == Some(&said)
                && (matches!(store, Class::Decided(_)) || (take && !leeway.give_back)) =>
        {
            q.decision = Some((said, v));
            q.used = matches!(store, Class::Used(_));
        }
        (Class::Decided(a), Class::Used(b)) if a == b && take && !leeway.give_back => {
            q.used = true;
        }
        (Class::Used(a), Class::Decided(b)) if a == b && take => q.used = false,
        (Class::Open, Class::Gone) if leeway.take_undecided.contains(id) => q.gone = true,
        // Expired undecided: taken (and so dropped), or purged.
        (Class::Expired, Class::Gone) if q.decision.is_none() => q.gone = true,
        _ => {
            return Err(format!(
                "the question {id} reads {store:?} in the store; the table says {expected:?} \
                 ({} ms on the test's clock): {q:?}",
                v
            ));
        }
    }
    Ok(())
}
