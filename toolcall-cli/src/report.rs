//! Metrics from an audit log: where models fail to call tools, whether they
//! recover, and what people decide.
//!
//! The dispatcher writes one [`AuditRecord`] per call, whatever its outcome
//! ([`JsonLinesAudit`](toolcall_core::JsonLinesAudit) writes them one JSON
//! object a line), and one per decision a person makes on a pending
//! approval. [`read_audit`] reads such a log and [`Report::from_records`]
//! counts it. The report prints as aligned plain-text tables
//! ([`Display`](fmt::Display)) or as JSON ([`Report::to_json`]).
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
//! | `confirmations.confirmed_unasked` | calls sent `confirmed` that answer no `CONFIRMATION_REQUIRED`: the host asked a person beforehand, or marks calls confirmed; they are not counted as approvals |
//! | `confirmations.denial_rate` | `denied / (approved + denied)`, absent when both are zero: how often people refuse what the model proposes |
//! | `step_limit.calls` | calls with `STEP_LIMIT`: refused because the session used up its step budget |
//! | `step_limit.sessions` | distinct sessions with at least one such call |
//!
//! Rates are fractions from 0 to 1 in JSON and percentages in the table.
//!
//! [`Dispatcher::approve`]: toolcall_core::Dispatcher::approve
//! [`Dispatcher::deny`]: toolcall_core::Dispatcher::deny

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{self, Write as _};
use std::io::{self, BufRead};

use serde_json::{Value, json};
use toolcall_core::canonical::canonical_json;
use toolcall_core::{AuditRecord, Code};

/// The version of the JSON layout of [`Report::to_json`].
pub const FORMAT_VERSION: u64 = 2;

/// Why an audit log could not be read. Lines are numbered from 1, counting
/// blank ones.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The input could not be read.
    Io {
        /// The line being read.
        line: usize,
        /// The cause.
        source: io::Error,
    },
    /// A line is not an audit record.
    Record {
        /// The line.
        line: usize,
        /// What is wrong with it.
        source: serde_json::Error,
    },
}

impl ReadError {
    /// The line the error is on, from 1.
    pub fn line(&self) -> usize {
        match self {
            ReadError::Io { line, .. } | ReadError::Record { line, .. } => *line,
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { line, source } => write!(f, "line {line}: cannot read: {source}"),
            ReadError::Record { line, source } => {
                write!(f, "line {line}: not an audit record: {source}")
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            ReadError::Record { source, .. } => Some(source),
        }
    }
}

/// Reads an audit log, one JSON record a line, as
/// [`JsonLinesAudit`](toolcall_core::JsonLinesAudit) writes it. Lines that
/// hold only white space are skipped; the first line that is not a record
/// stops the reading with an error naming it.
pub fn read_audit(reader: impl BufRead) -> Result<Vec<AuditRecord>, ReadError> {
    let mut records = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let number = index + 1;
        let line = line.map_err(|source| ReadError::Io {
            line: number,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(&line).map_err(|source| ReadError::Record {
            line: number,
            source,
        })?;
        records.push(record);
    }
    Ok(records)
}

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

/// The outcome class of one call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Awaiting,
    Rejected,
    RefusedByHost,
    Failed,
}

fn outcome(record: &AuditRecord) -> Outcome {
    if record.ok {
        return Outcome::Ok;
    }
    match record.code {
        Code::ConfirmationRequired => Outcome::Awaiting,
        Code::ConfirmationDenied
        | Code::ConfirmationExpired
        | Code::ConfirmationInvalid
        | Code::StepLimit => Outcome::RefusedByHost,
        Code::Timeout
        | Code::UpstreamUnavailable
        | Code::StoreUnavailable
        | Code::InternalError
        | Code::CallInProgress => Outcome::Failed,
        _ => Outcome::Rejected,
    }
}

/// Whether the model's fix for this rejection is to call another tool.
fn wrong_tool(record: &AuditRecord) -> bool {
    matches!(record.code, Code::UnknownTool | Code::ToolNotAllowed)
}

/// The arguments as compared when pairing a decision with the call it
/// answers: canonical JSON when they parse, the text as it is otherwise.
fn arguments_key(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments)
        .map_or_else(|_| arguments.to_owned(), |value| canonical_json(&value))
}

