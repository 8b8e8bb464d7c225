//! The metrics page: the audit log's report as inline SVG charts.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use toolcall_core::AuditRecord;
use toolcall_core::store::now_ms;

use crate::chart;
use crate::history::came_of;
use crate::html::{Html, utc};
use crate::page::{html_response, layout};
use crate::security::Who;
use crate::timeline::Timeline;
use crate::{App, Backend};
use toolcall_core::store::prelude::*;

/// Reads an audit log: its records, and how many lines were not records.
async fn read_audit(path: &std::path::Path) -> std::io::Result<(Vec<AuditRecord>, usize)> {
    let text = tokio::fs::read_to_string(path).await?;
    let mut records = Vec::new();
    let mut unreadable = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(line) {
            Ok(record) => records.push(record),
            Err(_) => unreadable += 1,
        }
    }
    Ok((records, unreadable))
}

/// A report without `report`: calls, ok and failures by code and by tool.
fn plain_summary(records: &[AuditRecord]) -> Value {
    let mut by_code: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_tool: BTreeMap<String, u64> = BTreeMap::new();
    for record in records.iter().filter(|r| !r.ok) {
        *by_code.entry(record.code.as_str().to_owned()).or_default() += 1;
        *by_tool.entry(record.tool.to_string()).or_default() += 1;
    }
    json!({
        "totals": {"calls": records.len(), "ok": records.iter().filter(|r| r.ok).count()},
        "rejections_by_code": by_code.iter().map(|(code, n)| json!({"code": code, "rejected": n})).collect::<Vec<_>>(),
        "tools": by_tool.iter().map(|(tool, n)| json!({"tool": tool, "rejected": n})).collect::<Vec<_>>(),
    })
}

pub(crate) async fn metrics<B: Backend>(State(app): State<Arc<App<B>>>, who: Who) -> Response {
    let user = &who;
    let mut body = Html::default();
    let summarize = |records: &[AuditRecord]| match &app.options.summarize {
        Some(summarize) => summarize(records),
        None => plain_summary(records),
    };
    match &app.options.audit {
        None => {
            body.raw("<p class=\"lead\">No audit log: start the inbox with <code>--audit FILE</code>, the file the agents write with <code>--audit</code>, to see its metrics here.</p>");
        }
        Some(path) => match read_audit(path).await {
            Err(error) => {
                body.el(
                    "<p class=\"notice bad\">",
                    &format!("Cannot read {}: {error}", path.display()),
                    "</p>",
                );
            }
            Ok((records, unreadable)) => {
                body.el(
                    "<p class=\"lead\">",
                    &format!(
                        "{} record(s) of {}{}, counted as the report command counts them.",
                        records.len(),
                        path.display(),
                        if unreadable > 0 {
                            format!(" ({unreadable} unreadable line(s) left out)")
                        } else {
                            String::new()
                        }
                    ),
                    "</p>",
                );
                let summary = summarize(&records);
                metrics_body(&mut body, &records, &summary, &summarize);
            }
        },
    }
    if let Ok(decided) = app
        .backend
        .store()
        .decided_approvals(app.options.limit)
        .await
    {
        let now = now_ms();
        let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
        for entry in &decided {
            *counts.entry(came_of(entry, now).0).or_default() += 1;
        }
        let rows: Vec<(String, u64, &str)> = counts
            .iter()
            .map(|(class, n)| ((*class).to_owned(), *n, outcome_color(class)))
            .collect();
        body.raw("<section class=\"chart\"><h2>What came of the inbox's decisions</h2>")
            .raw(&chart::bars("What came of the inbox's decisions", &rows))
            .raw("</section>");
    }
    html_response(
        StatusCode::OK,
        layout(
            "Metrics",
            &app.options.title,
            Some(user),
            "Metrics",
            &body.finish(),
        ),
    )
}

fn outcome_color(class: &str) -> &'static str {
    match class {
        "ran" => "#009E73",
        "failed" | "denied" => "#D55E00",
        "replayed" => "#56B4E9",
        _ => "#E69F00",
    }
}

fn count(value: &Value, name: &str) -> u64 {
    value[name].as_u64().unwrap_or(0)
}

