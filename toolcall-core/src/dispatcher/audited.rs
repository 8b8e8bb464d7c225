//! What a call leaves in the audit and in tracing: its span, and its
//! record, made in one place from how the call ended (the dispatcher's
//! `audit_call`, and `unnamed` for a call refused before its pipeline),
//! and handed to the sink and to tracing. (The arguments' text, as the audit keeps it, is
//! `tool::audit_text`'s.)

use std::any::Any;
use std::borrow::Cow;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::time::Instant;

use super::Dispatcher;
use super::call::Call;
use super::messages::Failure;
use super::stages::AuditNotes;
use crate::audit::{AuditRecord, AuditSink, Cut};
use crate::echo::MAX_NAME_ECHO;
use crate::parse::Arguments;
use crate::policy::Caller;
use crate::result::ToolResult;
use crate::store::Store;
use crate::tool::ToolSpec;

/// Hands `record` to the sink, and its code to the call's span.
pub(super) fn hand(sink: &dyn AuditSink, record: AuditRecord, span: &tracing::Span) {
    if !record.ok {
        span.record("error.type", record.code.as_str());
    }
    tracing::debug!(parent: span, code = %record.code, step = record.step.unwrap_or(0), replayed = record.replayed, "tool call");
    sink.record(record);
}

/// How much of over-limit arguments an audit record keeps (head and tail).
pub(super) const AUDIT_CUT_ARGUMENTS: usize = 1024;

/// Who made a call and when: what its audit records say besides which call
/// it was and how it ended.
pub(super) struct Called<'a> {
    pub session: &'a str,
    pub caller: &'a Caller,
    pub step: u64,
    pub started: Instant,
    pub at_ms: u64,
}

impl Called<'_> {
    /// The audit record of a call of `tool` with `arguments` (their text,
    /// as the audit keeps it), made in this one place: how it ended (ok,
    /// code, replayed, in doubt, how long it took) is read from `result`;
    /// what else the record says (confirmed, by whom, cut, taint, problems)
    /// starts empty, for the caller to set.
    pub(super) fn ended(
        &self,
        tool: impl Into<std::borrow::Cow<'static, str>>,
        arguments: String,
        result: &ToolResult,
    ) -> AuditRecord {
        AuditRecord {
            session_id: self.session.to_owned(),
            caller: self.caller.id().to_owned(),
            principal: self.caller.principal().cloned(),
            // Steps count from 1: 0 is a call that took none.
            step: (self.step > 0).then_some(self.step),
            tool: tool.into(),
            arguments,
            confirmed: false,
            ok: result.ok,
            code: result.code.clone(),
            replayed: result.replayed,
            duration_ms: self.started.elapsed().as_secs_f64() * 1000.0,
            at_ms: self.at_ms,
            call_id: None,
            approved_by: None,
            in_doubt: is_in_doubt(result),
            cut: Vec::new(),
            tainted: None,
            dry_run: false,
            problems: Vec::new(),
            seq: None,
            prev: None,
        }
    }
}

/// Whether a result says its call's outcome is unknown.
fn is_in_doubt(result: &ToolResult) -> bool {
    // A success's data is the tool's output, kept as text: not read.
    !result.ok && result.data.get("in_doubt") == Some(&serde_json::Value::Bool(true))
}

/// Polls `work` inside `span`, as `Instrument::instrument` would, where the
/// work is pinned.
pub(super) async fn in_span<T>(
    span: &tracing::Span,
    mut work: Pin<&mut impl Future<Output = T>>,
) -> T {
    poll_fn(|cx| {
        let _entered = span.enter();
        work.as_mut().poll(cx)
    })
    .await
}

