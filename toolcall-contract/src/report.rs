//! Metrics from an audit log: where models fail to call tools, whether they
//! recover, and what people decide.
//!
//! The dispatcher writes one [`AuditRecord`](toolcall_core::AuditRecord) per call, whatever its outcome
//! ([`JsonLinesAudit`](toolcall_core::JsonLinesAudit) writes them one JSON
//! object a line), and one per decision a person makes on a pending
//! approval. [`read_audit`] reads such a log and [`Report::from_records`]
//! counts it. The report prints as aligned plain-text tables
//! ([`Display`](std::fmt::Display)) or as JSON ([`Report::to_json`]).
//!
//! # Calls and decisions
//!
//! A record is a **decision**, the host carrying out what a person decided
//! on a pending approval, when either
//!
//! * it has `approved_by` ([`Dispatcher::approve`] and [`Dispatcher::deny`]
//!   write it), or
//! * it was sent `confirmed` and answers an earlier `CONFIRMATION_REQUIRED`
//!   record not yet answered, of the same `session_id`, `tool` and
//!   `arguments` (compared as canonical JSON, so spacing and member order do
//!   not matter): the host sending the model's call again once a person
//!   approved it.
//!
//! A decision answers the oldest unanswered `CONFIRMATION_REQUIRED` record
//! with the same session, tool and arguments, if there is one (a decision
//! with `approved_by` counts as a decision even without one: the log may
//! start after the request). Every other record is a **call**: something
//! the model asked for. Decisions are not calls: they appear in no
//! per-tool count, rate or duration, only under `confirmations`.
//!
//! # Outcomes of a call
//!
//! Every call falls in exactly one of five outcomes:
//!
//! * **ok**: `ok` is `true` (this includes replays);
//! * **awaiting confirmation**: the code is `CONFIRMATION_REQUIRED`. The call
//!   was valid and waits for a person; neither a success nor a refusal;
//! * **refused by the host**: the host application or a person acting
//!   through it refused the call, not because of anything the model sent:
//!   `CONFIRMATION_DENIED`, `CONFIRMATION_EXPIRED`, `CONFIRMATION_INVALID`
//!   (an approval id passed with the call that is stale or wrong) and
//!   `STEP_LIMIT` (the session's step budget is spent);
//! * **failed**: the tool or the pipeline failed, whatever the model sent:
//!   `TIMEOUT`, `UPSTREAM_UNAVAILABLE` (after the retries),
//!   `STORE_UNAVAILABLE`, `INTERNAL_ERROR`, `CALL_IN_PROGRESS`. An
//!   operations metric, not the model's;
//! * **rejected**: every other call with `ok` `false`: what the model can
//!   fix by calling differently (invalid arguments, a policy limit, a
//!   business check, an unknown tool, the loop guard, ...).
//!
//! A rejected call is **recovered** when the model's *next attempt* is ok
//! or awaiting confirmation: the next call (decisions are skipped) of the
//! same session (`session_id`) for the same tool (`tool`), in log order; for
//! `UNKNOWN_TOOL` and `TOOL_NOT_ALLOWED`, whose fix is to call another
//! tool, the next call of the session whatever its tool. A rejection with
//! no next attempt is not recovered (the model gave up, or the log ends),
//! nor is one whose next attempt was refused by the host. Log order is the
//! order the dispatcher finished the records in, not the `step`, because a
//! person's decision is recorded later under the step of the call it
//! answers. The recovery rate tells whether the rejections' messages let
//! the model correct itself; refusals by the host and failures are kept out
//! of it, and out of the rejection rate, and counted on their own.
//!
//! # Metrics
//!
//! For all calls, per tool, per rejection code and per (tool, code) pair:
//!
//! | metric | definition |
//! |---|---|
//! | `calls` | calls (not decisions) |
//! | `ok`, `awaiting_confirmation`, `rejected`, `refused_by_host`, `failed` | calls with each outcome (they add up to `calls`) |
//! | `rejection_rate` | `rejected / calls`; for a code, its rejections over *all* calls; for a (tool, code) pair, over that tool's calls |
//! | `recovered` | rejected calls that were recovered |
//! | `recovery_rate` | `recovered / rejected`, absent (`null`, `-`) when nothing was rejected |
//! | `replayed` | calls with `replayed` `true`: a stored result returned instead of running the tool again |
//! | `loop_detected` | calls with the code `LOOP_DETECTED`: the loop guard stopped a repeated call |
//! | `duration_ms.p50`, `duration_ms.p95` | nearest-rank percentiles of the calls' `duration_ms`: the value at rank ⌈p/100 · n⌉ of the n durations in ascending order; absent without calls |
//!
//! The rejection codes are those of rejected calls only.
//!
//! Over the whole log only:
//!
//! | metric | definition |
//! |---|---|
//! | `sessions` | distinct `session_id`s, of calls and decisions |
//! | `confirmations.required` | calls with `CONFIRMATION_REQUIRED` |
//! | `confirmations.approved` | decisions by which a person let the call run: every decision but those with `CONFIRMATION_DENIED`, `_EXPIRED` or `_INVALID`, that is ok or was sent `confirmed` |
//! | `confirmations.approved_then_failed` | of those, the ones that are not ok: the checks re-run on approval refused the call, or the tool failed |
//! | `confirmations.denied`, `.expired`, `.invalid` | records, decisions or calls, with `CONFIRMATION_DENIED`, `CONFIRMATION_EXPIRED`, `CONFIRMATION_INVALID` |
//! | `confirmations.failed` | decisions in none of the above: the approval could not be taken (the store failed) |
//! | `confirmations.unanswered` | `CONFIRMATION_REQUIRED` calls that no decision answered (still pending, or abandoned) |
//! | `confirmations.decisions` | decision records |
//! | `confirmations.approved_by_rule` | calls a rule of the operators' controls approved in a person's place (`approved_by` is `rule:<name>`): counted as the model's calls, not as decisions nor as a person's approvals |
//! | `confirmations.confirmed_unasked` | calls sent `confirmed` that answer no `CONFIRMATION_REQUIRED`: the host asked a person beforehand, or marks calls confirmed; they are not counted as approvals |
//! | `confirmations.denial_rate` | `denied / (approved + denied)`, absent when both are zero: how often people refuse what the model proposes |
//! | `step_limit.calls` | calls with `STEP_LIMIT`: refused because the session used up its step budget |
//! | `step_limit.sessions` | distinct sessions with at least one such call |
//!
//! Rates are fractions from 0 to 1 in JSON and percentages in the table.
//!
//! [`Dispatcher::approve`]: toolcall_core::Dispatcher::approve
//! [`Dispatcher::deny`]: toolcall_core::Dispatcher::deny

