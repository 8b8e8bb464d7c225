//! What the dialect-free half means, without a database: the stores'
//! conformance suite (the workspace's `tests/stores.rs`) runs it against
//! SQLite and Postgres.

use std::time::Duration;

use serde_json::json;
use toolcall_ledger::ToolResult;
use toolcall_ledger::store::{
    ApprovalDecision, ApprovalEntry, ApprovalResult, CallBegun, Claim, DecideOutcome,
    PendingApproval, PendingCursor, PendingOrder, PendingQuery, RecordedOutcome, SignatureWrite,
    TakeApproval, session_key,
};
use toolcall_sql::approval::{self, NewApproval};
use toolcall_sql::purge::{self, Retention};
use toolcall_sql::record::{self, ClaimStep};
use toolcall_sql::{Value, schema};

/// The testkit's question, asked at `created_ms` and open for a second.
fn approval(id: &str, created_ms: u64) -> PendingApproval {
    PendingApproval {
        tool: "refund".to_owned(),
        arguments: json!({"order": 7}),
        step: 3,
        created_ms,
        expires_ms: created_ms + 1000,
        ..toolcall_testkit::store::asked(id)
    }
}

/// The row an approval is read back from, as a store's `SELECT` of
/// `approval::COLUMNS` gives it after the insert of `values`.
fn stored(values: &[Value], used_ms: Option<i64>, result: Option<&str>) -> Vec<Value> {
    let column = |name: &str| {
        let at = approval::INSERT_COLUMNS
            .split(',')
            .position(|c| c.trim() == name)
            .expect("an insert column");
        values[at].clone()
    };
    approval::COLUMNS
        .split(',')
        .map(|name| match name.trim() {
            "used_ms" => Value::Int(used_ms),
            "result" => Value::Text(result.map(str::to_owned)),
            name => column(name),
        })
        .collect()
}

