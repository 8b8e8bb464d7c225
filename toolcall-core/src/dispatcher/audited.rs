//! What a call leaves in the audit and in tracing: its span, and its
//! record, made in one place from how the call ended, and handed to the
//! sink and to tracing. (The arguments' text, as the audit keeps it, is
//! `tool::audit_text`'s.)

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::time::Instant;

use crate::audit::{AuditRecord, AuditSink};
use crate::echo::MAX_NAME_ECHO;
use crate::policy::Caller;
use crate::result::ToolResult;
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