/// For each record, whether it is a decision (see the module docs), and the
/// number of `CONFIRMATION_REQUIRED` calls answered by one.
fn decisions(records: &[AuditRecord]) -> (Vec<bool>, u64) {
    let mut pending: HashMap<(&str, &str, String), u64> = HashMap::new();
    let mut answered = 0;
    let decided = records
        .iter()
        .map(|record| {
            let key = (
                record.session_id.as_str(),
                record.tool.as_str(),
                arguments_key(&record.arguments),
            );
            let waiting = pending.get(&key).copied().unwrap_or(0);
            let decision = record.approved_by.is_some() || (record.confirmed && waiting > 0);
            if decision {
                if waiting > 0 {
                    pending.insert(key, waiting - 1);
                    answered += 1;
                }
            } else if record.code == Code::ConfirmationRequired {
                *pending.entry(key).or_default() += 1;
            }
            decision
        })
        .collect();
    (decided, answered)
}

/// Counts and durations gathered for one group of calls.
#[derive(Default)]
struct Tally {
    stats: Stats,
    durations: Vec<f64>,
}

impl Tally {
    fn add(&mut self, record: &AuditRecord, recovered: bool) {
        let stats = &mut self.stats;
        stats.calls += 1;
        match outcome(record) {
            Outcome::Ok => stats.ok += 1,
            Outcome::Awaiting => stats.awaiting_confirmation += 1,
            Outcome::RefusedByHost => stats.refused_by_host += 1,
            Outcome::Failed => stats.failed += 1,
            Outcome::Rejected => {
                stats.rejected += 1;
                stats.recovered += u64::from(recovered);
            }
        }
        stats.replayed += u64::from(record.replayed);
        stats.loop_detected += u64::from(record.code == Code::LoopDetected);
        self.durations.push(record.duration_ms);
    }

    fn finish(mut self) -> Stats {
        self.durations.sort_by(f64::total_cmp);
        self.stats.p50_ms = percentile(&self.durations, 50);
        self.stats.p95_ms = percentile(&self.durations, 95);
        self.stats
    }
}