mod count;
mod read;
mod table;

use serde_json::{Value, json};

pub use read::{ReadError, read_audit};

use count::ratio;

/// The version of the JSON layout of [`Report::to_json`].
pub const REPORT_FORMAT_VERSION: u64 = 2;

/// Counts for a set of calls: all of them, or one tool's. See the
/// [module docs](self) for the definitions.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Calls (decision records are not calls).
    pub calls: u64,
    /// Calls with `ok` true.
    pub ok: u64,
    /// Calls with `CONFIRMATION_REQUIRED`.
    pub awaiting_confirmation: u64,
    /// Calls refused for something the model can fix: neither ok, awaiting
    /// confirmation, refused by the host nor failed.
    pub rejected: u64,
    /// Calls the host or a person refused: `CONFIRMATION_DENIED`,
    /// `CONFIRMATION_EXPIRED`, `CONFIRMATION_INVALID`, `STEP_LIMIT`.
    pub refused_by_host: u64,
    /// Calls the tool or the pipeline failed: `TIMEOUT`,
    /// `UPSTREAM_UNAVAILABLE`, `STORE_UNAVAILABLE`, `INTERNAL_ERROR`,
    /// `CALL_IN_PROGRESS`.
    pub failed: u64,
    /// Rejected calls whose next attempt (see the module docs) got through.
    pub recovered: u64,
    /// Calls with `replayed` true.
    pub replayed: u64,
    /// Calls with `LOOP_DETECTED`.
    pub loop_detected: u64,
    /// Median `duration_ms` (nearest rank), if there are calls.
    pub p50_ms: Option<f64>,
    /// 95th percentile of `duration_ms` (nearest rank), if there are calls.
    pub p95_ms: Option<f64>,
}

