//! A dry run: the call as the real one would meet stages 5 to 7, and its
//! preview, with nothing done.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Map, Value};

use super::Dispatcher;
use super::catch::panic_text;
use super::confirm::{Asking, HIGH_RISK, UNTRUSTED_CONTEXT, add_reason};
use super::messages::Failure;
use super::prepared::{Approval, Prepared, Stage};
use crate::result::{Code, ToolResult};
use crate::store::Store;

/// What a dry run's `data.would` says the real call would meet.
pub(super) const WOULD_RUN: &str = "run";
/// ... or that it would wait for a person's approval.
pub(super) const WOULD_ASK: &str = "ask_a_person";
/// ... or that it would be refused (by its check, a policy limit, or the
/// approval it brings), as `data.refusal` says.
pub(super) const WOULD_REFUSE: &str = "be_refused";

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// A dry run from stage 5 on: the check, the policy and the approval
    /// as the real call would meet them, and nothing else (no resource
    /// lock, no approval created or taken up: nothing changes). Where the
    /// real call would run, would wait for a person, or would be refused by
    /// its check, a policy limit or the approval it brings: `DRY_RUN`, with
    /// `data.would` saying which (and `data.refusal`, the answer the real
    /// call would get, when it would be refused).
    pub(super) async fn dry_run(
        &self,
        prepared: &mut Prepared<'_>,
        approval: Approval<'_>,
        tainted: Option<&[String]>,
    ) -> Stage<ToolResult> {
        let name = prepared.spec.name();
        let key = prepared.key;
        let cx = self.call_context(prepared, &key);
        let mut asks = false;
        if !matches!(approval, Approval::InDoubt) {
            let met = match self.check_and_limits(prepared, &cx).await {
                Ok(()) if prepared.needs_person() => {
                    let asking = Asking::of(prepared, tainted);
                    self.would_ask(asking, approval).await
                }
                Ok(()) => Ok(false),
                Err(refused) => Err(refused),
            };
            match met {
                Ok(would_ask) => asks = would_ask,
                Err(refused) => return Ok(would_be_refused(name, prepared, refused)),
            }
        }
        let Some(typed) = prepared.typed() else {
            return Err(self.fail(Failure::InternalError, name));
        };
        let preview = match catch_unwind(AssertUnwindSafe(|| typed.preview(&cx))) {
            Ok(Some(Ok(preview))) => Some(preview),
            Ok(None) => None,
            Ok(Some(Err(error))) => return Err(self.failure_of(name, error)),
            Err(panic) => {
                tracing::error!(
                    tool = name,
                    panic = panic_text(&panic),
                    "the preview panicked"
                );
                return Err(self.fail(Failure::InternalError, name));
            }
        };
        let mut data = Map::new();
        let message = if asks {
            data.insert("would".into(), Value::from(WOULD_ASK));
            add_reason(&mut data, tainted);
            let why = match tainted {
                Some(_) => UNTRUSTED_CONTEXT,
                None => HIGH_RISK,
            };
            format!(
                "Dry run: {name} would wait for a person's approval ({why}) before it runs; \
                 nothing was done and no one was asked."
            )
        } else {
            data.insert("would".into(), Value::from(WOULD_RUN));
            format!("Dry run: {name} would run with these arguments; nothing was done.")
        };
        data.insert("arguments".into(), prepared.arguments().clone());
        if let Some(preview) = preview {
            data.insert("preview".into(), preview);
        }
        Ok(ToolResult {
            ok: true,
            code: Code::DryRun,
            message,
            data: data.into(),
            ..ToolResult::success(name, Map::new())
        })
    }
}

/// A dry run's answer where the real call would be refused: `DRY_RUN`,
/// `data.would: "be_refused"`, and the refusal the real call would get
/// (its code, message and data) in `data.refusal`.
fn would_be_refused(
    name: &'static str,
    prepared: &Prepared<'_>,
    refused: ToolResult,
) -> ToolResult {
    let mut refusal = Map::new();
    refusal.insert("code".into(), Value::from(refused.code.as_str()));
    refusal.insert("message".into(), Value::from(refused.message.as_str()));
    if !refused.data.is_empty() {
        refusal.insert("data".into(), Value::Object(Map::clone(&refused.data)));
    }
    let mut data = Map::new();
    data.insert("would".into(), Value::from(WOULD_REFUSE));
    data.insert("refusal".into(), Value::Object(refusal));
    if prepared.arguments.is_some() {
        data.insert("arguments".into(), prepared.arguments().clone());
    }
    ToolResult {
        ok: true,
        code: Code::DryRun,
        message: format!(
            "Dry run: {name} would be refused ({}): {} Nothing was done.",
            refused.code, refused.message
        ),
        data: data.into(),
        ..ToolResult::success(name, Map::new())
    }
}
