//! The shop in a Postgres database, beside the pipeline's tables, on a
//! `toolcall_postgres::Pool` (the store's own, `PostgresStore::pool`, when
//! the store is in the same database; else one with the store's TLS and
//! pool settings; each statement prepared once per connection): every
//! process that connects shares its orders,
//! refunds and notes. A refund is one transaction that locks the order's
//! row (`SELECT ... FOR UPDATE`), reads what is left to refund, and inserts
//! the refund or refuses it.

use std::collections::BTreeMap;

use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use toolcall_postgres::SharedConnection;
use toolcall_postgres::deadpool_postgres::{GenericClient, Object};

use crate::catalog::{Catalog, before_any_change, currency, not_applied, now_ms, unavailable};
use crate::{
    Applied, AppliedRefund, BackendError, Message, NOTE_BEFORE_COMMIT, Order, REFUND_BEFORE_COMMIT,
    reference_messages, reference_orders,
};

/// The advisory lock that makes creating the tables one process at a time.
const SCHEMA_LOCK: i64 = 0x6f72_6465_7273; // "orders"

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS orders_orders (
    order_id    TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL,
    total_cents BIGINT NOT NULL CHECK (total_cents >= 0),
    currency    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders_refunds (
    id              BIGSERIAL PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    order_id        TEXT NOT NULL REFERENCES orders_orders (order_id),
    amount_cents    BIGINT NOT NULL CHECK (amount_cents > 0),
    remaining_cents BIGINT NOT NULL CHECK (remaining_cents >= 0),
    created_ms      BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_refunds_order ON orders_refunds (order_id);
CREATE TABLE IF NOT EXISTS orders_notes (
    id         BIGSERIAL PRIMARY KEY,
    order_id   TEXT NOT NULL REFERENCES orders_orders (order_id),
    text       TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders_messages (
    order_id TEXT NOT NULL REFERENCES orders_orders (order_id),
    position INTEGER NOT NULL,
    sender   TEXT NOT NULL,
    text     TEXT NOT NULL,
    PRIMARY KEY (order_id, position)
);
";

#[derive(Debug)]
pub(crate) struct PostgresShop {
    pool: toolcall_postgres::Pool,
    catalog: Catalog,
}

impl PostgresShop {
    /// Connects, and creates and seeds the tables that are missing under an
    /// advisory lock: processes connecting to a new database at once are safe.
    pub(crate) async fn connect(url: &str) -> Result<Self, BackendError> {
        let pool = toolcall_postgres::Pool::connect(url)
            .await
            .map_err(unavailable)?;
        PostgresShop::on(pool).await
    }

    /// [`connect`](Self::connect) on `pool`.
    pub(crate) async fn on(pool: toolcall_postgres::Pool) -> Result<Self, BackendError> {
        let mut client = pool.get().await.map_err(unavailable)?;
        let tx = client.transaction().await.map_err(unavailable)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .await
            .map_err(unavailable)?;
        tx.batch_execute(SCHEMA).await.map_err(unavailable)?;
        for order in reference_orders() {
            execute(
                &tx,
                "INSERT INTO orders_orders (order_id, customer_id, total_cents, currency)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (order_id) DO NOTHING",
                &[
                    &order.order_id,
                    &order.customer_id,
                    &order.total_cents,
                    &order.currency.to_string(),
                ],
            )
            .await
            .map_err(unavailable)?;
        }
        for (order_id, messages) in reference_messages() {
            for (position, message) in messages.iter().enumerate() {
                let position = i32::try_from(position).unwrap_or(i32::MAX);
                execute(
                    &tx,
                    "INSERT INTO orders_messages (order_id, position, sender, text)
                     VALUES ($1, $2, $3, $4) ON CONFLICT (order_id, position) DO NOTHING",
                    &[&order_id, &position, &message.from, &message.text],
                )
                .await
                .map_err(unavailable)?;
            }
        }
        tx.commit().await.map_err(unavailable)?;
        let catalog = read_catalog(&client).await?;
        drop(client);
        Ok(PostgresShop { pool, catalog })
    }

    /// The shop whose tables [`on`](Self::on) created, on `pool`, which
    /// creates and writes nothing: the read-only tools' view, on a pool of
    /// a role granted only `SELECT` on the shop's tables, so that a write
    /// is the database's error (`permission denied`).
    pub(crate) async fn reading(pool: toolcall_postgres::Pool) -> Result<Self, BackendError> {
        let client = pool.get().await.map_err(unavailable)?;
        let catalog = read_catalog(&client).await?;
        drop(client);
        Ok(PostgresShop { pool, catalog })
    }

    /// An `UPDATE` of an order, changing nothing, on this shop's pool:
    /// what a bug that writes would send. For the reader's tests.
    #[cfg(test)]
    pub(crate) async fn try_update(&self, order_id: &str) -> Result<u64, tokio_postgres::Error> {
        let client = self.own().await.expect("a connection");
        client
            .execute(
                "UPDATE orders_orders SET total_cents = total_cents WHERE order_id = $1",
                &[&order_id],
            )
            .await
    }

    pub(crate) fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// A connection for reads, shared with other tasks' statements (what
    /// they send at once goes out together), its statements prepared once.
    async fn client(&self) -> Result<SharedConnection, BackendError> {
        self.pool.shared().await.map_err(unavailable)
    }

    /// A connection of the pool for a transaction (one that dropped is not
    /// handed out again), its statements prepared once.
    async fn own(&self) -> Result<Object, BackendError> {
        self.pool.get().await.map_err(unavailable)
    }

    pub(crate) async fn order(&self, order_id: &str) -> Result<Option<Order>, BackendError> {
        let client = self.client().await?;
        let row = query_opt(
            &*client,
            "SELECT o.customer_id, o.total_cents, o.currency,
                    (SELECT COALESCE(SUM(r.amount_cents), 0)::BIGINT FROM orders_refunds r
                      WHERE r.order_id = o.order_id)
               FROM orders_orders o WHERE o.order_id = $1",
            &[&order_id],
        )
        .await
        .map_err(unavailable)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let refunded_cents: i64 = row.get(3);
        self.catalog.saw_refunded(order_id, refunded_cents);
        Ok(Some(Order {
            order_id: order_id.to_owned(),
            customer_id: row.get(0),
            total_cents: row.get(1),
            currency: currency(row.get(2))?,
            refunded_cents,
        }))
    }

    pub(crate) async fn messages(
        &self,
        order_id: &str,
    ) -> Result<Option<Vec<Message>>, BackendError> {
        let client = self.client().await?;
        if !order_exists(&*client, order_id)
            .await
            .map_err(unavailable)?
        {
            return Ok(None);
        }
        let rows = query(
            &*client,
            "SELECT sender, text FROM orders_messages WHERE order_id = $1 ORDER BY position",
            &[&order_id],
        )
        .await
        .map_err(unavailable)?;
        Ok(Some(
            rows.iter()
                .map(|row| Message {
                    from: row.get(0),
                    text: row.get(1),
                })
                .collect(),
        ))
    }

    pub(crate) async fn notes(&self) -> Result<Vec<(String, String)>, BackendError> {
        let client = self.client().await?;
        let rows = query(
            &*client,
            "SELECT order_id, text FROM orders_notes ORDER BY id",
            &[],
        )
        .await
        .map_err(unavailable)?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    pub(crate) async fn refunds(&self) -> Result<Vec<AppliedRefund>, BackendError> {
        let client = self.client().await?;
        let rows = query(
            &*client,
            "SELECT order_id, amount_cents, idempotency_key, remaining_cents
               FROM orders_refunds ORDER BY id",
            &[],
        )
        .await
        .map_err(unavailable)?;
        Ok(rows
            .iter()
            .map(|row| AppliedRefund {
                order_id: row.get(0),
                amount_cents: row.get(1),
                idempotency_key: row.get(2),
                remaining_cents: row.get(3),
            })
            .collect())
    }

    pub(crate) async fn refund_count(&self) -> Result<u64, BackendError> {
        let client = self.client().await?;
        let count: i64 = query_one(&*client, "SELECT COUNT(*) FROM orders_refunds", &[])
            .await
            .map_err(unavailable)?
            .get(0);
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// One transaction, the order's row locked: the key's first refund if
    /// it has one; otherwise what is left to refund, and the refund
    /// inserted or refused. The call's transaction when the store lends
    /// one on this shop's database (`transaction`): the refund then
    /// commits with the call's recorded result, or not at all.
    pub(crate) async fn refund(
        &self,
        order_id: &str,
        amount_cents: i64,
        idempotency_key: &str,
        transaction: Option<&toolcall_postgres::Transaction>,
    ) -> Result<Applied, BackendError> {
        let in_call = match transaction {
            Some(transaction) => transaction.on(&self.pool).await.map_err(unavailable)?,
            None => None,
        };
        if let Some(client) = in_call {
            let (applied, total_cents) = self
                .refund_on(&*client, order_id, amount_cents, idempotency_key)
                .await?;
            if let Applied::New(remaining_cents) = applied {
                toolcall_core::crash::point(REFUND_BEFORE_COMMIT);
                self.catalog
                    .applied(order_id, total_cents - remaining_cents);
            }
            return Ok(applied);
        }
        let mut client = self.own().await?;
        let tx = client.transaction().await.map_err(unavailable)?;
        let (applied, total_cents) = self
            .refund_on(&tx, order_id, amount_cents, idempotency_key)
            .await?;
        if let Applied::New(remaining_cents) = applied {
            toolcall_core::crash::point(REFUND_BEFORE_COMMIT);
            tx.commit().await.map_err(unavailable)?;
            self.catalog
                .applied(order_id, total_cents - remaining_cents);
        }
        Ok(applied)
    }

    /// The statements of [`refund`](Self::refund) on `tx`, in a transaction
    /// its caller commits: what was applied, and the order's total.
    async fn refund_on(
        &self,
        tx: &impl GenericClient,
        order_id: &str,
        amount_cents: i64,
        idempotency_key: &str,
    ) -> Result<(Applied, i64), BackendError> {
        let row = query_opt(
            tx,
            "SELECT total_cents FROM orders_orders WHERE order_id = $1 FOR UPDATE",
            &[&order_id],
        )
        .await
        .map_err(unavailable)?;
        let Some(row) = row else {
            return Err(BackendError::UnknownOrder);
        };
        let total_cents: i64 = row.get(0);
        let first = query_opt(
            tx,
            "SELECT order_id, amount_cents, remaining_cents FROM orders_refunds
              WHERE idempotency_key = $1",
            &[&idempotency_key],
        )
        .await
        .map_err(unavailable)?;
        if let Some(first) = first {
            let (first_order, first_amount): (String, i64) = (first.get(0), first.get(1));
            return if first_order == order_id && first_amount == amount_cents {
                Ok((Applied::Again(first.get(2)), total_cents))
            } else {
                Err(BackendError::KeyReused)
            };
        }
        let refunded_cents: i64 = query_one(
            tx,
            "SELECT COALESCE(SUM(amount_cents), 0)::BIGINT FROM orders_refunds
              WHERE order_id = $1",
            &[&order_id],
        )
        .await
        .map_err(unavailable)?
        .get(0);
        self.catalog.saw_refunded(order_id, refunded_cents);
        let refundable_cents = total_cents - refunded_cents;
        if amount_cents > refundable_cents {
            return Err(BackendError::ExceedsRefundable { refundable_cents });
        }
        let remaining_cents = refundable_cents - amount_cents;
        let inserted = execute(
            tx,
            "INSERT INTO orders_refunds
                 (idempotency_key, order_id, amount_cents, remaining_cents, created_ms)
             VALUES ($1, $2, $3, $4, $5)",
            &[
                &idempotency_key,
                &order_id,
                &amount_cents,
                &remaining_cents,
                &now_ms(),
            ],
        )
        .await;
        match inserted {
            // The key was taken meanwhile, for a refund of another order.
            Err(error) if error.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                return Err(BackendError::KeyReused);
            }
            Err(error) => return Err(unavailable(error)),
            Ok(_) => {}
        }
        Ok((Applied::New(remaining_cents), total_cents))
    }

    /// A plain insert: nothing makes a note happen once.
    pub(crate) async fn add_note(&self, order_id: &str, text: &str) -> Result<usize, BackendError> {
        let mut client = self.own().await.map_err(before_any_change)?;
        let tx = client.transaction().await.map_err(not_applied)?;
        if !order_exists(&tx, order_id).await.map_err(not_applied)? {
            return Err(BackendError::UnknownOrder);
        }
        execute(
            &tx,
            "INSERT INTO orders_notes (order_id, text, created_ms) VALUES ($1, $2, $3)",
            &[&order_id, &text, &now_ms()],
        )
        .await
        .map_err(not_applied)?;
        let notes: i64 = query_one(&tx, "SELECT COUNT(*) FROM orders_notes", &[])
            .await
            .map_err(not_applied)?
            .get(0);
        toolcall_core::crash::point(NOTE_BEFORE_COMMIT);
        tx.commit().await.map_err(unavailable)?;
        self.catalog.noted(order_id, text);
        Ok(usize::try_from(notes).unwrap_or(usize::MAX))
    }
}

/// The orders' fixed fields and the messages, as they are now.
async fn read_catalog(client: &Object) -> Result<Catalog, BackendError> {
    let orders = query(
        client,
        "SELECT order_id, customer_id, total_cents, currency FROM orders_orders
          ORDER BY order_id",
        &[],
    )
    .await
    .map_err(unavailable)?;
    // An order in a currency this build does not know is left out of the
    // catalog: the check finds no such order.
    let orders = orders.iter().filter_map(|row| {
        let currency = currency(row.get(3)).ok()?;
        Some(Order::new(row.get(0), row.get(1), row.get(2), currency))
    });
    let orders: Vec<Order> = orders.collect();
    let rows = query(
        client,
        "SELECT order_id, sender, text FROM orders_messages ORDER BY order_id, position",
        &[],
    )
    .await
    .map_err(unavailable)?;
    let mut messages: BTreeMap<String, Vec<Message>> = BTreeMap::new();
    for row in &rows {
        messages.entry(row.get(0)).or_default().push(Message {
            from: row.get(1),
            text: row.get(2),
        });
    }
    Ok(Catalog::new(orders, messages))
}

// Every statement goes through the connection's statement cache: prepared
// once per connection, then sent as the prepared statement it is.

async fn query(
    client: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    client
        .query(&client.prepare_cached(sql).await?, params)
        .await
}

async fn query_one(
    client: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Row, tokio_postgres::Error> {
    client
        .query_one(&client.prepare_cached(sql).await?, params)
        .await
}

async fn query_opt(
    client: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, tokio_postgres::Error> {
    client
        .query_opt(&client.prepare_cached(sql).await?, params)
        .await
}

async fn execute(
    client: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, tokio_postgres::Error> {
    client
        .execute(&client.prepare_cached(sql).await?, params)
        .await
}

async fn order_exists(
    client: &impl GenericClient,
    order_id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let row = query_one(
        client,
        "SELECT EXISTS (SELECT 1 FROM orders_orders WHERE order_id = $1)",
        &[&order_id],
    )
    .await?;
    Ok(row.get(0))
}
