//! The store's transaction lent to a side effect's handler: the handler's
//! writes to the application's tables and the call's recorded result commit
//! together ([`CallStore::complete_in`](toolcall_ledger::store::CallStore::complete_in)).

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio_postgres::types::ToSql;
use toolcall_ledger::store::StoreError;

use crate::shared::{Pool, Shared};
use crate::tls::ConnectionString;

/// One side effect's transaction on the store's database
/// (`Ctx::transaction::<toolcall_postgres::Transaction>()` in a handler).
///
/// Nothing is sent until the handler asks for its connection
/// ([`on`](Transaction::on)): `BEGIN` then, on a connection of the store's
/// pool held for the call. The handler writes on it and does not commit:
/// the pipeline records the call's result on the same connection and
/// commits once, the resource lock freed in the same commit. So the writes
/// and the record that the call ran are durable together or not at all: a
/// crash of the process or a lost connection before that commit takes both
/// back (the call is then in doubt, and `reconcile` finds nothing done).
/// A failed attempt's writes are rolled back before a retry or before the
/// backend is asked about it.
///
/// ```no_run
/// # use toolcall_postgres::{Pool, Transaction};
/// # async fn refund(transaction: Option<&Transaction>, pool: &Pool) -> Result<(), Box<dyn std::error::Error>> {
/// let in_call = match transaction {
///     Some(transaction) => transaction.on(pool).await?,
///     None => None,
/// };
/// if let Some(client) = in_call {
///     // Committed with the call's result.
///     client.execute("UPDATE accounts SET balance = balance - 1 WHERE id = 7", &[]).await?;
/// } else {
///     // A store that lends no transaction, or another database: a transaction of one's own.
///     let mut client = pool.get().await?;
///     let own = client.transaction().await?;
///     own.execute("UPDATE accounts SET balance = balance - 1 WHERE id = 7", &[]).await?;
///     own.commit().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Transaction {
    url: ConnectionString,
    pool: deadpool_postgres::Pool,
    /// What tells the store's pool from another ([`on`](Transaction::on)).
    shared: Arc<Shared>,
    sent: Arc<AtomicU64>,
    open: tokio::sync::Mutex<Option<Arc<Open>>>,
    begun: AtomicBool,
}

/// A connection inside a transaction. Unless its transaction committed, it
/// never goes back to the pool: dropped, it is closed, and the server rolls
/// its transaction back.
#[derive(Debug)]
struct Open {
    object: Option<deadpool_postgres::Object>,
    committed: AtomicBool,
}

impl Deref for Open {
    type Target = deadpool_postgres::Object;

    fn deref(&self) -> &Self::Target {
        self.object
            .as_ref()
            .expect("an open transaction holds its connection until it drops")
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if !self.committed.load(Ordering::Acquire)
            && let Some(object) = self.object.take()
        {
            drop(deadpool_postgres::Object::take(object));
        }
    }
}

/// The transaction's connection, as a handler writes on it: a
/// `deadpool_postgres::Object` (a `tokio_postgres::Client` with a statement
/// cache, and a `GenericClient`). Never commit or roll back on it: the
/// pipeline does.
#[derive(Clone, Debug)]
pub struct InTransaction(Arc<Open>);

impl Deref for InTransaction {
    type Target = deadpool_postgres::Object;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Transaction {
    pub(crate) fn new(
        url: ConnectionString,
        pool: deadpool_postgres::Pool,
        shared: Arc<Shared>,
        sent: Arc<AtomicU64>,
    ) -> Self {
        Transaction {
            url,
            pool,
            shared,
            sent,
            open: tokio::sync::Mutex::new(None),
            begun: AtomicBool::new(false),
        }
    }

    /// The transaction's connection, begun the first time it is asked for,
    /// if `pool` is the store's ([`PostgresStore::pool`](crate::PostgresStore::pool)):
    /// the application's tables are then in the store's database, and may
    /// be written in the call's transaction. `None` for another pool: write
    /// there in a transaction of your own.
    pub async fn on(&self, pool: &Pool) -> Result<Option<InTransaction>, StoreError> {
        if !pool.shares(&self.shared) {
            return Ok(None);
        }
        let mut open = self.open.lock().await;
        if let Some(open) = &*open {
            return Ok(Some(InTransaction(Arc::clone(open))));
        }
        let begun = Arc::new(Open {
            object: Some(self.url.checkout(&self.pool).await?),
            committed: AtomicBool::new(false),
        });
        self.sent.fetch_add(1, Ordering::Relaxed);
        begun
            .batch_execute("BEGIN")
            .await
            .map_err(StoreError::new)?;
        *open = Some(Arc::clone(&begun));
        self.begun.store(true, Ordering::Release);
        Ok(Some(InTransaction(begun)))
    }

    /// Runs `sql` (the call's record) in the transaction, then commits.
    pub(crate) async fn commit_with(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(), StoreError> {
        let open = self.open.lock().await.take();
        self.begun.store(false, Ordering::Release);
        let open = open.ok_or_else(|| StoreError::new("the transaction was not begun"))?;
        let statement = open.prepare_cached(sql).await.map_err(StoreError::new)?;
        self.sent.fetch_add(2, Ordering::Relaxed);
        open.execute(&statement, params)
            .await
            .map_err(StoreError::new)?;
        // A transaction that failed earlier (a statement of the handler's
        // whose error it ignored) answers COMMIT with ROLLBACK, not an
        // error: the record just written then failed too, above.
        open.batch_execute("COMMIT")
            .await
            .map_err(StoreError::new)?;
        open.committed.store(true, Ordering::Release);
        Ok(())
    }
}

impl toolcall_ledger::store::Transaction for Transaction {
    fn begun(&self) -> bool {
        self.begun.load(Ordering::Acquire)
    }

    fn roll_back(&self) {
        // Between attempts nothing holds the slot: the attempt's future has
        // ended. Its connection closes as it drops, and the server rolls
        // its transaction back.
        if let Ok(mut open) = self.open.try_lock() {
            open.take();
        }
        self.begun.store(false, Ordering::Release);
    }
}
