//! What the inbox's statements read, planned as the store plans them
//! (generic plans, made without the values) over a long history.

use super::*;
use serde_json::Value;
use toolcall::store::PendingQuery;
use toolcall_sql::approval::page_statements;

/// A history of 20,000 decided questions (half used up, half not), older
/// than the 5 open ones, none expired, then the planner's statistics.
const HISTORY: &str = "
INSERT INTO toolcall_approvals
    (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms,
     decision, decided_ms, used_ms)
    SELECT 'h' || i, 's', 'c', 't', 'd', '{}', 1, i, 4000000000000, 'approved', i,
           CASE WHEN i % 2 = 0 THEN i END
    FROM generate_series(1, 20000) AS i;
INSERT INTO toolcall_approvals
    (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
    SELECT 'o' || i, 's', 'c', 't', 'd', '{}', 1, 100000 + i, 4000000000000
    FROM generate_series(1, 5) AS i;
ANALYZE;
";

/// The rows `plan` (an `EXPLAIN (ANALYZE, FORMAT JSON)` node) read and
/// threw away, and the tables it read whole.
fn thrown_away(plan: &serde_json::Value, removed: &mut u64, whole: &mut Vec<String>) {
    for field in ["Rows Removed by Filter", "Rows Removed by Index Recheck"] {
        *removed += plan[field].as_u64().unwrap_or(0);
    }
    if plan["Node Type"] == "Seq Scan" {
        whole.push(plan["Relation Name"].as_str().unwrap_or("?").to_owned());
    }
    for child in plan["Plans"].as_array().into_iter().flatten() {
        thrown_away(child, removed, whole);
    }
}

/// `sql` prepared with `types`, its generic plan run with `values`: the
/// rows it threw away and the tables it read whole.
async fn read_beyond(client: &Client, sql: &str, types: &str, values: &str) -> (u64, Vec<String>) {
    let messages = client
        .simple_query(&format!(
            "DEALLOCATE ALL;
             PREPARE statement ({types}) AS {sql};
             EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE statement({values});"
        ))
        .await
        .unwrap();
    let plan = messages
        .iter()
        .find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .expect("the plan");
    let plan: Value = serde_json::from_str(&plan).unwrap();
    let (mut removed, mut whole) = (0, Vec::new());
    thrown_away(&plan[0]["Plan"], &mut removed, &mut whole);
    (removed, whole)
}

/// The inbox's first page, oldest first, and its count read the open
/// questions, not the history before them: the page walked 20,000
/// decided questions to list 5, and the count read the 10,000 unused
/// ones, at every page of every inbox.
#[test]
fn an_inbox_page_reads_the_open_questions_not_the_history() {
    in_schema("inbox_plans", |url, schema| async move {
        let client = made(&url, &schema).await;
        client
            .batch_execute(&format!(
                "SET plan_cache_mode = force_generic_plan; {HISTORY}"
            ))
            .await
            .unwrap();
        let now = 3_000_000_000_000_u64;
        let statements = page_statements(&PendingQuery::new(now, 20), |n| format!("${n}"));
        let page = read_beyond(
            &client,
            &statements.page,
            "BIGINT, BIGINT",
            &format!("{now}, 21"),
        )
        .await;
        let count = read_beyond(&client, &statements.count, "BIGINT", &now.to_string()).await;
        assert_eq!(
            (page, count),
            ((0, vec![]), (0, vec![])),
            "rows a page and its count read and threw away, and tables read whole"
        );
    });
}