impl Stats {
    /// `rejected / calls`, if there are calls.
    pub fn rejection_rate(&self) -> Option<f64> {
        ratio(self.rejected, self.calls)
    }

    /// `recovered / rejected`, if anything was rejected.
    pub fn recovery_rate(&self) -> Option<f64> {
        ratio(self.recovered, self.rejected)
    }

    fn to_json(&self) -> Value {
        json!({
            "calls": self.calls,
            "ok": self.ok,
            "awaiting_confirmation": self.awaiting_confirmation,
            "rejected": self.rejected,
            "refused_by_host": self.refused_by_host,
            "failed": self.failed,
            "rejection_rate": self.rejection_rate(),
            "recovered": self.recovered,
            "recovery_rate": self.recovery_rate(),
            "replayed": self.replayed,
            "loop_detected": self.loop_detected,
            "duration_ms": {"p50": self.p50_ms, "p95": self.p95_ms},
        })
    }
}

/// One tool's counts.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolStats {
    /// The tool name as the model sent it (an unknown one included).
    pub tool: String,
    /// Its counts.
    pub stats: Stats,
}

/// The rejections with one code, over all tools or for one tool.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Rejections {
    /// The tool, for a per-tool row; `None` for all tools.
    pub tool: Option<String>,
    /// The code.
    pub code: String,
    /// Rejected calls with this code.
    pub rejected: u64,
    /// `rejected` over all calls (all tools) or over the tool's calls.
    pub rate: f64,
    /// How many of them were recovered.
    pub recovered: u64,
}

impl Rejections {
    /// `recovered / rejected`.
    pub fn recovery_rate(&self) -> Option<f64> {
        ratio(self.recovered, self.rejected)
    }

    fn to_json(&self) -> Value {
        let mut row = serde_json::Map::new();
        if let Some(tool) = &self.tool {
            row.insert("tool".into(), tool.as_str().into());
        }
        row.insert("code".into(), self.code.as_str().into());
        row.insert("rejected".into(), self.rejected.into());
        row.insert("rate".into(), self.rate.into());
        row.insert("recovered".into(), self.recovered.into());
        row.insert("recovery_rate".into(), self.recovery_rate().into());
        Value::Object(row)
    }
}

/// What happened to calls that needed a person's approval. See the
/// [module docs](self) for how decisions are told from calls and paired
/// with the calls they answer.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Confirmations {
    /// Calls with `CONFIRMATION_REQUIRED`.
    pub required: u64,
    /// Decisions that let the call run (ok, or sent `confirmed`), whatever
    /// came of it.
    pub approved: u64,
    /// Approved decisions that are not ok: the re-run checks refused the
    /// call, or the tool failed.
    pub approved_then_failed: u64,
    /// Records with `CONFIRMATION_DENIED`.
    pub denied: u64,
    /// Records with `CONFIRMATION_EXPIRED`.
    pub expired: u64,
    /// Records with `CONFIRMATION_INVALID`.
    pub invalid: u64,
    /// Decisions neither approved, denied, expired nor invalid (the
    /// approval could not be taken).
    pub failed: u64,
    /// `CONFIRMATION_REQUIRED` calls that no decision answered.
    pub unanswered: u64,
    /// Decision records.
    pub decisions: u64,
    /// Calls sent `confirmed` that answer no `CONFIRMATION_REQUIRED`; not approvals.
    pub confirmed_unasked: u64,
    /// Calls a rule of the operators' controls approved in a person's
    /// place (`approved_by` `rule:<name>`): counted as calls, never as a
    /// person's approvals.
    pub approved_by_rule: u64,
}