/// Nearest rank: the value at rank ⌈p/100 · n⌉ (from 1) of the sorted values.
fn percentile(sorted: &[f64], p: u64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len() as u64;
    let rank = (p * n).div_ceil(100).max(1);
    Some(sorted[(rank - 1) as usize])
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

impl Report {
    /// Counts `records`, taken in log order (oldest first).
    pub fn from_records(records: &[AuditRecord]) -> Report {
        let (decided, answered) = decisions(records);
        let recovered = recoveries(records, &decided);
        let mut totals = Tally::default();
        let mut tools: BTreeMap<&str, Tally> = BTreeMap::new();
        let mut by_code: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let mut by_tool_and_code: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
        let mut sessions = BTreeSet::new();
        let mut step_limited = BTreeSet::new();
        let mut confirmations = Confirmations::default();
        let mut step_limit_calls = 0;

        for ((record, &recovered), &decision) in records.iter().zip(&recovered).zip(&decided) {
            sessions.insert(record.session_id.as_str());
            match &record.code {
                Code::ConfirmationDenied => confirmations.denied += 1,
                Code::ConfirmationExpired => confirmations.expired += 1,
                Code::ConfirmationInvalid => confirmations.invalid += 1,
                _ => {}
            }
            if decision {
                confirmations.decisions += 1;
                match &record.code {
                    Code::ConfirmationDenied
                    | Code::ConfirmationExpired
                    | Code::ConfirmationInvalid => {}
                    _ if record.ok => confirmations.approved += 1,
                    _ if record.confirmed => {
                        confirmations.approved += 1;
                        confirmations.approved_then_failed += 1;
                    }
                    _ => confirmations.failed += 1,
                }
                continue;
            }

            totals.add(record, recovered);
            tools
                .entry(&record.tool)
                .or_default()
                .add(record, recovered);
            confirmations.confirmed_unasked += u64::from(record.confirmed);
            match outcome(record) {
                Outcome::Rejected => {
                    let code = record.code.as_str();
                    for counts in [
                        by_code.entry(code).or_default(),
                        by_tool_and_code.entry((&record.tool, code)).or_default(),
                    ] {
                        counts.0 += 1;
                        counts.1 += u64::from(recovered);
                    }
                }
                Outcome::Awaiting => confirmations.required += 1,
                Outcome::RefusedByHost if record.code == Code::StepLimit => {
                    step_limit_calls += 1;
                    step_limited.insert(record.session_id.as_str());
                }
                _ => {}
            }
        }
        confirmations.unanswered = confirmations.required.saturating_sub(answered);

        let totals = totals.finish();
        let tools: Vec<ToolStats> = tools
            .into_iter()
            .map(|(tool, tally)| ToolStats {
                tool: tool.to_owned(),
                stats: tally.finish(),
            })
            .collect();
        let calls_of = |tool: &str| {
            tools
                .iter()
                .find(|t| t.tool == tool)
                .map_or(0, |t| t.stats.calls)
        };
        let mut by_code: Vec<Rejections> = by_code
            .into_iter()
            .map(|(code, (rejected, recovered))| Rejections {
                tool: None,
                code: code.to_owned(),
                rejected,
                rate: ratio(rejected, totals.calls).unwrap_or(0.0),
                recovered,
            })
            .collect();
        by_code.sort_by(|a, b| {
            b.rejected
                .cmp(&a.rejected)
                .then_with(|| a.code.cmp(&b.code))
        });
        let mut by_tool_and_code: Vec<Rejections> = by_tool_and_code
            .into_iter()
            .map(|((tool, code), (rejected, recovered))| Rejections {
                tool: Some(tool.to_owned()),
                code: code.to_owned(),
                rejected,
                rate: ratio(rejected, calls_of(tool)).unwrap_or(0.0),
                recovered,
            })
            .collect();
        by_tool_and_code.sort_by(|a, b| {
            a.tool
                .cmp(&b.tool)
                .then_with(|| b.rejected.cmp(&a.rejected))
                .then_with(|| a.code.cmp(&b.code))
        });

        Report {
            totals,
            sessions: sessions.len() as u64,
            tools,
            by_code,
            by_tool_and_code,
            confirmations,
            step_limit_calls,
            step_limit_sessions: step_limited.len() as u64,
        }
    }

    /// The report as JSON. Its layout, version [`FORMAT_VERSION`]:
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
    ///                     "confirmed_unasked", "denial_rate"},
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
            "format_version": FORMAT_VERSION,
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
                "denial_rate": c.denial_rate(),
            },
            "step_limit": {
                "calls": self.step_limit_calls,
                "sessions": self.step_limit_sessions,
            },
        })
    }
}

/// For each record, whether it is a recovered rejection. Walking the log
/// backwards, the next call of each (session, tool) and of each session is
/// always at hand; decisions are not the model's attempts and are skipped.
fn recoveries(records: &[AuditRecord], decided: &[bool]) -> Vec<bool> {
    let got_through =
        |record: &AuditRecord| matches!(outcome(record), Outcome::Ok | Outcome::Awaiting);
    let mut next_of_tool: HashMap<(&str, &str), bool> = HashMap::new();
    let mut next_in_session: HashMap<&str, bool> = HashMap::new();
    let mut recovered = vec![false; records.len()];
    for (i, record) in records.iter().enumerate().rev() {
        if decided[i] {
            continue;
        }
        let session = record.session_id.as_str();
        let key = (session, record.tool.as_str());
        if outcome(record) == Outcome::Rejected {
            let next = if wrong_tool(record) {
                next_in_session.get(session)
            } else {
                next_of_tool.get(&key)
            };
            recovered[i] = next.copied().unwrap_or(false);
        }
        next_of_tool.insert(key, got_through(record));
        next_in_session.insert(session, got_through(record));
    }
    recovered
}

// ------------------------------------------------------------------ the table

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0))
}

fn millis(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"))
}