/// One span a call, with OpenTelemetry's GenAI attribute names; `error.type`
/// is recorded with the code when the call is not ok. A host's decision on a
/// pending approval records the tool once the approval is found.
pub(super) fn call_span(
    tool: Option<&str>,
    spec: Option<&ToolSpec>,
    call_id: Option<&str>,
) -> tracing::Span {
    // The name the model sent may be anything: cut, like every echo of it.
    let tool = tool.map(|name| crate::echo::cut(name, MAX_NAME_ECHO));
    let tool = tool.as_deref();
    // The fields are evaluated only when a subscriber wants the span.
    tracing::info_span!(
        "execute_tool",
        otel.name = tool.map_or_else(
            || "execute_tool".to_owned(),
            |name| format!("execute_tool {name}")
        ),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.type = "function",
        gen_ai.tool.description = spec.map(ToolSpec::description),
        gen_ai.tool.call.id = call_id,
        error.type = tracing::field::Empty,
    )
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Fits `result` to the output budget and hands the call's audit record
    /// (and, for a person's edit, the edited call's) to the sink.
    pub(super) fn audit_call(
        &self,
        call: &Call<'_>,
        spec: Option<&'static ToolSpec>,
        called: &Called<'_>,
        result: &mut ToolResult,
        noted: AuditNotes,
        span: &tracing::Span,
    ) {
        let AuditNotes {
            carried,
            tainted,
            problems,
        } = noted;
        let mut cut = Vec::new();
        let budget = spec
            .and_then(ToolSpec::max_output_bytes)
            .or(self.stages.settings.max_output_bytes);
        if let Some(budget) = budget {
            crate::budget::fit_result(result, budget, &mut cut);
        }
        if call.look {
            return;
        }
        let confirmed = call.confirmed
            || carried.is_some()
            || (call.approval.is_some() && result.code != crate::Code::ConfirmationInvalid);
        let tool = match spec {
            // The registry's own name: nothing to copy, nor to cut.
            Some(spec) if spec.name().len() <= MAX_NAME_ECHO => Cow::Borrowed(spec.name()),
            _ => Cow::Owned(Cut::keep(
                "tool",
                call.tool.to_owned(),
                MAX_NAME_ECHO,
                &mut cut,
            )),
        };
        let arguments = self.audited_arguments(spec, call.arguments, &mut cut);
        let mut record = called.ended(tool, arguments, result);
        record.confirmed = confirmed;
        record.call_id = call.call_id.map(str::to_owned);
        // A person's decision the call carried out: it is theirs.
        record.approved_by = carried.as_ref().map(|c| c.by.clone());
        record.cut = cut;
        record.tainted = tainted.clone();
        record.dry_run = call.dry_run;
        if call.dry_run {
            // A dry run reads the step the real call would take; it takes none.
            record.step = None;
        }
        record.problems = problems;
        hand(&*self.audit, record, span);
        if let Some(edited) = carried.and_then(|c| c.edited) {
            // The audit keeps both versions: the model's call above, and
            // the call the person's edits made, as it ran.
            let arguments = crate::tool::audit_text(spec, Arguments::Parsed(&edited));
            let mut record = called.ended(call.tool.to_owned(), arguments, result);
            record.confirmed = true;
            record.call_id = call.call_id.map(str::to_owned);
            record.tainted = tainted;
            hand(&*self.audit, record, span);
        }
    }

    /// The answer to a call that names no conversation, on a dispatcher
    /// with no default one: refused before anything runs or is counted,
    /// and audited.
    pub(super) fn unnamed(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: Option<&'static ToolSpec>,
        started: Instant,
        at_ms: u64,
        span: &tracing::Span,
    ) -> ToolResult {
        let mut cut = Vec::new();
        let tool: Cow<'static, str> = match spec {
            Some(spec) => Cow::Borrowed(spec.name()),
            None => Cow::Owned(Cut::keep(
                "tool",
                call.tool.to_owned(),
                MAX_NAME_ECHO,
                &mut cut,
            )),
        };
        let result = self
            .stages
            .fail(Failure::ConversationRequired, tool.clone());
        let called = Called {
            session: "",
            caller,
            step: 0,
            started,
            at_ms,
        };
        let arguments = self.audited_arguments(spec, call.arguments, &mut cut);
        let mut record = called.ended(tool, arguments, &result);
        record.call_id = call
            .call_id
            .map(|id| crate::echo::bound(id, crate::echo::MAX_CALL_ID_BYTES).into_owned());
        record.cut = cut;
        record.dry_run = call.dry_run;
        hand(&*self.audit, record, span);
        result
    }

    /// The model's arguments as the call's audit record keeps them
    /// (redacted, [`tool::audit_text`](crate::tool::audit_text)): over the
    /// raw arguments' bound, their head and tail, and what was cut in `cut`.
    fn audited_arguments(
        &self,
        spec: Option<&ToolSpec>,
        arguments: Arguments<'_>,
        cut: &mut Vec<Cut>,
    ) -> String {
        let text = crate::tool::audit_text(spec, arguments);
        if text.len() > self.stages.settings.max_argument_bytes {
            Cut::keep("arguments", text, AUDIT_CUT_ARGUMENTS, cut)
        } else {
            text
        }
    }
}
