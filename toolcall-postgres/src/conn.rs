//! One connection with its prepared statements: each statement's text is
//! parsed by the server once per connection, then only bound and executed
//! (one round trip, one implicit transaction, per statement). The
//! connection is the caller's alone, or shared with concurrent statements
//! ([`crate::shared`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row, Statement};
use toolcall_ledger::store::StoreError;

use crate::shared::SharedConnection;

/// A connection of the store's pool, held until this drops, with the
/// statements prepared on it (the pool keeps them with the connection).
/// Once a statement found it ended, it is closed rather than given back
/// ([`SharedConnection`]).
pub(crate) struct Conn {
    /// The caller's alone (a transaction can run on it), or shared with
    /// concurrent statements ([`crate::shared`]), which its slot holds too.
    client: SharedConnection,
    /// Requests sent, shared by every connection of one store.
    sent: Arc<AtomicU64>,
}

impl Conn {
    /// A connection of the caller's own.
    pub(crate) fn own(client: deadpool_postgres::Object, sent: Arc<AtomicU64>) -> Self {
        Conn {
            client: SharedConnection::new(client),
            sent,
        }
    }

    /// A connection shared with concurrent statements: no transaction.
    pub(crate) fn shared(client: SharedConnection, sent: Arc<AtomicU64>) -> Self {
        Conn { client, sent }
    }

    /// `result`, having marked the connection gone when it says the
    /// connection ended. The client learns that its connection closed only
    /// when the connection's task has run, which a loaded runtime may not
    /// have done yet: until then the connection would be handed out again,
    /// and each statement sent on it would fail.
    fn seen<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(error) = &result
            && ended(error)
        {
            self.client.mark_gone();
        }
        result
    }

    fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// The statement of `sql`, prepared on this connection the first time
    /// it is asked for.
    pub(crate) async fn statement(&self, sql: &str) -> Result<Statement, Error> {
        let cache = &self.client.statement_cache;
        let before = cache.size();
        let statement = self.seen(self.client.prepare_cached(sql).await)?;
        if cache.size() != before {
            self.sent();
        }
        Ok(statement)
    }

    pub(crate) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.sent();
        self.seen(self.client.query(&statement, params).await)
    }

    pub(crate) async fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        let statement = self.statement(sql).await?;
        self.sent();
        self.seen(self.client.query_one(&statement, params).await)
    }

    pub(crate) async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.sent();
        self.seen(self.client.query_opt(&statement, params).await)
    }

    pub(crate) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        let statement = self.statement(sql).await?;
        self.sent();
        self.seen(self.client.execute(&statement, params).await)
    }

    /// A transaction on this connection, its statements prepared like the
    /// connection's (its `BEGIN` and its end are counted here; its
    /// statements are the caller's to count).
    /// A shared connection has none: the store asks for a connection of
    /// its own for a transaction.
    pub(crate) async fn transaction(
        &mut self,
    ) -> Result<deadpool_postgres::Transaction<'_>, StoreError> {
        let Some(client) = self.client.get_mut() else {
            return Err(StoreError::new(
                "a transaction on a shared connection (a defect of toolcall-postgres)",
            ));
        };
        self.sent.fetch_add(2, Ordering::Relaxed);
        client.transaction().await.map_err(StoreError::new)
    }

    /// Statements sent as text, unprepared (schema changes, `LISTEN`).
    pub(crate) async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.sent();
        self.seen(self.client.batch_execute(sql).await)
    }
}

/// Whether `error` says the connection ended: closed, failed under the
/// client, or ended by the server (SQLSTATE classes 08, connection
/// exception, and 57, operator intervention: `pg_terminate_backend`, a
/// shutdown).
fn ended(error: &Error) -> bool {
    match error.as_db_error() {
        None => {
            use std::error::Error as _;
            error.is_closed()
                || error
                    .source()
                    .is_some_and(|cause| cause.is::<std::io::Error>())
        }
        Some(db) => matches!(&db.code().code()[..2], "08" | "57"),
    }
}
