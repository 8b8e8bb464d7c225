//! Logs a real dispatcher wrote: failures are neither rejections nor
//! recoveries, made-up names are escaped and bounded, and approvals by rule
//! are counted apart.

use super::*;

// ------------------------------------------------- a log from a real dispatcher

mod shop {
    use super::Rejection;
    use serde_json::{Value, json};
    use toolcall::tool;

    /// A currency.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Currency {
        Brl,
        Usd,
    }

    /// Looks an order up.
    #[tool]
    pub fn get_order(
        /// Order id.
        #[arg(pattern = r"^ORD-\d{4}$")]
        order_id: String,
    ) -> Result<Value, Rejection> {
        Ok(json!({"order_id": order_id, "total_cents": 5000, "currency": "BRL"}))
    }

    /// Refunds an order. Amount in cents.
    #[tool(side_effect, high_risk)]
    pub fn refund_order(
        /// Order id.
        #[arg(pattern = r"^ORD-\d{4}$")]
        order_id: String,
        /// Amount in cents; 25.90 is 2590.
        #[arg(min = 1)]
        amount_cents: i64,
        /// The order's currency.
        currency: Currency,
    ) -> Result<Value, Rejection> {
        let _ = currency;
        Ok(json!({"order_id": order_id, "refunded_cents": amount_cents}))
    }
}

