//! What every stage of the pipeline reads, and nothing else: the stages are
//! methods of [`Stages`], each a leaf that takes what it needs of the call
//! and returns a value. None of them can reach the driver (`pipeline.rs`,
//! on the [`Dispatcher`](super::Dispatcher)), which alone puts them in order.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::Settings;
use super::messages::{Details, Failure, Messages};
use super::twins::Twins;
use crate::result::ToolResult;

/// The settings, the store, the wording of the answers, and the calls in
/// flight (for the loop guard).
pub(super) struct Stages<St> {
    pub settings: Settings,
    pub store: St,
    pub messages: Messages,
    pub twins: Twins,
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
