//! Metrics from an audit log: where models fail to call tools, whether they
//! recover, and what people decide.
//!
//! The dispatcher writes one [`AuditRecord`] per call, whatever its outcome
//! ([`JsonLinesAudit`](toolcall_core::JsonLinesAudit) writes them one JSON
//! object a line). [`read_audit`] reads such a log and [`Report::from_records`]
//! counts it. The report prints as aligned plain-text tables
//! ([`Display`](fmt::Display)) or as JSON ([`Report::to_json`]).
//!
//! # Terms
//!
//! Every record falls in exactly one of three outcomes:
//!
//! * **ok**: `ok` is `true` (this includes replays);
//! * **awaiting confirmation**: `ok` is `false` and the code is
//!   `CONFIRMATION_REQUIRED`. The call was valid and is waiting for a person;
//!   it is neither a success nor a refusal;
//! * **rejected**: every other record with `ok` `false`, whatever the stage
//!   that refused it (validation, policy, a business check, a denied
//!   approval, a timeout, ...).
//!
//! A rejected record is **recovered** when the *next* record of the same
//! session (`session_id`) for the same tool (`tool`), in log order, is ok or
//! awaiting confirmation: the model's next attempt at that tool got through
//! the pipeline. A rejection with no later record for that tool in its
//! session is not recovered (the model gave up, or the log ends). Log order is
//! the order the dispatcher finished the calls in, not the `step`, because a
//! person's decision on a pending approval is recorded later under the step
//! of the call it answers.
//!
//! # Metrics
//!
//! For all records, per tool, per rejection code and per (tool, code) pair:
//!
//! | metric | definition |
//! |---|---|
//! | `calls` | records |
//! | `ok`, `awaiting_confirmation`, `rejected` | records with each outcome (they add up to `calls`) |
//! | `rejection_rate` | `rejected / calls`; for a code, its rejections over *all* calls; for a (tool, code) pair, over that tool's calls |
//! | `recovered` | rejected records that were recovered |
//! | `recovery_rate` | `recovered / rejected`, absent (`null`, `-`) when nothing was rejected |
//! | `replayed` | records with `replayed` `true`: a stored result returned instead of running the tool again |
//! | `loop_detected` | records with the code `LOOP_DETECTED`: the loop guard stopped a repeated call |
//! | `duration_ms.p50`, `duration_ms.p95` | nearest-rank percentiles of `duration_ms`: the value at rank ⌈p/100 · n⌉ of the n durations in ascending order; absent without records |
//!
//! Over the whole log only:
//!
//! | metric | definition |
//! |---|---|
//! | `sessions` | distinct `session_id`s |
//! | `confirmations.required` | records with `CONFIRMATION_REQUIRED` |
//! | `confirmations.approved` | records that are ok, not replayed, and either carry `approved_by` (a person's decision through the host) or were sent `confirmed`. The record does not say whether the tool needed an approval, so a host that marks every call confirmed counts them all |
//! | `confirmations.denied`, `.expired`, `.invalid` | records with `CONFIRMATION_DENIED`, `CONFIRMATION_EXPIRED`, `CONFIRMATION_INVALID` |
//! | `confirmations.denial_rate` | `denied / (approved + denied)`, absent when both are zero: how often people refuse what the model proposes |
//! | `step_limit.calls` | records with `STEP_LIMIT`: calls refused because the session used up its step budget |
//! | `step_limit.sessions` | distinct sessions with at least one such record |
//!
//! Rates are fractions from 0 to 1 in JSON and percentages in the table.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{self, Write as _};
use std::io::{self, BufRead};

use serde_json::{Value, json};
use toolcall_core::{AuditRecord, Code};

/// The version of the JSON layout of [`Report::to_json`].
pub const FORMAT_VERSION: u64 = 1;

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

/// Counts for a set of records: all of them, or one tool's. See the
/// [module docs](self) for the definitions.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Records.
    pub calls: u64,
    /// Records with `ok` true.
    pub ok: u64,
    /// Records with `CONFIRMATION_REQUIRED`.
    pub awaiting_confirmation: u64,
    /// Records neither ok nor awaiting confirmation.
    pub rejected: u64,
    /// Rejected records whose session's next call of the same tool got through.
    pub recovered: u64,
    /// Records with `replayed` true.
    pub replayed: u64,
    /// Records with `LOOP_DETECTED`.
    pub loop_detected: u64,
    /// Median `duration_ms` (nearest rank), if there are records.
    pub p50_ms: Option<f64>,
    /// 95th percentile of `duration_ms` (nearest rank), if there are records.
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
    /// Rejected records with this code.
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

