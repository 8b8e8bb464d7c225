//! What the shop's refunds table holds for ORD-1001, read beside the
//! `orders` processes that wrote it, on SQLite and on Postgres.

use std::path::Path;

/// `(rows, refunded cents)` of ORD-1001 in a SQLite file's refunds table.
pub fn sqlite_refunds(path: &Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM orders_refunds
          WHERE order_id = 'ORD-1001'",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .unwrap()
}

/// `(rows, refunded cents)` of ORD-1001 in a database's refunds table.
pub async fn postgres_refunds(url: &str) -> (i64, i64) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connected = tokio::spawn(async move {
        let _ = connection.await;
    });
    let row = client
        .query_one(
            "SELECT COUNT(*), COALESCE(SUM(amount_cents), 0)::BIGINT FROM orders_refunds
              WHERE order_id = 'ORD-1001'",
            &[],
        )
        .await
        .unwrap();
    drop(client);
    let _ = connected.await;
    (row.get(0), row.get(1))
}