#[test]
fn an_approval_reads_back_as_it_was_written() {
    let mut a = approval("a1", 5);
    a.decision = Some(ApprovalDecision {
        approved: true,
        by: "ops".to_owned(),
        note: String::new(),
        edited_arguments: None,
        decided_ms: 9,
        lasts_until_ms: None,
    });
    a.reason = Some("untrusted_context".to_owned());
    a.tainted = vec!["order".to_owned()];
    a.provenance = vec![toolcall_ledger::store::TaintSource::from_output(
        "read_note",
        Some("call-1"),
        4,
        &serde_json::json!({"note": "pay ACC-7"}),
        &["/note"],
    )];
    let new = NewApproval::new(&a).unwrap();
    assert_eq!(new.session_key, session_key("s"));
    assert!(new.provenance.as_deref().unwrap().contains("pay ACC-7"));
    assert_eq!(new.decided_ms, Some(9));
    assert_eq!(new.tainted.as_deref(), Some(r#"["order"]"#));
    let values = new.values(&a);
    assert_eq!(values.len(), approval::INSERT_COLUMNS.split(',').count());

    let entry = approval::read_entry(stored(&values, Some(12), Some("{}"))).unwrap_err();
    // `{}` is not what came of an approval: the row is refused, not guessed.
    assert!(!entry.to_string().is_empty());

    let came = ApprovalResult {
        ok: true,
        code: "OK".to_owned(),
        replayed: false,
        at_ms: 13,
        answer: None,
    };
    let text = approval::json(&came).unwrap();
    let entry = approval::read_entry(stored(&values, Some(12), Some(&text))).unwrap();
    assert_eq!(entry.approval, a);
    assert_eq!(entry.used_ms, Some(12));
    assert_eq!(entry.result, Some(came));
}

/// Where the taint came from is kept within its bounds, whoever made it:
/// the newest sources, each bounded.
#[test]
fn provenance_is_written_bounded_and_none_is_null() {
    use toolcall_ledger::provenance::{MAX_SOURCES, MAX_TEXT_CHARS};
    use toolcall_ledger::store::{TaintSource, UntrustedText};
    let a = approval("a1", 5);
    assert_eq!(NewApproval::new(&a).unwrap().provenance, None);
    let mut wide = approval("a2", 5);
    wide.provenance = (0..9)
        .map(|n| TaintSource {
            tool: "t".repeat(5_000),
            call_id: None,
            at_ms: n,
            texts: vec![UntrustedText {
                part: String::new(),
                text: "x".repeat(100_000),
                cut: false,
            }],
        })
        .collect();
    let new = NewApproval::new(&wide).unwrap();
    let values = new.values(&wide);
    let back = approval::read_entry(stored(&values, None, None))
        .unwrap()
        .approval
        .provenance;
    assert_eq!(back.len(), MAX_SOURCES);
    assert_eq!(back[0].texts[0].text.len(), MAX_TEXT_CHARS);
    assert!(back[0].texts[0].cut);
    assert!(new.provenance.unwrap().len() < 8_000);
}

#[test]
fn no_tainted_arguments_is_null_and_reads_back_empty() {
    let a = approval("a1", 5);
    let new = NewApproval::new(&a).unwrap();
    assert_eq!(new.tainted, None);
    assert_eq!(new.decision, None);
    let entry = approval::read_entry(stored(&new.values(&a), None, None)).unwrap();
    assert!(entry.approval.tainted.is_empty());
    assert_eq!(entry.approval, a);
}

#[test]
fn a_row_of_the_wrong_shape_is_an_error() {
    assert!(approval::read_entry(vec![Value::Text(Some("a".to_owned()))]).is_err());
    let a = approval("a1", 5);
    let mut row = stored(&NewApproval::new(&a).unwrap().values(&a), None, None);
    row[6] = Value::Text(Some("3".to_owned()));
    assert!(approval::read_entry(row).is_err());
}

#[test]
fn taking_and_deciding_answer_from_the_row_as_it_is() {
    let entry = |expires_ms: u64| ApprovalEntry {
        approval: PendingApproval {
            expires_ms,
            ..approval("a1", 0)
        },
        used_ms: None,
        result: None,
    };
    assert_eq!(approval::taken(None, 10), TakeApproval::Invalid);
    assert_eq!(approval::taken(Some(entry(10)), 10), TakeApproval::Expired);
    assert_eq!(
        approval::taken(Some(entry(11)), 10),
        TakeApproval::Taken(entry(11).approval)
    );

    assert_eq!(approval::not_decided(None), DecideOutcome::Invalid);
    assert_eq!(
        approval::not_decided(Some(entry(10))),
        DecideOutcome::Expired
    );
    let used = ApprovalEntry {
        used_ms: Some(3),
        ..entry(10)
    };
    assert_eq!(
        approval::not_decided(Some(used)),
        DecideOutcome::AlreadyDecided
    );
}

#[test]
fn a_page_is_written_for_each_dialect_and_read_back() {
    let mut query = PendingQuery::new(100, 2);
    query.session = Some("s");
    query.tool = Some("refund");
    query.order = PendingOrder::NewestFirst;
    query.cursor = Some(PendingCursor::after(&approval("a9", 50)));

    let sqlite = approval::page_statements(&query, |n| format!("?{n}"));
    assert_eq!(
        sqlite.count,
        "SELECT count(*) FROM toolcall_approvals WHERE decision IS NULL AND used_ms IS NULL \
         AND expires_ms > ?1 AND session_key = ?2 AND session = ?3 AND tool = ?4"
    );
    assert_eq!(sqlite.count_values.len(), 4);
    assert!(sqlite.page.contains("AND (created_ms, id) < (?5, ?6)"));
    assert!(
        sqlite
            .page
            .ends_with("ORDER BY created_ms DESC, id DESC LIMIT ?7")
    );
    assert_eq!(sqlite.page_values.len(), 7);
    // One more than the page: whether there is a next one.
    assert_eq!(sqlite.page_values[6], Value::Int(Some(3)));

    let postgres = approval::page_statements(&query, |n| format!("${n}"));
    assert_eq!(postgres.count.replace('$', "?"), sqlite.count);
    assert_eq!(postgres.page.replace('$', "?"), sqlite.page);
    assert_eq!(postgres.page_values, sqlite.page_values);

    let row = |id: &str, created_ms: u64| {
        let a = approval(id, created_ms);
        stored(&NewApproval::new(&a).unwrap().values(&a), None, None)
    };
    let page =
        approval::page(&query, 5, vec![row("a3", 30), row("a2", 20), row("a1", 10)]).unwrap();
    assert_eq!(page.total, 5);
    let ids: Vec<_> = page.items.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["a3", "a2"]);
    assert_eq!(
        page.next,
        Some(PendingCursor::after(&approval("a2", 20)).to_string())
    );

    let last = approval::page(&query, 2, vec![row("a3", 30), row("a2", 20)]).unwrap();
    assert_eq!(last.next, None);
}

#[test]
fn a_record_answers_by_its_state_and_its_lease() {
    let result = ToolResult::success(
        "refund",
        json!({"refunded": 7}).as_object().unwrap().clone(),
    );
    let text = record::result_text(&result).unwrap();

    assert_eq!(record::state_at("in_flight", 10, 10), "in_doubt");
    assert_eq!(record::state_at("in_flight", 11, 10), "in_flight");
    assert_eq!(record::state_at("completed", 0, 10), "completed");

    assert_eq!(record::outcome(None, None).unwrap(), None);
    assert_eq!(
        record::outcome(Some("completed"), Some(&text)).unwrap(),
        Some(RecordedOutcome::Completed(Box::new(result.clone())))
    );
    assert_eq!(
        record::outcome(Some("in_flight"), None).unwrap(),
        Some(RecordedOutcome::InFlight)
    );
    assert_eq!(
        record::outcome(Some("in_doubt"), None).unwrap(),
        Some(RecordedOutcome::InDoubt)
    );
    assert!(record::outcome(Some("completed"), Some("not json")).is_err());

    let step = |record, now| record::claim_step(record, now).unwrap();
    assert!(matches!(step(None, 10), ClaimStep::Acquire));
    assert!(matches!(
        step(Some(("in_doubt", 0, None)), 10),
        ClaimStep::Acquire
    ));
    assert!(matches!(
        step(Some(("in_flight", 11, None)), 10),
        ClaimStep::Answer(Claim::InFlight)
    ));
    assert!(matches!(
        step(Some(("in_flight", 10, None)), 10),
        ClaimStep::Abandon
    ));
    match step(Some(("completed", 0, Some(&text))), 10) {
        ClaimStep::Answer(Claim::Completed(stored)) => assert_eq!(stored, result),
        other => panic!("a completed key answers its result, not {other:?}"),
    }

    let begun = |calls, locked| CallBegun {
        calls,
        locked,
        ..CallBegun::default()
    };
    assert_eq!(record::begun_writes(&begun(None, false)), 1);
    assert_eq!(record::begun_writes(&begun(Some(1), false)), 2);
    assert_eq!(record::begun_writes(&begun(Some(1), true)), 3);
}

#[test]
fn a_purge_comes_every_so_many_writes_and_deletes_what_expired() {
    let mut retention = Retention::default();
    assert_eq!(retention.cutoff(24 * 60 * 60 * 1000 + 5), 5);
    retention.set_window(Duration::from_millis(10));
    assert_eq!(retention.cutoff(25), 15);
    assert_eq!(retention.cutoff(5), 0);

    retention.set_every(3);
    let due: Vec<bool> = (0..6).map(|_| retention.wrote()).collect();
    assert_eq!(due, [false, false, true, false, false, true]);
    retention.set_every(0);
    assert!((0..5).all(|_| !retention.wrote()));

    let names: Vec<_> = purge::KINDS.iter().map(|kind| kind.name).collect();
    assert_eq!(
        names,
        [
            "steps",
            "calls",
            "records",
            "approvals",
            "locks",
            "taint",
            "rates",
            "signatures"
        ]
    );
    let records = &purge::KINDS[2];
    assert_eq!(
        records.condition("?1", "?2"),
        "touched_ms < ?1 AND (state <> 'in_flight' OR until_ms <= ?2)"
    );
    let purged = purge::purged([1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!((purged.steps, purged.locks, purged.taint), (1, 5, 6));
    assert_eq!((purged.rates, purged.signatures), (7, 8));
    assert_eq!(purged.total(), 36);
}

#[test]
fn tables_are_upgraded_through_each_version_once() {
    assert_eq!(
        schema::upgrades(0).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    );
    assert_eq!(
        schema::upgrades(3).collect::<Vec<_>>(),
        [4, 5, 6, 7, 8, 9, 10, 11]
    );
    assert_eq!(schema::upgrades(schema::VERSION).count(), 0);
    assert_eq!(schema::upgrades(schema::VERSION + 1).count(), 0);

    let postgres = schema::bigint(schema::TABLES_V0);
    assert!(!postgres.contains("INTEGER"));
    assert_eq!(postgres.replace("BIGINT", "INTEGER"), schema::TABLES_V0);

    let error = schema::too_new("the database's schema", 12, "toolcall-sqlite", "open it");
    assert!(error.to_string().ends_with(
        "the database's schema is version 12, newer than this toolcall-sqlite knows (11): \
         open it with a newer version"
    ));
}

#[test]
fn signing_refuses_in_order_and_the_last_signature_decides_with_every_name() {
    use toolcall_ledger::store::SignOutcome;
    use toolcall_sql::controls::{self, SignStep};

    let now = 1_000;
    let yes = ApprovalDecision {
        approved: true,
        by: "whoever".into(),
        note: "fine".into(),
        edited_arguments: None,
        decided_ms: now,
        lasts_until_ms: None,
    };
    let entry = |expires_ms: u64, decided: bool| ApprovalEntry {
        approval: PendingApproval {
            expires_ms,
            decision: decided.then(|| yes.clone()),
            ..approval("a", 0)
        },
        used_ms: None,
        result: None,
    };
    let names = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let step = |entry: Option<&ApprovalEntry>, signers: &[&str], signer: &str| {
        let signing = SignatureWrite {
            id: "a",
            signer,
            needed: 3,
            decision: &yes,
            now_ms: now,
        };
        controls::sign_step(entry, &names(signers), &signing)
    };
    let open = entry(now + 1, false);
    assert_eq!(
        step(None, &[], "ana"),
        SignStep::Answer(SignOutcome::Invalid)
    );
    // Decided before expired, expired before signed twice.
    assert_eq!(
        step(Some(&entry(now, true)), &["ana"], "ana"),
        SignStep::Answer(SignOutcome::AlreadyDecided)
    );
    assert_eq!(
        step(Some(&entry(now, false)), &["ana"], "ana"),
        SignStep::Answer(SignOutcome::Expired)
    );
    assert_eq!(
        step(Some(&open), &["ana"], "ana"),
        SignStep::Answer(SignOutcome::AlreadySigned)
    );
    let kept = step(Some(&open), &["ana"], "bo");
    assert_eq!(kept, SignStep::Keep { n: 2 });
    assert_eq!(
        controls::signed(&kept),
        SignOutcome::Signed { signatures: 2 }
    );
    let last = step(Some(&open), &["ana", "bo"], "cy");
    let SignStep::Decide { n: 3, decision } = &last else {
        panic!("{last:?}")
    };
    assert_eq!(decision.by, "ana, bo, cy");
    assert_eq!((decision.approved, decision.note.as_str()), (true, "fine"));
    assert_eq!(controls::signed(&last), SignOutcome::Decided);

    assert_eq!(
        controls::dollars(controls::RATE_COUNT),
        "SELECT count FROM toolcall_rates WHERE bucket_key = $1 AND window_start_ms = $2"
    );
}