#[tokio::test]
async fn a_log_written_by_a_real_dispatcher() {
    let path =
        std::env::temp_dir().join(format!("toolcall-cli-report-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let registry = toolcall::tools![shop::get_order, shop::refund_order].unwrap();
    let dispatcher = Dispatcher::builder(registry, Arc::new(()))
        .audit(JsonLinesAudit::open(&path).unwrap())
        .max_steps(6)
        .build()
        .unwrap();

    // The reference conversation: a lookup, a refund in reais instead of
    // cents, the corrected refund (a person approves it), and the model's
    // retry, which is replayed.
    let refund = r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL"}"#;
    let lookup = Call::new("get_order", r#"{"order_id": "ORD-1001"}"#).session("demo");
    assert!(dispatcher.execute(lookup).await.ok);
    let wrong = r#"{"order_id": "ORD-1001", "amount_cents": 25.90, "currency": "BRL"}"#;
    let result = dispatcher
        .execute(Call::new("refund_order", wrong).session("demo"))
        .await;
    assert_eq!(result.code, "INVALID_ARGUMENTS");
    let asked = dispatcher
        .execute(Call::new("refund_order", refund).session("demo"))
        .await;
    assert_eq!(asked.code, "CONFIRMATION_REQUIRED");
    let id = asked.question_id.unwrap();
    let approved = dispatcher
        .approve(Decision::new(&id, "demo").by("ana@support"))
        .await;
    assert!(approved.ok, "{approved:?}");
    let retry = dispatcher
        .execute(Call::new("refund_order", refund).session("demo"))
        .await;
    assert!(retry.replayed);

    // Another conversation runs past its step budget.
    for i in 0..7 {
        let args = format!(r#"{{"order_id": "ORD-100{i}"}}"#);
        dispatcher
            .execute(Call::new("get_order", args.as_str()).session("long"))
            .await;
    }

    let file = std::fs::File::open(&path).unwrap();
    let records: Vec<AuditRecord> = read_audit(BufReader::new(file)).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(records.len(), 5 + 7);
    let report = Report::from_records(&records);

    assert_eq!(report.sessions, 2);
    let t = &report.totals;
    assert_eq!(
        (
            t.calls,
            t.ok,
            t.awaiting_confirmation,
            t.rejected,
            t.refused_by_host
        ),
        (11, 8, 1, 1, 1),
        "the approval is a decision, not a call; STEP_LIMIT is the host's refusal"
    );
    assert_eq!(t.recovered, 1, "the refund in cents came next");
    assert_eq!(t.replayed, 1);
    assert!(t.p50_ms.is_some() && t.p95_ms >= t.p50_ms);
    let c = &report.confirmations;
    assert_eq!((c.required, c.approved, c.denied), (1, 1, 0));
    assert_eq!(
        (c.decisions, c.unanswered),
        (1, 0),
        "the approval answers the call, its arguments compared as canonical JSON"
    );
    assert_eq!(
        (report.step_limit_calls, report.step_limit_sessions),
        (1, 1)
    );
    assert_eq!(codes(&report), ["INVALID_ARGUMENTS"]);
}

#[test]
fn failures_of_the_tool_or_the_pipeline_are_neither_rejections_nor_recoveries() {
    let log = [
        line("a", "refund_order", "UPSTREAM_UNAVAILABLE", 1.0, json!({})),
        line("a", "refund_order", "TIMEOUT", 1.0, json!({})),
        line("a", "refund_order", "INTERNAL_ERROR", 1.0, json!({})),
        line("a", "refund_order", "INVALID_ARGUMENTS", 1.0, json!({})),
        // The next attempt after the rejection fails: no recovery either.
        line("a", "refund_order", "CALL_IN_PROGRESS", 1.0, json!({})),
        line("a", "refund_order", "OK", 1.0, json!({})),
    ];
    let report = report_of(&log);
    let t = &report.totals;
    assert_eq!(
        (t.calls, t.ok, t.rejected, t.failed, t.refused_by_host),
        (6, 1, 1, 4, 0)
    );
    assert_eq!(t.recovered, 0);
    assert_eq!(
        codes(&report),
        ["INVALID_ARGUMENTS"],
        "failures are not rejection codes"
    );
    assert!(
        report
            .to_string()
            .starts_with("6 call(s) in 1 session(s): 1 ok, 0 awaiting confirmation, 1 rejected, 0 refused by the host, 4 failed"),
        "{report}"
    );
    assert_eq!(report.to_json()["totals"]["failed"], 4);
}

/// A tool name or a code the model made up, with a newline and ANSI escapes
/// in it, cannot forge a row of the table nor recolour it: it is shown
/// escaped, and a huge one is cut.
#[test]
fn made_up_names_are_shown_escaped_and_bounded() {
    let forged = "fake\n(all)      99  99\u{1b}[32m";
    let report = report_of(&[
        line("s1", "get_order", "OK", 1.0, json!({})),
        line("s1", forged, "UNKNOWN_TOOL\u{1b}[0m", 1.0, json!({})),
        line("s1", &"x".repeat(100_000), "UNKNOWN_TOOL", 1.0, json!({})),
    ]);
    let text = report.to_string();
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(
        text.contains("fake\\n(all)      99  99\\u{1b}[32m"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("(all)")).count(),
        1,
        "one (all) row: {text}"
    );
    assert!(
        text.len() < 10_000,
        "the long name is cut: {} bytes",
        text.len()
    );
    assert!(text.contains("…[cut "), "{text}");
}

/// A call a rule of the operators' controls approved is the model's call,
/// counted apart: never a person's decision, nor a call sent confirmed
/// unasked.
#[test]
fn approvals_by_rule_are_counted_apart() {
    let ruled = json!({"approved_by": "rule:small-refunds", "confirmed": true});
    let log = [
        line("a", "refund_order", "OK", 1.0, ruled.clone()),
        line("a", "refund_order", "CONFIRMATION_REQUIRED", 1.0, json!({})),
        line(
            "a",
            "refund_order",
            "OK",
            1.0,
            json!({"approved_by": "ana", "confirmed": true}),
        ),
        line("b", "refund_order", "OK", 1.0, ruled),
    ];
    let report = report_of(&log);
    let c = &report.confirmations;
    assert_eq!(c.approved_by_rule, 2);
    assert_eq!((c.approved, c.decisions), (1, 1), "ana's decision alone");
    assert_eq!(c.confirmed_unasked, 0);
    assert_eq!(
        report.totals.calls, 3,
        "two calls by rule and the asked one"
    );
    assert_eq!(report.to_json()["confirmations"]["approved_by_rule"], 2);
    assert!(report.to_string().contains("2 approved by a rule"));
}