fn metrics_body(
    body: &mut Html,
    records: &[AuditRecord],
    summary: &Value,
    summarize: &dyn Fn(&[AuditRecord]) -> Value,
) {
    let totals = &summary["totals"];
    let rate = |name: &str| {
        totals[name]
            .as_f64()
            .map_or_else(|| "–".to_owned(), |r| format!("{:.1}%", r * 100.0))
    };
    body.raw("<div class=\"stats\">");
    for (label, value) in [
        ("calls", count(totals, "calls").to_string()),
        ("ok", count(totals, "ok").to_string()),
        ("rejected", count(totals, "rejected").to_string()),
        ("rejection rate", rate("rejection_rate")),
        ("recovery rate", rate("recovery_rate")),
        ("replayed", count(totals, "replayed").to_string()),
        (
            "refused by the host",
            count(totals, "refused_by_host").to_string(),
        ),
        ("failed", count(totals, "failed").to_string()),
    ] {
        body.raw("<div><b>")
            .text(&value)
            .raw("</b>")
            .text(label)
            .raw("</div>");
    }
    body.raw("</div>");

    let by_code: Vec<(String, u64, &str)> = summary["rejections_by_code"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    (
                        row["code"].as_str().unwrap_or("?").to_owned(),
                        count(row, "rejected"),
                        chart::color(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    body.raw("<section class=\"chart\"><h2>Rejections by code</h2>")
        .raw(&chart::bars("Rejections by code", &by_code))
        .raw("</section>");

    over_time(body, records, summarize);

    let c = &summary["confirmations"];
    if c.is_object() {
        let rows: Vec<(String, u64, &str)> = [
            ("asked for approval", "required", "#0072B2"),
            ("approved", "approved", "#009E73"),
            ("approved, then failed", "approved_then_failed", "#D55E00"),
            ("denied", "denied", "#D55E00"),
            ("expired", "expired", "#E69F00"),
            ("invalid", "invalid", "#CC79A7"),
            ("never answered", "unanswered", "#999999"),
        ]
        .into_iter()
        .map(|(label, name, color)| (label.to_owned(), count(c, name), color))
        .collect();
        body.raw("<section class=\"chart\"><h2>Approval outcomes</h2>")
            .raw(&chart::bars("Approval outcomes", &rows))
            .raw("</section>");
    }
}

/// Rejections by tool and by code over the log: in buckets of wall time
/// (when each call reached the dispatcher) when its records carry one;
/// else, for a log written before records kept a time, in slices of calls
/// in the log's order, and the page says so.
fn over_time(
    body: &mut Html,
    records: &[AuditRecord],
    summarize: &dyn Fn(&[AuditRecord]) -> Value,
) {
    let (over, labels, parts, lead) = match Timeline::over(records.iter().map(|r| r.at_ms)) {
        Some(timeline) => {
            let mut parts: Vec<Vec<AuditRecord>> = vec![Vec::new(); timeline.labels.len()];
            let mut untimed = 0;
            for record in records {
                match timeline.bucket(record.at_ms) {
                    Some(i) => parts[i].push(record.clone()),
                    None => untimed += 1,
                }
            }
            let mut lead = format!(
                "Calls by when they reached the dispatcher, in buckets of {} (UTC), from {} to {}.",
                timeline.width(),
                utc(timeline.start_ms),
                utc(timeline.end_ms())
            );
            if untimed > 0 {
                lead.push_str(&format!(
                    " {untimed} record(s) without a time (written before records kept one) are left out."
                ));
            }
            ("over time", timeline.labels, parts, lead)
        }
        None => {
            // Up to ten slices of calls, each counted apart.
            let slices = records.len().clamp(1, 10);
            let size = records.len().div_ceil(slices).max(1);
            let mut labels = Vec::new();
            let mut parts = Vec::new();
            for (i, chunk) in records.chunks(size).enumerate() {
                let start = i * size + 1;
                labels.push(format!("{}–{}", start, start + chunk.len() - 1));
                parts.push(chunk.to_vec());
            }
            let lead = "The log's records carry no time (it was written before records kept one): \
                        calls in the order the log has them, in slices."
                .to_owned();
            ("over the log", labels, parts, lead)
        }
    };
    let summaries: Vec<Value> = parts.iter().map(|part| summarize(part)).collect();
    for (what, list, key) in [
        ("tool", "tools", "tool"),
        ("code", "rejections_by_code", "code"),
    ] {
        let title = format!("Rejections by {what} {over}");
        body.el("<section class=\"chart\"><h2>", &title, "</h2>")
            .el("<p class=\"lead\">", &lead, "</p>")
            .raw(&chart::stacked(
                &title,
                &labels,
                &rejections(&summaries, list, key),
            ))
            .raw("</section>");
    }
}

/// The rejections in each part's summary, by the `key` of the rows of its
/// `list` (`tools` by `tool`, `rejections_by_code` by `code`): one series
/// a name, one value a part.
fn rejections(summaries: &[Value], list: &str, key: &str) -> Vec<(String, Vec<u64>)> {
    let mut series: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (i, part) in summaries.iter().enumerate() {
        for row in part[list].as_array().into_iter().flatten() {
            let rejected = count(row, "rejected");
            if rejected == 0 {
                continue;
            }
            let name = row[key].as_str().unwrap_or("?").to_owned();
            series
                .entry(name)
                .or_insert_with(|| vec![0; summaries.len()])[i] += rejected;
        }
    }
    series.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-30 13:00:00 UTC.
    const T0: u64 = 1_796_043_600_000;
    const MINUTE: u64 = 60_000;

    fn record(tool: &str, code: &str, at_ms: u64) -> AuditRecord {
        serde_json::from_value(json!({
            "session_id": "s", "caller": "c", "step": 1, "tool": tool,
            "arguments": "{}", "confirmed": false, "ok": code == "OK", "code": code,
            "replayed": false, "duration_ms": 1.0, "at_ms": at_ms,
        }))
        .unwrap()
    }

    fn page(records: &[AuditRecord]) -> String {
        let mut body = Html::default();
        metrics_body(&mut body, records, &plain_summary(records), &plain_summary);
        body.finish()
    }

    fn log() -> Vec<AuditRecord> {
        vec![
            record("pay", "INVALID_ARGUMENTS", T0 + MINUTE), // 13:01
            record("pay", "OK", T0 + 20 * MINUTE),
            record("pay", "INVALID_ARGUMENTS", T0 + 9 * MINUTE), // 13:09
            record("ship", "INVALID_JSON", T0 + 170 * MINUTE),   // 15:50
            record("refund", "INVALID_ARGUMENTS", T0 + 180 * MINUTE - 1000), // 15:59:59
            record("pay", "INVALID_JSON", T0 + 31 * MINUTE),     // 13:31
        ]
    }

    #[test]
    fn rejections_are_charted_in_buckets_of_wall_time() {
        let page = page(&log());
        assert!(
            page.contains("<h2>Rejections by tool over time</h2>"),
            "{page}"
        );
        assert!(page.contains("<h2>Rejections by code over time</h2>"));
        assert!(page.contains(
            "in buckets of 10 min (UTC), from 2026-11-30 13:00:00 UTC to 2026-11-30 16:00:00 UTC"
        ));
        // By tool: both rejections of 13:01 and 13:09 in the 13:00 bucket,
        // the one of 13:31 in the 13:30 one, the last two in 15:50's.
        for column in [
            "pay, 13:00: 2",
            "pay, 13:30: 1",
            "ship, 15:50: 1",
            "refund, 15:50: 1",
        ] {
            assert!(
                page.contains(&format!("<title>{column}</title>")),
                "{column}: {page}"
            );
        }
        assert!(!page.contains("<title>pay, 13:10"), "nothing rejected then");
        assert!(
            !page.contains("<title>pay, 13:20"),
            "the ok call is no rejection"
        );
        // By code, over the same buckets.
        for column in [
            "INVALID_ARGUMENTS, 13:00: 2",
            "INVALID_JSON, 13:30: 1",
            "INVALID_ARGUMENTS, 15:50: 1",
            "INVALID_JSON, 15:50: 1",
        ] {
            assert!(
                page.contains(&format!("<title>{column}</title>")),
                "{column}: {page}"
            );
        }
        assert!(!page.contains("without a time"));
    }

    #[test]
    fn records_without_a_time_are_left_out_and_the_page_says_so() {
        let mut records = log();
        records.push(record("pay", "INVALID_ARGUMENTS", 0));
        let page = page(&records);
        assert!(page.contains("1 record(s) without a time"), "{page}");
        assert!(page.contains("<title>pay, 13:00: 2</title>"), "{page}");
    }

    #[test]
    fn a_log_without_times_is_charted_in_slices_of_its_order() {
        let records: Vec<AuditRecord> = log()
            .into_iter()
            .map(|mut record| {
                record.at_ms = 0;
                record
            })
            .collect();
        let page = page(&records);
        assert!(
            page.contains("<h2>Rejections by tool over the log</h2>"),
            "{page}"
        );
        assert!(page.contains("carry no time"));
        assert!(!page.contains("over time"));
        // Six records, six slices of one call each.
        assert!(page.contains("<title>pay, 1–1: 1</title>"), "{page}");
        assert!(page.contains("<title>pay, 3–3: 1</title>"));
        assert!(page.contains("<title>refund, 5–5: 1</title>"));
    }
}
