//! A dry run's own parts: the tool's preview and the answers that say what
//! the real call would meet at stages 5 to 7 (the driver runs those stages
//! for it, with nothing done).

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Map, Value};

use super::arguments::Prepared;
use super::asked::{CallParts, JsonArguments, unprotected};
use super::catch::panic_text;
use super::confirm::{Asking, HIGH_RISK, UNTRUSTED_CONTEXT, add_reason};
use super::messages::Failure;
use super::stages::{Approval, Stage, Stages};
use crate::result::{Code, ToolResult};
use crate::store::Store;
use crate::tool::CallContext;

/// What a dry run's `data.would` says the real call would meet.
pub(super) const WOULD_RUN: &str = "run";
/// ... or that it would wait for a person's approval.
pub(super) const WOULD_ASK: &str = "ask_a_person";
/// ... or that it would be refused (by its check, a policy limit, or the
/// approval it brings), as `data.refusal` says.
pub(super) const WOULD_REFUSE: &str = "be_refused";
/// ... or that it would be answered as done without running: its earlier
/// attempt's outcome was unknown and a person said it took effect.
pub(super) const WOULD_ANSWER_DONE: &str = "answer_done";

impl<St: Store> Stages<St> {
    /// What the tool's preview says the call would do (`None` if it has
    /// no preview), or the answer when the preview fails or panics.
    pub(super) fn preview(
        &self,
        prepared: &mut Prepared<'_>,
        cx: &CallContext<'_>,
    ) -> Stage<Option<Value>> {
        let name = prepared.spec.name();
        let Some(typed) = prepared.typed() else {
            return Err(self.fail(Failure::InternalError, name));
        };
        match catch_unwind(AssertUnwindSafe(|| typed.preview(cx))) {
            Ok(Some(Ok(preview))) => Ok(Some(preview)),
            Ok(None) => Ok(None),
            Ok(Some(Err(error))) => Err(self.failure_of(name, error)),
            Err(panic) => {
                tracing::error!(
                    tool = name,
                    panic = panic_text(&panic),
                    "the preview panicked"
                );
                Err(self.fail(Failure::InternalError, name))
            }
        }
    }
}

/// A dry run's answer where the real call would run (`asks`: or would wait
/// for a person's approval, for the reason `tainted` says): `DRY_RUN`, with
/// `data.would`, the arguments and the tool's preview.
pub(super) fn would_go_on(
    name: &'static str,
    arguments: &Value,
    asks: bool,
    tainted: Option<&[String]>,
    preview: Option<Value>,
) -> ToolResult {
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
    data.insert("arguments".into(), arguments.clone());
    if let Some(preview) = preview {
        data.insert("preview".into(), preview);
    }
    dry(name, message, data)
}

/// A dry run's answer for a call whose earlier attempt's outcome is unknown
/// and that only a person can settle: it would wait for them
/// (`ask_a_person`, `data.reason: "in_doubt"`), or be answered as done
/// (`answer_done`) where a person already said it happened.
pub(super) fn would_settle(name: &'static str, arguments: &Value, happened: bool) -> ToolResult {
    let mut data = Map::new();
    data.insert("in_doubt".into(), Value::Bool(true));
    let message = if happened {
        data.insert("would".into(), Value::from(WOULD_ANSWER_DONE));
        format!(
            "Dry run: an earlier attempt of {name} with these arguments took effect, a person \
             said; the call would be answered as done and not run again. Nothing was done."
        )
    } else {
        data.insert("would".into(), Value::from(WOULD_ASK));
        data.insert("reason".into(), Value::from(crate::life::IN_DOUBT));
        format!(
            "Dry run: whether an earlier attempt of {name} with these arguments took effect is \
             unknown; the call would wait for a person to settle it, and not run before. \
             Nothing was done and no one was asked."
        )
    };
    data.insert("arguments".into(), arguments.clone());
    dry(name, message, data)
}

/// A dry run's answer where the real call would be refused: `DRY_RUN`,
/// `data.would: "be_refused"`, and the refusal the real call would get
/// (its code, message and data) in `data.refusal`.
pub(super) fn would_be_refused(
    name: &'static str,
    arguments: Option<&Value>,
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
    if let Some(arguments) = arguments {
        data.insert("arguments".into(), arguments.clone());
    }
    let message = format!(
        "Dry run: {name} would be refused ({}): {} Nothing was done.",
        refused.code, refused.message
    );
    dry(name, message, data)
}

/// A dry run's answer: `DRY_RUN`, ok, with `message` and `data`.
fn dry(name: &'static str, message: String, data: Map<String, Value>) -> ToolResult {
    let mut answer = ToolResult::success(name, data);
    answer.code = Code::DryRun;
    answer.message = message;
    answer
}

impl<S: std::any::Any + Send + Sync, St: crate::store::Store> super::Dispatcher<S, St> {
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
        self.stages.json(prepared)?;
        if let Approval::InDoubt = approval
            && unprotected(prepared.spec)
        {
            let asked = CallParts {
                spec: prepared.spec,
                key: &prepared.key,
                arguments: JsonArguments::of(&prepared.json, &prepared.members),
                session: prepared.session,
                caller: prepared.caller,
                step: prepared.step,
            };
            match self.stages.settlement_of(&asked).await? {
                // It did not happen: the real call runs it once.
                Some(false) => {}
                settled => {
                    let arguments = self.stages.json(prepared)?;
                    return Ok(would_settle(name, arguments, settled == Some(true)));
                }
            }
        }
        let key = prepared.key;
        let cx = self.call_context(prepared, &key);
        let mut asks = false;
        let mut ruled = None;
        if !matches!(approval, Approval::InDoubt) {
            let met = match self.stages.check_and_limits(prepared, &cx).await {
                Ok(()) if prepared.needs_person() => {
                    let arguments = self.stages.json(prepared)?;
                    // A rule of the operators' controls would approve it
                    // (as stage 7 would, never a tainted call nor one that
                    // needs several people).
                    let controls = self.stages.held_controls();
                    let rule = (matches!(approval, Approval::None)
                        && tainted.is_none()
                        && prepared.people <= 1)
                        .then(|| {
                            controls.rule_for(prepared.spec.name(), prepared.caller.id(), arguments)
                        })
                        .flatten();
                    if let Some(rule) = rule {
                        ruled = Some(super::operators::rule_approver(&rule.name));
                        Ok(false)
                    } else {
                        let asking = Asking::of(prepared, arguments, tainted);
                        self.stages.would_ask(asking, approval).await
                    }
                }
                Ok(()) => Ok(false),
                Err(refused) => Err(refused),
            };
            match met {
                Ok(would_ask) => asks = would_ask,
                Err(refused) => {
                    return Ok(would_be_refused(name, prepared.json(), refused));
                }
            }
        }
        let preview = self.stages.preview(prepared, &cx)?;
        let arguments = self.stages.json(prepared)?;
        let mut answer = would_go_on(name, arguments, asks, tainted, preview);
        if let Some(rule) = ruled {
            answer.message = format!(
                "Dry run: {name} would run with these arguments, approved by the operators' rule \
                 `{}`; nothing was done.",
                rule.trim_start_matches("rule:")
            );
            answer
                .data
                .insert("approved_by".to_owned(), Value::from(rule));
        }
        Ok(answer)
    }
}
