//! The report as aligned plain-text tables.

use std::fmt::{self, Write as _};

use super::{Rejections, Report, Stats};
use toolcall_core::__private::echo::printable;

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0))
}

fn millis(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"))
}

/// Writes rows under headers; the first `left` columns are aligned left,
/// the others (numbers) right. Columns are two spaces apart.
/// The widest cell a table shows, in bytes: longer ones are cut.
const MAX_CELL: usize = 96;

fn table(out: &mut String, headers: &[&str], left: usize, rows: &[Vec<String>]) {
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    // A cell comes from the audit log (a tool name the model made up, a
    // code): shown escaped and bounded, it cannot forge a row.
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| printable(cell, MAX_CELL).into_owned())
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
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
             {} call(s) sent confirmed unasked, {} approved by a rule",
            c.approved_then_failed, c.failed, c.unanswered, c.confirmed_unasked, c.approved_by_rule
        );
        let _ = writeln!(
            out,
            "step budget: {} call(s) refused with STEP_LIMIT, in {} session(s)",
            self.step_limit_calls, self.step_limit_sessions
        );
        f.write_str(&out)
    }
}
