//! What the read-only tools hold: the shop's orders and messages through a
//! connection the database itself keeps from writing.

use std::sync::Arc;

use crate::memory::Memory;
use crate::postgres::PostgresShop;
use crate::shop::Backend;
use crate::sqlite::SqliteShop;
use crate::{BackendError, Message, Order};

/// The shop, for reading only: the part of [`Shop`](crate::Shop) that
/// `get_order` and `read_messages` take (`&Ctx<ShopReader>`), registered
/// with `DispatcherBuilder::part(Shop::reader)`. Its connection cannot
/// write whatever code runs on it: a bug in a read-only tool (or in the
/// dispatcher) that tried is refused by the database.
///
/// * SQLite: connections opened read-only (`SQLITE_OPEN_READ_ONLY`).
/// * Postgres: a pool of the role [`Shop::with_postgres_reader`](crate::Shop::with_postgres_reader)
///   connects as, granted only `SELECT` on the shop's tables (`orders`
///   reads its URL from `TOOLCALL_ORDERS_READER_URL`). Without one, the
///   reader shares the shop's pool, and nothing but the code keeps it
///   from writing.
/// * Memory: a view of the same orders that has no method that writes.
#[derive(Clone, Debug)]
pub struct ShopReader {
    backend: Backend,
}

impl ShopReader {
    pub(crate) fn memory(memory: Arc<Memory>) -> Self {
        ShopReader {
            backend: Backend::Memory(memory),
        }
    }

    pub(crate) fn sqlite(shop: SqliteShop) -> Self {
        ShopReader {
            backend: Backend::Sqlite(Arc::new(shop)),
        }
    }

    pub(crate) fn postgres(shop: Arc<PostgresShop>) -> Self {
        ShopReader {
            backend: Backend::Postgres(shop),
        }
    }

    /// The order as the backend holds it now; `None` if there is no such
    /// order.
    pub async fn load_order(&self, order_id: &str) -> Result<Option<Order>, BackendError> {
        self.backend.load_order(order_id).await
    }

    /// The messages customers wrote about the order, as the backend holds
    /// them now; `None` if there is no such order.
    pub async fn load_messages(
        &self,
        order_id: &str,
    ) -> Result<Option<Vec<Message>>, BackendError> {
        self.backend.load_messages(order_id).await
    }

    /// What a bug that writes through the reader would do: the shop's own
    /// write path (`add_note`), run on the reader's connection. For the
    /// tests that show the database refuses it.
    #[cfg(test)]
    async fn write_note(&self, order_id: &str, text: &str) -> Result<usize, BackendError> {
        match &self.backend {
            Backend::Memory(_) => unreachable!("the memory reader has no write path"),
            Backend::Sqlite(shop) => shop.add_note(order_id, text),
            Backend::Postgres(shop) => shop.add_note(order_id, text).await,
        }
    }

    /// An `UPDATE` a bug would send on the Postgres reader's connection.
    #[cfg(test)]
    async fn try_update(&self, order_id: &str) -> Result<u64, tokio_postgres::Error> {
        match &self.backend {
            Backend::Postgres(shop) => shop.try_update(order_id).await,
            _ => unreachable!("the Postgres reader's test only"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{BackendError, Shop};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn the_sqlite_reader_reads_and_the_database_refuses_its_writes() {
        let dir = std::env::temp_dir().join(format!("orders-reader-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let shop = Shop::open_sqlite(dir.join("shop.db")).unwrap();
        let reader = shop.reader();
        let runtime = runtime();
        let order = runtime.block_on(reader.load_order("ORD-1001")).unwrap();
        assert_eq!(order.map(|o| o.total_cents), Some(12_000));
        let refused = runtime
            .block_on(reader.write_note("ORD-1001", "written by a bug"))
            .expect_err("a read-only connection cannot write");
        // SQLite's own refusal, not toolcall's or the shop's.
        assert!(
            matches!(&refused, BackendError::NotApplied(why) | BackendError::Unavailable(why)
                if why.contains("readonly")),
            "{refused:?}"
        );
        assert!(runtime.block_on(shop.load_notes()).unwrap().is_empty());
        // The shop's own connection still writes.
        runtime
            .block_on(shop.insert_note("ORD-1001", "written by add_note"))
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The texts of every note in the Postgres shop at `url`.
    async fn shop_notes(url: &str) -> Vec<String> {
        let shop = Shop::connect_postgres(url).await.unwrap();
        let notes = shop.load_notes().await.unwrap();
        notes.into_iter().map(|(_, text)| text).collect()
    }

    /// The URL of `role` on the database at `url`: the same host and
    /// database, another user (the test database trusts local users).
    fn as_role(url: &str, role: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let rest = rest.split_once('@').map_or(rest, |(_, host)| host);
        format!("{scheme}://{role}@{rest}")
    }

    #[test]
    fn the_postgres_reader_reads_and_the_database_refuses_its_writes() {
        let Ok(url) = std::env::var("TOOLCALL_POSTGRES_URL") else {
            eprintln!(
                "SKIPPED: TOOLCALL_POSTGRES_URL is not set; the Postgres reader was NOT tested"
            );
            return;
        };
        let runtime = runtime();
        runtime.block_on(async {
            let shop = Shop::connect_postgres(&url).await.unwrap();
            // The role an operator would create, as the example's docs say.
            let role = format!("orders_reader_test_{}", std::process::id());
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            client
                .batch_execute(&format!(
                    "DROP ROLE IF EXISTS {role};
                     CREATE ROLE {role} LOGIN;
                     GRANT USAGE ON SCHEMA public TO {role};
                     GRANT SELECT ON orders_orders, orders_refunds, orders_notes, orders_messages
                        TO {role};"
                ))
                .await
                .unwrap();
            let outcome = async {
                let shop = shop.with_postgres_reader(&as_role(&url, &role)).await?;
                let reader = shop.reader();
                let order = reader.load_order("ORD-1002").await?;
                assert_eq!(order.map(|o| o.total_cents), Some(4_500));
                let messages = reader.load_messages("ORD-1002").await?;
                assert_eq!(messages.map(|m| m.len()), Some(2));
                let refused = reader
                    .write_note("ORD-1002", "written by a bug")
                    .await
                    .expect_err("a role granted only SELECT cannot write");
                assert!(
                    matches!(refused, BackendError::NotApplied(_)),
                    "{refused:?}"
                );
                let update = reader
                    .try_update("ORD-1002")
                    .await
                    .expect_err("a role granted only SELECT cannot update");
                Ok::<_, BackendError>(update)
            }
            .await;
            let _ = client
                .batch_execute(&format!(
                    "DROP OWNED BY {role}; DROP ROLE IF EXISTS {role};"
                ))
                .await;
            let refused = outcome.unwrap();
            // Postgres's own refusal, not toolcall's or the shop's.
            assert_eq!(
                refused.code(),
                Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
                "{refused:?}"
            );
            let notes = shop_notes(&url).await;
            assert!(
                !notes.iter().any(|note| note == "written by a bug"),
                "{notes:?}"
            );
        });
    }
}