/// What happened to calls that needed a person's approval.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Confirmations {
    /// Records with `CONFIRMATION_REQUIRED`.
    pub required: u64,
    /// Ok, not replayed records with `approved_by` set or `confirmed` true.
    pub approved: u64,
    /// Records with `CONFIRMATION_DENIED`.
    pub denied: u64,
    /// Records with `CONFIRMATION_EXPIRED`.
    pub expired: u64,
    /// Records with `CONFIRMATION_INVALID`.
    pub invalid: u64,
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
    /// Counts over every record.
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
    /// Records refused with `STEP_LIMIT`.
    pub step_limit_calls: u64,
    /// Sessions with at least one `STEP_LIMIT` record.
    pub step_limit_sessions: u64,
}

/// The outcome class of one record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Awaiting,
    Rejected,
}

fn outcome(record: &AuditRecord) -> Outcome {
    if record.ok {
        Outcome::Ok
    } else if record.code == Code::ConfirmationRequired {
        Outcome::Awaiting
    } else {
        Outcome::Rejected
    }
}

/// Counts and durations gathered for one group of records.
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
        let recovered = recoveries(records);
        let mut totals = Tally::default();
        let mut tools: BTreeMap<&str, Tally> = BTreeMap::new();
        let mut by_code: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let mut by_tool_and_code: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
        let mut sessions = BTreeSet::new();
        let mut step_limited = BTreeSet::new();
        let mut confirmations = Confirmations::default();
        let mut step_limit_calls = 0;

        for (record, &recovered) in records.iter().zip(&recovered) {
            totals.add(record, recovered);
            tools
                .entry(&record.tool)
                .or_default()
                .add(record, recovered);
            sessions.insert(record.session_id.as_str());
            if outcome(record) == Outcome::Rejected {
                let code = record.code.as_str();
                for counts in [
                    by_code.entry(code).or_default(),
                    by_tool_and_code.entry((&record.tool, code)).or_default(),
                ] {
                    counts.0 += 1;
                    counts.1 += u64::from(recovered);
                }
            }
            match &record.code {
                Code::ConfirmationRequired => confirmations.required += 1,
                Code::ConfirmationDenied => confirmations.denied += 1,
                Code::ConfirmationExpired => confirmations.expired += 1,
                Code::ConfirmationInvalid => confirmations.invalid += 1,
                Code::StepLimit => {
                    step_limit_calls += 1;
                    step_limited.insert(record.session_id.as_str());
                }
                _ => {}
            }
            if record.ok && !record.replayed && (record.approved_by.is_some() || record.confirmed) {
                confirmations.approved += 1;
            }
        }

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
    ///   "format_version": 1,
    ///   "sessions": <count>,
    ///   "totals": <stats>,
    ///   "tools": [{"tool": <name>, ...<stats>}],
    ///   "rejections_by_code": [<rejections>],
    ///   "rejections_by_tool_and_code": [{"tool": <name>, ...<rejections>}],
    ///   "confirmations": {"required", "approved", "denied", "expired", "invalid", "denial_rate"},
    ///   "step_limit": {"calls", "sessions"}
    /// }
    /// <stats> = "calls", "ok", "awaiting_confirmation", "rejected", "rejection_rate",
    ///           "recovered", "recovery_rate", "replayed", "loop_detected",
    ///           "duration_ms": {"p50", "p95"}
    /// <rejections> = "code", "rejected", "rate", "recovered", "recovery_rate"
    /// ```
    ///
    /// Counts are integers, rates fractions from 0 to 1, and a rate or a
    /// duration without a denominator is `null`. The members are written in
    /// this order, and the lists in the order of the [`Report`] fields.
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
                "denied": c.denied,
                "expired": c.expired,
                "invalid": c.invalid,
                "denial_rate": c.denial_rate(),
            },
            "step_limit": {
                "calls": self.step_limit_calls,
                "sessions": self.step_limit_sessions,
            },
        })
    }
}

/// For each record, whether it is a recovered rejection: walking the log
/// backwards, the next record of each (session, tool) is always at hand.
fn recoveries(records: &[AuditRecord]) -> Vec<bool> {
    let mut next_got_through: HashMap<(&str, &str), bool> = HashMap::new();
    let mut recovered = vec![false; records.len()];
    for (i, record) in records.iter().enumerate().rev() {
        let key = (record.session_id.as_str(), record.tool.as_str());
        if outcome(record) == Outcome::Rejected {
            recovered[i] = next_got_through.get(&key).copied().unwrap_or(false);
        }
        next_got_through.insert(key, outcome(record) != Outcome::Rejected);
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
    /// confirmation outcomes and the step budget.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} call(s) in {} session(s): {} ok, {} awaiting confirmation, {} rejected",
            t.calls, self.sessions, t.ok, t.awaiting_confirmation, t.rejected
        );
        if t.calls == 0 {
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

        let c = &self.confirmations;
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
            "step budget: {} call(s) refused with STEP_LIMIT, in {} session(s)",
            self.step_limit_calls, self.step_limit_sessions
        );
        f.write_str(&out)
    }
}