/// Writes rows under headers; the first `left` columns are aligned left,
/// the others (numbers) right. Columns are two spaces apart.
fn table(out: &mut String, headers: &[&str], left: usize, rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            if i < left {
                let _ = write!(line, "{cell:<width$}");
            } else {
                let _ = write!(line, "{cell:>width$}");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

/// A tool name for the table: a decision on an unknown approval id has none.
fn tool_cell(name: &str) -> String {
    if name.is_empty() {
        "(none)".to_owned()
    } else {
        name.to_owned()
    }
}

fn stats_row(first: String, s: &Stats) -> Vec<String> {
    vec![
        first,
        s.calls.to_string(),
        s.ok.to_string(),
        s.awaiting_confirmation.to_string(),
        s.rejected.to_string(),
        percent(s.rejection_rate()),
        s.recovered.to_string(),
        percent(s.recovery_rate()),
        s.refused_by_host.to_string(),
        s.failed.to_string(),
        s.replayed.to_string(),
        s.loop_detected.to_string(),
        millis(s.p50_ms),
        millis(s.p95_ms),
    ]
}

fn rejection_row(r: &Rejections) -> Vec<String> {
    let mut row = Vec::new();
    if let Some(tool) = &r.tool {
        row.push(tool_cell(tool));
    }
    row.extend([
        r.code.clone(),
        r.rejected.to_string(),
        percent(Some(r.rate)),
        r.recovered.to_string(),
        percent(r.recovery_rate()),
    ]);
    row
}

impl fmt::Display for Report {
    /// Aligned plain-text tables: a summary line, the counts per tool (and
    /// for all tools), rejections by code and by tool and code, then the
    /// confirmation outcomes, the decisions and the step budget.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals;
        let mut out = String::new();
        let c = &self.confirmations;
        let _ = writeln!(
            out,
            "{} call(s) in {} session(s): {} ok, {} awaiting confirmation, {} rejected, \
             {} refused by the host, {} failed",
            t.calls,
            self.sessions,
            t.ok,
            t.awaiting_confirmation,
            t.rejected,
            t.refused_by_host,
            t.failed
        );
        if c.decisions > 0 {
            let _ = writeln!(
                out,
                "{} decision(s) on approvals, not counted as calls",
                c.decisions
            );
        }
        if t.calls == 0 && c.decisions == 0 {
            return f.write_str(&out);
        }

        out.push('\n');
        let mut rows: Vec<Vec<String>> = self
            .tools
            .iter()
            .map(|tool| stats_row(tool_cell(&tool.tool), &tool.stats))
            .collect();
        rows.push(stats_row("(all)".to_owned(), t));
        table(
            &mut out,
            &[
                "tool",
                "calls",
                "ok",
                "awaiting",
                "rejected",
                "rejection",
                "recovered",
                "recovery",
                "refused",
                "failed",
                "replayed",
                "loops",
                "p50 ms",
                "p95 ms",
            ],
            1,
            &rows,
        );

        if !self.by_code.is_empty() {
            out.push('\n');
            let rows: Vec<Vec<String>> = self.by_code.iter().map(rejection_row).collect();
            table(
                &mut out,
                &["code", "rejected", "of calls", "recovered", "recovery"],
                1,
                &rows,
            );
            out.push('\n');
            let rows: Vec<Vec<String>> = self.by_tool_and_code.iter().map(rejection_row).collect();
            table(
                &mut out,
                &[
                    "tool",
                    "code",
                    "rejected",
                    "of tool",
                    "recovered",
                    "recovery",
                ],
                2,
                &rows,
            );
        }

        out.push('\n');
        let _ = writeln!(
            out,
            "confirmations: {} required, {} approved, {} denied, {} expired, {} invalid (denial rate {})",
            c.required,
            c.approved,
            c.denied,
            c.expired,
            c.invalid,
            percent(c.denial_rate())
        );
        let _ = writeln!(
            out,
            "  {} approved then failed, {} decision(s) not carried out, {} never answered, \
             {} call(s) sent confirmed unasked",
            c.approved_then_failed, c.failed, c.unanswered, c.confirmed_unasked
        );
        let _ = writeln!(
            out,
            "step budget: {} call(s) refused with STEP_LIMIT, in {} session(s)",
            self.step_limit_calls, self.step_limit_sessions
        );
        f.write_str(&out)
    }
}
