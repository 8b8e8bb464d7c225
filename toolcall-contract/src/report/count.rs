//! Counting an audit log: telling decisions from calls, each call's
//! outcome, recoveries, and the tallies of [`Report`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;
use toolcall_core::canonical::canonical_json;
use toolcall_core::{AuditRecord, Code};

use super::{Confirmations, Rejections, Report, Stats, ToolStats};

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
                &*record.tool,
                arguments_key(&record.arguments),
            );
            let waiting = pending.get(&key).copied().unwrap_or(0);
            // A call a rule approved is the model's call, not a decision.
            let decision = (record.approved_by.is_some() && by_rule(record).is_none())
                || (record.confirmed && waiting > 0 && by_rule(record).is_none());
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

/// The rule of the operators' controls that approved `record` in a
/// person's place (its approver `rule:<name>`), if one did.
fn by_rule(record: &AuditRecord) -> Option<&str> {
    record.approved_by.as_deref()?.strip_prefix("rule:")
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

pub(super) fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

impl Report {
    /// Counts `records`, taken in log order (oldest first).
    pub fn from_records(records: &[AuditRecord]) -> Report {
        let (decided, answered) = decisions(records);
        let recovered = recoveries(records, &decided);
        let mut counts = Counts::default();
        for ((record, &recovered), &decision) in records.iter().zip(&recovered).zip(&decided) {
            counts.sessions.insert(record.session_id.as_str());
            let confirmations = &mut counts.confirmations;
            match &record.code {
                Code::ConfirmationDenied => confirmations.denied += 1,
                Code::ConfirmationExpired => confirmations.expired += 1,
                Code::ConfirmationInvalid => confirmations.invalid += 1,
                _ => {}
            }
            if decision {
                counts.decision(record);
            } else {
                counts.call(record, recovered);
            }
        }
        counts.confirmations.unanswered = counts.confirmations.required.saturating_sub(answered);
        counts.finish()
    }
}

/// What is counted while the log is read, before the rates are worked out.
#[derive(Default)]
struct Counts<'a> {
    totals: Tally,
    tools: BTreeMap<&'a str, Tally>,
    /// Rejections and recoveries by code.
    by_code: BTreeMap<&'a str, (u64, u64)>,
    /// Rejections and recoveries by tool and code.
    by_tool_and_code: BTreeMap<(&'a str, &'a str), (u64, u64)>,
    sessions: BTreeSet<&'a str>,
    step_limited: BTreeSet<&'a str>,
    confirmations: Confirmations,
    step_limit_calls: u64,
}

impl<'a> Counts<'a> {
    /// A person's decision on a pending approval.
    fn decision(&mut self, record: &AuditRecord) {
        let confirmations = &mut self.confirmations;
        confirmations.decisions += 1;
        match &record.code {
            Code::ConfirmationDenied | Code::ConfirmationExpired | Code::ConfirmationInvalid => {}
            _ if record.ok => confirmations.approved += 1,
            _ if record.confirmed => {
                confirmations.approved += 1;
                confirmations.approved_then_failed += 1;
            }
            _ => confirmations.failed += 1,
        }
    }

    /// A call the model made.
    fn call(&mut self, record: &'a AuditRecord, recovered: bool) {
        self.totals.add(record, recovered);
        self.tools
            .entry(&record.tool)
            .or_default()
            .add(record, recovered);
        if by_rule(record).is_some() {
            self.confirmations.approved_by_rule += 1;
        } else {
            self.confirmations.confirmed_unasked += u64::from(record.confirmed);
        }
        match outcome(record) {
            Outcome::Rejected => {
                let code = record.code.as_str();
                for counts in [
                    self.by_code.entry(code).or_default(),
                    self.by_tool_and_code
                        .entry((&record.tool, code))
                        .or_default(),
                ] {
                    counts.0 += 1;
                    counts.1 += u64::from(recovered);
                }
            }
            Outcome::Awaiting => self.confirmations.required += 1,
            Outcome::RefusedByHost if record.code == Code::StepLimit => {
                self.step_limit_calls += 1;
                self.step_limited.insert(record.session_id.as_str());
            }
            _ => {}
        }
    }

    /// The report: the tallies finished, the rejections rated and sorted.
    fn finish(self) -> Report {
        let totals = self.totals.finish();
        let tools: Vec<ToolStats> = self
            .tools
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
        let mut by_code: Vec<Rejections> = self
            .by_code
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
        let mut by_tool_and_code: Vec<Rejections> = self
            .by_tool_and_code
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
            sessions: self.sessions.len() as u64,
            tools,
            by_code,
            by_tool_and_code,
            confirmations: self.confirmations,
            step_limit_calls: self.step_limit_calls,
            step_limit_sessions: self.step_limited.len() as u64,
        }
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
        let key = (session, &*record.tool);
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
