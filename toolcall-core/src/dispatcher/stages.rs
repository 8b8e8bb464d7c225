//! What every stage of the pipeline reads, and nothing else: the stages are
//! methods of [`Stages`], each a leaf that takes what it needs of the call
//! and returns a value. None of them can reach the driver (`pipeline.rs`,
//! on the [`Dispatcher`](super::Dispatcher)), which alone puts them in order.
//! Also the types every stage shares: [`Stage`], [`Approval`], [`HeldLock`].

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::{PoisonError, RwLock};

use serde_json::{Map, Value};

use super::Settings;
use super::ids::Holder;
use super::messages::{Details, Failure, Messages};
use super::twins::Twins;
use crate::controls::Current;
use crate::result::ToolResult;
use crate::store::Key;

/// The settings, the store, the wording of the answers, and the calls in
/// flight (for the loop guard).
pub(super) struct Stages<St> {
    pub settings: Settings,
    pub store: St,
    pub messages: Messages,
    pub twins: Twins,
    /// The operators' controls this process read last.
    pub held: Held,
}

/// The controls this process read last, shared by its calls.
#[derive(Debug, Default)]
pub(super) struct Held {
    current: RwLock<Current>,
}

impl Held {
    pub(super) fn get(&self) -> Current {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn set(&self, newer: Current) {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        // Two calls racing keep the newer.
        if newer.version > current.version {
            *current = newer;
        }
    }
}

impl<St> Stages<St> {
    /// The answer of a standard failure of `tool`, no details, no data.
    pub(super) fn fail(&self, failure: Failure, tool: impl Into<Cow<'static, str>>) -> ToolResult {
        self.messages
            .answer(failure, tool, &Details::default(), Map::new())
    }

    /// The answer of a standard failure with what the stage knows of it.
    pub(super) fn fail_with(
        &self,
        failure: Failure,
        tool: impl Into<Cow<'static, str>>,
        details: &Details<'_>,
        data: Map<String, Value>,
    ) -> ToolResult {
        self.messages.answer(failure, tool, details, data)
    }

    /// `CONFIRMATION_REQUIRED` with `data`: the call waits for a person,
    /// and the answer names the question `id` to bring back.
    pub(super) fn waiting_on(&self, tool: &str, id: &str, data: Map<String, Value>) -> ToolResult {
        let mut waiting = self.fail_with(
            Failure::ConfirmationRequired,
            tool.to_owned(),
            &Details::default(),
            data,
        );
        waiting.question_id = Some(id.to_owned());
        waiting
    }

    /// `STORE_UNAVAILABLE`, logged.
    pub(super) fn store_unavailable(
        &self,
        tool: &str,
        error: &crate::store::StoreError,
    ) -> ToolResult {
        tracing::error!(tool, %error, "the store failed");
        self.fail(Failure::StoreUnavailable, tool.to_owned())
    }
}

/// A stage that says no returns the finished result as its error: the
/// rejection *is* the answer.
pub(super) type Stage<T> = Result<T, ToolResult>;

/// How a high-risk call is approved, if it is.
#[derive(Clone, Copy)]
pub(super) enum Approval<'a> {
    /// Not yet: ask for it.
    None,
    /// The host says a person approved (the reference's `confirmed` flag),
    /// or the approval was already taken from the store.
    Given,
    /// A question id that must match this exact call.
    Id(&'a str),
    /// The same call ran before with an unknown outcome: it passed stages 5
    /// to 7 then, and runs again under the same key without them.
    InDoubt,
}

/// A resource lock a call holds (or asks for with its start). Held in a
/// `Box` wherever a call keeps one (`Option<Box<HeldLock>>`): most calls
/// hold none, and each stage that hands the slot on moves it; inline, that
/// was a copy of its 168 bytes at each hand-off, on every call.
pub(super) struct HeldLock {
    pub resource: Key,
    pub holder: Holder,
    /// Set once the lock was freed with the result's record (and from the
    /// moment that record is sent: the renewals stop).
    pub freed: Option<Arc<AtomicBool>>,
}

/// What the pipeline notes of a call for its audit record, besides the
/// answer.
#[derive(Default)]
pub(super) struct AuditNotes {
    /// The person's decision the call carried out, if it brought one.
    pub carried: Option<DecisionNote>,
    /// Its taint, if it had one (see [`AuditRecord::tainted`](crate::AuditRecord::tainted)).
    pub tainted: Option<Vec<String>>,
    /// The problems stage 3 found in its arguments.
    pub problems: Vec<crate::audit::ArgumentProblem>,
}

/// A person's decision that a call carried out: who took it, and the
/// arguments they put in place of the model's. The audit records both.
pub(super) struct DecisionNote {
    pub by: String,
    pub edited: Option<Value>,
}

/// What the start of a call left for its end: its step, and the lock and
/// the claim it took that no stage took over yet (freed once the call is
/// answered).
#[derive(Default)]
pub(super) struct CallStart {
    pub step: u64,
    pub lock: Option<Box<HeldLock>>,
    /// The key claimed with the start ([`crate::store::CallStart::claim`]),
    /// until stage 8 runs under it; released if the call does not run.
    pub claimed: Option<Key>,
    /// The operators' controls the call was judged by were not the store's
    /// any more: nothing was counted, and the call starts again.
    pub controls_moved: bool,
}
