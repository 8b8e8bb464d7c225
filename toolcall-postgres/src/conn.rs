//! One connection with its prepared statements: each statement's text is
//! parsed by the server once per connection, then only bound and executed
//! (one round trip, one implicit transaction, per statement).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Error, Row, Statement};

/// A connection, and the statements prepared on it, by their text.
#[derive(Debug)]
pub(crate) struct Conn {
    client: Client,
    statements: Mutex<HashMap<String, Statement>>,
    /// Requests sent, shared by every connection of one store.
    sent: Arc<AtomicU64>,
}

impl Conn {
    pub(crate) fn new(client: Client, sent: Arc<AtomicU64>) -> Self {
        Conn {
            client,
            statements: Mutex::new(HashMap::new()),
            sent,
        }
    }

    fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// The statement of `sql`, prepared on this connection the first time
    /// it is asked for. (Two calls asking at once may both prepare it; one
    /// of the two is kept.)
    pub(crate) async fn statement(&self, sql: &str) -> Result<Statement, Error> {
        let cached = self
            .statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(sql)
            .cloned();
        if let Some(statement) = cached {
            return Ok(statement);
        }
        self.sent();
        let statement = self.client.prepare(sql).await?;
        self.statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(sql.to_owned())
            .or_insert_with(|| statement.clone());
        Ok(statement)
    }

    pub(crate) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.sent();
        self.client.query(&statement, params).await
    }

    pub(crate) async fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        let statement = self.statement(sql).await?;
        self.sent();
        self.client.query_one(&statement, params).await
    }

    pub(crate) async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.sent();
        self.client.query_opt(&statement, params).await
    }

    pub(crate) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        let statement = self.statement(sql).await?;
        self.sent();
        self.client.execute(&statement, params).await
    }

    /// Statements sent as text, unprepared (schema changes, `LISTEN`).
    pub(crate) async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.sent();
        self.client.batch_execute(sql).await
    }
}
