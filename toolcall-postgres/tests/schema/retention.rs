//! What the store deletes by itself and when, what a decided approval
//! keeps, and the pool the store lends with its schema.

use super::*;
use toolcall::store::Lease;

/// A store in `schema` that keeps what ended for `retention_ms` and purges
/// once every `every` writes (0: only by hand).
async fn purging(url: &str, schema: &str, retention_ms: u64, every: u64) -> PostgresStore {
    PostgresStore::connect_in_schema(url, schema)
        .await
        .unwrap()
        .retention(Duration::from_millis(retention_ms))
        .purge_every(every)
}

#[test]
fn the_store_purges_what_expired_by_itself() {
    in_schema("purge", |url, schema| async move {
        let store = purging(&url, &schema, 300, 5).await;
        sql_stores::eleven_writes_soon_old(&store).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        // Four more: the fifteenth write purges.
        sql_stores::four_new_writes(&store).await;

        // Seen from another connection, without a purge by hand.
        let client = raw(&url, &schema).await;
        assert_eq!(
            rows(&client, "toolcall_steps").await,
            [session_key("s-new")]
        );
        assert_eq!(
            rows(&client, "toolcall_calls").await,
            [key("c-new").to_string()]
        );
        assert_eq!(
            rows(&client, "toolcall_records").await,
            sorted([key("r-held").to_string(), key("r-new").to_string()]),
            "a claim whose lease runs is kept, however old"
        );
        assert_eq!(rows(&client, "toolcall_approvals").await, ["p-valid"]);
        assert_eq!(
            rows(&client, "toolcall_locks").await,
            [key("lock-held").to_string()]
        );
        assert_eq!(
            store
                .claim(
                    &key("r-held"),
                    Lease {
                        now_ms: now_ms(),
                        lease_ms: 1_000
                    }
                )
                .await
                .unwrap(),
            Claim::InFlight
        );

        // By hand: everything at once, counted.
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(
            store.purge().await.unwrap(),
            Purged {
                steps: 1,
                calls: 1,
                records: 1,
                approvals: 0,
                locks: 0,
                taint: 0,
                rates: 0,
                signatures: 0,
            }
        );
        assert_eq!(
            rows(&client, "toolcall_records").await,
            [key("r-held").to_string()]
        );
        assert_eq!(store.purge().await.unwrap().total(), 0);
    });
}

#[test]
fn a_decided_approval_stays_in_the_history_for_the_retention_window() {
    in_schema("history", |url, schema| async move {
        let store = purging(&url, &schema, 1_500, 0).await;
        let expires = now_ms() + 100;
        sql_stores::one_of_two_approvals_decided(&store, expires).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            store.purge().await.unwrap().approvals,
            1,
            "the undecided one, expired"
        );
        let client = raw(&url, &schema).await;
        assert_eq!(rows(&client, "toolcall_approvals").await, ["p-decided"]);
        assert_eq!(store.decided_approvals(10).await.unwrap().len(), 1);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(
            store.purge().await.unwrap().approvals,
            1,
            "past the retention window"
        );
        assert!(rows(&client, "toolcall_approvals").await.is_empty());
    });
}

/// A signature goes with its approval: the purge that takes an expired
/// approval leaves its signature to the next one (a statement's parts see
/// the rows as they were when it began), which takes it; the signature of
/// an approval kept stays.
#[test]
fn a_signature_is_purged_after_its_approval() {
    in_schema("signatures", |url, schema| async move {
        let store = purging(&url, &schema, 60_000, 0).await;
        sql_stores::two_approvals_signed_once(&store, now_ms() + 100).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let first = store.purge().await.unwrap();
        assert_eq!((first.approvals, first.signatures), (1, 0));
        let second = store.purge().await.unwrap();
        assert_eq!((second.approvals, second.signatures), (0, 1));
        let client = raw(&url, &schema).await;
        assert_eq!(rows(&client, "toolcall_signatures").await, ["p-kept"]);
        assert_eq!(rows(&client, "toolcall_approvals").await, ["p-kept"]);
    });
}

/// [`PostgresStore::pool`] lends the store's own connections: with a pool
/// of one held by the application, the store waits for it (and says why
/// when `pool_timeout` passes); given back, the store has it again. Its
/// connections are set up as the store's: the store's schema is their
/// `search_path`.
#[test]
fn the_store_lends_its_own_pool_with_its_schema() {
    in_schema("pool", |url, schema| async move {
        let separator = if url.contains('?') { '&' } else { '?' };
        let one = format!("{url}{separator}pool_max_size=1&pool_timeout=1");
        let store = PostgresStore::connect_in_schema(&one, &schema)
            .await
            .unwrap();
        let pool = store.pool();
        let held = pool.get().await.unwrap();
        let search_path: String = held
            .query_one("SHOW search_path", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(search_path.trim_matches('"'), schema);
        let error = store.release(&key("lent")).await.unwrap_err();
        assert!(
            error.to_string().contains("pool_max_size=1"),
            "the store waited for its one connection: {error}"
        );
        drop(held);
        store.release(&key("lent")).await.unwrap();
    });
}
