//! A schema from the first release: upgraded once, however many replicas
//! connect at once, keeping its rows; one from a newer version is refused.

use super::*;

// ------------------------------------------ a schema from the first release

/// A schema as the first release left it: a session four steps in, a call
/// counted twice, a completed record, a claim held, an approval pending.
async fn old_schema(url: &str, schema: &str) {
    let client = raw(url, schema).await;
    let tables = toolcall_sql::schema::bigint(sql_stores::FIRST_RELEASE);
    client.batch_execute(&tables).await.unwrap();
    let now = i64::try_from(now_ms()).unwrap();
    let done = serde_json::to_string(&result(7)).unwrap();
    client
        .execute(
            "INSERT INTO toolcall_steps VALUES ('old-session', 4, $1)",
            &[&now],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO toolcall_calls VALUES ($2, 2, $1)",
            &[&now, &key("k-done").as_str()],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO toolcall_records VALUES ($3, 'completed', 0, $1, $2)",
            &[&done, &now, &key("k-done").as_str()],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO toolcall_records VALUES ($3, 'in_flight', $1, NULL, $2)",
            &[&(now + 600_000), &now, &key("k-held").as_str()],
        )
        .await
        .unwrap();
    first_asked(&client, now).await;
}

#[test]
fn a_schema_from_the_first_release_is_upgraded_and_keeps_its_rows() {
    in_schema("upgrade", |url, schema| async move {
        old_schema(&url, &schema).await;

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        sql_stores::first_release_rows_are_kept(&store).await;

        let client = raw(&url, &schema).await;
        client
            .execute(
                "INSERT INTO toolcall_records VALUES ('raw', 'in_doubt', 0, NULL, 0)",
                &[],
            )
            .await
            .unwrap();
        assert!(
            client
                .execute(
                    "INSERT INTO toolcall_records VALUES ('bad', 'lost', 0, NULL, 0)",
                    &[]
                )
                .await
                .is_err(),
            "the new check still refuses nonsense"
        );
        assert_current(&client).await;
        let indexes: Vec<String> = client
            .query(
                "SELECT indexname::TEXT FROM pg_indexes
                 WHERE schemaname = $1 AND indexname NOT LIKE '%pkey' ORDER BY 1",
                &[&schema],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert_eq!(indexes, sql_stores::indexes(&["toolcall_approvals_ask"]));

        // Connected again: already current, nothing changes.
        let again = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_eq!(again.next_step("old-session", now_ms()).await.unwrap(), 6);
    });
}

#[test]
fn replicas_connecting_at_once_upgrade_an_old_schema_once() {
    in_schema("upgrade_race", |url, schema| async move {
        old_schema(&url, &schema).await;
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let (url, schema) = (url.clone(), schema.clone());
                tokio::spawn(async move { PostgresStore::connect_in_schema(&url, &schema).await })
            })
            .collect();
        let mut stores = Vec::new();
        for task in tasks {
            stores.push(task.await.unwrap().unwrap());
        }
        assert_eq!(
            stores[3].next_step("old-session", now_ms()).await.unwrap(),
            5,
            "rekeyed once, not twice"
        );
    });
}

#[test]
fn a_schema_from_a_newer_version_is_refused() {
    in_schema("newer", |url, schema| async move {
        made(&url, &schema)
            .await
            .batch_execute(&format!(
                "UPDATE toolcall_schema_version SET version = {}",
                toolcall_sql::schema::VERSION + 1
            ))
            .await
            .unwrap();
        let error = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap_err()
            .to_string();
        let newer = format!("version {}, newer", toolcall_sql::schema::VERSION + 1);
        assert!(error.contains(&newer), "{error}");
    });
}