impl Confirmations {
    /// `denied / (approved + denied)`, if there was a decision.
    pub fn denial_rate(&self) -> Option<f64> {
        ratio(self.denied, self.approved + self.denied)
    }
}

/// Metrics over an audit log. See the [module docs](self) for every definition.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// Counts over every call.
    pub totals: Stats,
    /// Distinct sessions.
    pub sessions: u64,
    /// Counts per tool, sorted by tool name.
    pub tools: Vec<ToolStats>,
    /// Rejections per code over all tools, most frequent first (ties by code).
    pub by_code: Vec<Rejections>,
    /// Rejections per tool and code, by tool name, then most frequent first.
    pub by_tool_and_code: Vec<Rejections>,
    /// Approval outcomes.
    pub confirmations: Confirmations,
    /// Calls refused with `STEP_LIMIT`.
    pub step_limit_calls: u64,
    /// Sessions with at least one `STEP_LIMIT` call.
    pub step_limit_sessions: u64,
}

impl Report {
    /// The report as JSON. Its layout, version [`REPORT_FORMAT_VERSION`]:
    ///
    /// ```text
    /// {
    ///   "format_version": 2,
    ///   "sessions": <count>,
    ///   "totals": <stats>,
    ///   "tools": [{"tool": <name>, ...<stats>}],
    ///   "rejections_by_code": [<rejections>],
    ///   "rejections_by_tool_and_code": [{"tool": <name>, ...<rejections>}],
    ///   "confirmations": {"required", "approved", "approved_then_failed", "denied",
    ///                     "expired", "invalid", "failed", "unanswered", "decisions",
    ///                     "confirmed_unasked", "approved_by_rule", "denial_rate"},
    ///   "step_limit": {"calls", "sessions"}
    /// }
    /// <stats> = "calls", "ok", "awaiting_confirmation", "rejected", "refused_by_host", "failed",
    ///           "rejection_rate", "recovered", "recovery_rate", "replayed",
    ///           "loop_detected", "duration_ms": {"p50", "p95"}
    /// <rejections> = "code", "rejected", "rate", "recovered", "recovery_rate"
    /// ```
    ///
    /// Counts are integers, rates fractions from 0 to 1, and a rate or a
    /// duration without a denominator is `null`. The members are written in
    /// this order, and the lists in the order of the [`Report`] fields.
    ///
    /// Version 2 counts decisions apart from calls, adds `refused_by_host`
    /// (no longer part of `rejected`) and the confirmation members after
    /// `approved` but for `denial_rate`.
    pub fn to_json(&self) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|t| {
                let mut row = serde_json::Map::new();
                row.insert("tool".into(), t.tool.as_str().into());
                if let Value::Object(stats) = t.stats.to_json() {
                    row.extend(stats);
                }
                Value::Object(row)
            })
            .collect();
        let c = &self.confirmations;
        json!({
            "format_version": REPORT_FORMAT_VERSION,
            "sessions": self.sessions,
            "totals": self.totals.to_json(),
            "tools": tools,
            "rejections_by_code": self.by_code.iter().map(Rejections::to_json).collect::<Vec<_>>(),
            "rejections_by_tool_and_code":
                self.by_tool_and_code.iter().map(Rejections::to_json).collect::<Vec<_>>(),
            "confirmations": {
                "required": c.required,
                "approved": c.approved,
                "approved_then_failed": c.approved_then_failed,
                "denied": c.denied,
                "expired": c.expired,
                "invalid": c.invalid,
                "failed": c.failed,
                "unanswered": c.unanswered,
                "decisions": c.decisions,
                "confirmed_unasked": c.confirmed_unasked,
                "approved_by_rule": c.approved_by_rule,
                "denial_rate": c.denial_rate(),
            },
            "step_limit": {
                "calls": self.step_limit_calls,
                "sessions": self.step_limit_sessions,
            },
        })
    }
}
