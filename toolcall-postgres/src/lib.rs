//! A [`Store`](toolcall_ledger::store::Store) for [toolcall](https://docs.rs/toolcall) on Postgres: when an
//! agent backend runs as several replicas, and a model's retry lands on
//! another replica than its first call, idempotency records, in-flight
//! claims, step and duplicate counts and pending approvals must live in one
//! shared system of record.
//!
//! Every operation is one statement: a claim is an `INSERT ... ON CONFLICT
//! DO UPDATE ... WHERE` that only one replica can win, a resource lock the
//! same with its holder, and an approval is used up by a `DELETE ...
//! RETURNING` that matches its binding. The tables are created or upgraded
//! when the store connects (under an advisory lock, so replicas starting
//! together do not race), in the schema given, `public` by default; a
//! connection to a schema already at this version reads its version and
//! takes no lock, so that opening one stops no replica's writes.
//!
//! A call costs few round trips: its start (its step, its count, what is
//! recorded of its key, its resource's lock, and whether its conversation
//! read untrusted output or has a decided approval) is one statement
//! ([`CallStore::begin_call`]), which also claims a side effect's key when
//! the pipeline asks and nothing stands in the way (nothing recorded of the
//! key, the lock taken, no untrusted output in the session, no question in
//! the conversation); its result, with the lock freed, is a second
//! ([`CallStore::complete_unlocking`]): a read-only call is one transaction,
//! a confirmed side effect two. A side effect that the start did not claim
//! (one a person must approve, one whose unknown outcome only a person can
//! settle) claims its key in a statement of its own before its handler, as
//! the other stores do. A start that claims and the result wait for the log
//! to reach the disk, as a claim on its own does; a start that does not
//! claim does not wait (`synchronous_commit` off for it alone), so that a
//! crash of the server may take back a step count, a call count or a lock,
//! never an effect or a decision; a claim confirms the lock its call's start
//! took, and the log is flushed in order, so a claim that is kept keeps the
//! start before it.
//! Each statement is
//! prepared once per connection and then only bound and executed;
//! [`round_trips`](PostgresStore::round_trips) counts what was sent.
//!
//! A read-only call alone in its conversation (a stateless HTTP request)
//! that asks the store nothing but the version of the operators' controls
//! shares that read with the calls that start while one is on its way:
//! they are answered together by the next read, sent after the last of them
//! started, so a change of the controls committed before a call starts
//! binds it as surely as if it had read the version itself, and fifty
//! connections' reads send a handful of statements where they sent fifty.
//!
//! A side effect's handler may write the application's tables in the
//! call's own transaction ([`Transaction`], from `Ctx::transaction`, on the
//! store's [`pool`](PostgresStore::pool)): the result's record is then
//! written there and committed with them, the handler's writes and the
//! result in one commit ([`CallStore::complete_in`]). A whole side effect
//! is then two transactions (the start with its claim, the handler's writes
//! with the result) where the handler's own transaction made three; a crash
//! before that commit keeps neither, and the call is in doubt until
//! `reconcile` (or the backend's key, on a retry) says nothing ran.
//!
//! A person's decision (the inbox) is one `UPDATE` that only an undecided,
//! unused, unexpired approval matches, and it is announced with `NOTIFY` on
//! [`DECISION_CHANNEL`]: an agent waiting for it
//! ([`QuestionStore::wait_approval`]) `LISTEN`s and wakes at once.
//!
//! The store's connections are a pool (deadpool-postgres): `pool_max_size`
//! connections at most (8), a call waiting `pool_timeout` seconds for a free
//! one (5), a new one made within `connect_timeout` seconds (libpq's word,
//! its startup included; 5), and each statement limited to `statement_timeout` milliseconds
//! when given; all three are read from the connection string, beside
//! libpq's own words (`...?sslmode=verify-full&pool_max_size=16`).
//! Statements that only read (the start of a read-only call alone in its
//! conversation, a look at a key's record, a session's taint, an approval)
//! are sent on a quarter of the pool's connections (at least one), which
//! concurrent calls share: what calls send at the same moment goes out in
//! one write and comes back in one read, each statement still its own
//! implicit transaction. A statement that writes takes a connection of its
//! own, so that the commits of concurrent calls wait for the log together
//! (on one shared connection they would wait one after another), and so
//! does a transaction. The store's
//! connections plan each statement once (`plan_cache_mode` set to
//! `force_generic_plan`, Postgres 12 and later): every statement finds rows
//! by key, and Postgres would otherwise plan anew at each execution a
//! statement whose parameters switch parts of it off.
//!
//! A connection that drops is opened again on the next call; the call that
//! was in flight when it dropped answers `STORE_UNAVAILABLE`, never a wrong
//! "ok".
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use toolcall_postgres::PostgresStore;
//!
//! let store = PostgresStore::connect("postgres://postgres@127.0.0.1:5432/app").await?;
//! # Ok(()) }
//! ```
//!
//! # TLS
//!
//! A hosted Postgres takes TLS connections only. The connection string is
//! read as libpq reads it ([`ConnectionString`]): `sslmode` and
//! `sslrootcert` in the URL or a `key=value` string, or `PGSSLMODE` and
//! `PGSSLROOTCERT`; TLS is rustls (the `tls` feature, on by default). The
//! store, its `LISTEN` connection and an application's own tables
//! ([`connect`]) connect alike.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "postgres://app@db.example.com/app?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem";
//! let store = toolcall_postgres::PostgresStore::connect(url).await?;
//! // The application's own tables, with the same TLS:
//! let shop = toolcall_postgres::connect(url).await?;
//! # Ok(()) }
//! ```
//!
//! # What the schema holds
//!
//! | table | one row per | key |
//! |---|---|---|
//! | `toolcall_steps` | session: its step count | [`session_key`] of the session id (fixed length: a B-tree entry holds at most about 2.7 KB) |
//! | `toolcall_calls` | idempotency key: how often the call was made | the key |
//! | `toolcall_records` | idempotency key: its state, `in_flight` (with the lease's end), `completed` (with the result) or `in_doubt`, and the question a claim keeps for a person should its outcome stay unknown ([`CallStore::claim_asking`]) | the key |
//! | `toolcall_approvals` | approval: pending (why it asks, and who may answer it besides a person), then a person's decision (the inbox), when a call used it up and what came of it, with the session as given, indexed by its [`session_key`] (and, for an approval asked with `ask_approval`, a unique `ask_key` of its call among the unused ones: one question per conversation and call) | the question id |
//! | `toolcall_locks` | resource: its holder and the lease's end | [`session_key`] of the resource |
//! | `toolcall_taint` | session and fingerprint of an untrusted output's value (an empty one marks the session, and keeps where the taint came from: the newest sources, bounded, in `sources`) | [`session_key`] of the session id, and the fingerprint (a hex digest, never the text) |
//! | `toolcall_controls` | the operators' controls (one row): their version and document | |
//! | `toolcall_controls_history` | version of the controls written: who, when, what in words | the version |
//! | `toolcall_rates` | rate limit's bucket and fixed window: its count and end | [`session_key`] of the bucket, and the window's start |
//! | `toolcall_signatures` | approval and person who signed it, with the signing order | the question id, and the signer |
//! | `toolcall_schema_version` | the schema's version (one row) | |
//!
//! A key that is in doubt is claimed like a free one; a release leaves it
//! (and a completed key) as it is.
//!
//! # Purging
//!
//! The store deletes what has expired by itself: every
//! [`purge_every`](PostgresStore::purge_every) writes through a handle (1000
//! by default), one statement deletes at most 10 000 rows of each kind among
//!
//! * steps, call counts and records untouched for the
//!   [`retention`](PostgresStore::retention) window (24 hours by default),
//!   except a claim whose lease is still running;
//! * undecided approvals past their expiry, and decided ones (the inbox's
//!   history) once their expiry is older than the retention window;
//! * resource locks whose lease ran out;
//! * the taint of untrusted output, untouched for the retention window;
//! * rate limits' windows that ended, and the signatures of approvals no
//!   longer kept.
//!
//! Each is a range scan on an index, and skips rows another transaction
//! holds, so replicas purging at once neither wait nor deadlock.
//! [`purge`](PostgresStore::purge) deletes all of it at once, for a timer or
//! a maintenance job. A record dropped this way means an identical call
//! after it runs again, under the same idempotency key.
//!
//! # Schema versions
//!
//! Connecting upgrades tables made by an older version, in the same
//! transaction and under the same lock as creating them. The upgrade keeps
//! the columns the previous version uses, so replicas still running it keep
//! working during a rolling upgrade. A schema made by a newer version is
//! refused.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod approvals;
mod begin;
mod claim;
mod conn;
mod controls;
mod purge;
mod schema;
mod shared;
mod taint;
mod tls;
mod transaction;
#[cfg(feature = "tls")]
mod verify;
mod version;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use conn::Conn;
use tokio_postgres::types::ToSql;
use toolcall_ledger::ToolResult;
use toolcall_ledger::store::{
    ApprovalEntry, ApprovalLookup, ApprovalResult, ApprovalUse, AskApproval, CallBegun, CallStart,
    Claim, Completion, ControlsChange, ControlsWrite, DecideOutcome, DecisionWrite, Key, Lease,
    LockAsk, OpenBounds, PendingApproval, PendingPage, PendingQuery, QuestionLease, RateWindow,
    RecordedOutcome, SignOutcome, Signature, SignatureWrite, StoreError, StoredControls,
    TakeApproval, Unlock, Unsettled, now_ms, session_key,
};

pub use approvals::DECISION_CHANNEL;
/// The pool's crate, for the types [`Pool::get`] hands out.
pub use deadpool_postgres;
use schema::{migrate, quote};
pub use shared::{Pool, SharedConnection};
pub use tls::{ConnectionString, TlsMode, connect};
use toolcall_ledger::store::CallStore;
use toolcall_ledger::store::ControlStore;
use toolcall_ledger::store::LockStore;
use toolcall_ledger::store::QuestionStore;
pub use toolcall_sql::purge::Purged;
use toolcall_sql::purge::Retention;
use toolcall_sql::record::{self, result_text};
use toolcall_sql::{from_sql, limit_sql, to_sql};
pub use transaction::{InTransaction, Transaction};

/// A call's result stored, its claim freed.
const COMPLETE: &str = "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
     VALUES ($1, 'completed', 0, $2, $3)
     ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = $2,
         touched_ms = $3, question = NULL, asked_ms = NULL";

/// The pipeline's memory in Postgres, shared by every replica.
#[derive(Debug)]
pub struct PostgresStore {
    url: ConnectionString,
    schema: String,
    pool: deadpool_postgres::Pool,
    /// Connections of `pool` shared by single statements (with the
    /// application's reads, through [`pool`](PostgresStore::pool)).
    shared: Arc<shared::Shared>,
    retention: Retention,
    sent: Arc<AtomicU64>,
    started: Arc<begin::StartedLocks>,
    /// Reads of the controls' version, shared by the calls that start
    /// while one is on its way.
    versions: version::VersionReads,
}

impl PostgresStore {
    /// Connects to `url` (for example `postgres://user@host:5432/db`) and
    /// creates or upgrades the tables in the `public` schema.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        PostgresStore::connect_in_schema(url, "public").await
    }

    /// Like [`connect`](PostgresStore::connect), with the tables in
    /// `schema` (created if missing): one database, separate tenants or test runs.
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        let url = ConnectionString::parse(url)?;
        let schema_name = schema.to_owned();
        let pool = url.pool(move |client| {
            let schema = schema_name.clone();
            Box::pin(async move { migrate(client, &schema).await })
        })?;
        let shared = Arc::new(shared::Shared::new(url.pool_max_size()));
        let store = PostgresStore {
            url,
            schema: schema.to_owned(),
            pool,
            shared,
            retention: Retention::default(),
            sent: Arc::new(AtomicU64::new(0)),
            started: Arc::default(),
            versions: version::VersionReads::default(),
        };
        store.client().await?;
        Ok(store)
    }

    /// How many requests the store has sent to the server on its pool's
    /// connections since it connected (setting up a connection aside): each
    /// one round trip, and one transaction. A statement is prepared once per
    /// connection, which is one request more the first time it is sent.
    /// (Waiting for a decision, [`QuestionStore::wait_approval`], listens on a
    /// connection of its own, not counted.)
    pub fn round_trips(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The store's own pool, for the application's tables in the same
    /// database: one pool a process rather than two, within the
    /// `pool_max_size` of the connection string (a hosted Postgres counts
    /// connections), and the application's reads sharing the connections
    /// the store's reads share ([`Pool::shared`]), so that a call's read of
    /// the store and the handler's read of its own tables go out with the
    /// other calls' rather than each waking a server process of its own.
    ///
    /// Its connections are the store's, set up as the store sets them up:
    /// `search_path` is the store's schema alone (name the application's
    /// tables with their schema when the store is not in `public`), and
    /// statements are planned once (`plan_cache_mode` is
    /// `force_generic_plan` on Postgres 12 and later: right for lookups by
    /// key; a statement whose best plan depends on its parameters' values
    /// may want a [`Pool`] of its own, [`Pool::connect`]).
    pub fn pool(&self) -> Pool {
        Pool::of_store(
            self.url.clone(),
            self.pool.clone(),
            Arc::clone(&self.shared),
        )
    }

    /// Drops the schema and everything in it. For tests that made their own.
    pub async fn drop_schema(self) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                quote(&self.schema)
            ))
            .await
            .map_err(StoreError::new)
    }

    /// A connection for a statement that only reads: one of the pool's
    /// connections that concurrent reads share ([`shared`]: what tasks send
    /// at the same moment goes out together), or, for a pool of one, the
    /// pool's. Its statements are prepared on it once, the first time each
    /// is sent.
    async fn reader(&self) -> Result<Conn, StoreError> {
        match self.shared.get(&self.url, &self.pool).await? {
            Some(shared) => Ok(Conn::shared(shared, Arc::clone(&self.sent))),
            None => self.client().await,
        }
    }

    /// A connection of the pool for the caller alone (a statement that
    /// writes, a transaction), held until the returned value drops: one
    /// free, or a new one (its schema made or upgraded first), or, with
    /// every one busy, the first to come free within `pool_timeout`. A
    /// connection that dropped is not handed out again. Statements that
    /// write each have a connection (a server process) of their own, so
    /// that their commits wait for the log together rather than one after
    /// another on a shared connection.
    async fn client(&self) -> Result<Conn, StoreError> {
        let object = self.url.checkout(&self.pool).await?;
        Ok(Conn::own(object, Arc::clone(&self.sent)))
    }

    /// Runs `sql` on a connection of its own: how many rows it changed.
    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        let client = self.client().await?;
        client.execute(sql, params).await.map_err(StoreError::new)
    }

    /// Runs `sql` on the rows of `key` (its `$1`); a key with no row is no
    /// error.
    async fn execute_on(&self, sql: &str, key: &Key) -> Result<(), StoreError> {
        self.execute(sql, &[&key.as_str()]).await?;
        Ok(())
    }

    /// The row `sql` reads of `session` (its `$1`, the session's key), if
    /// there is one, on a shared connection.
    async fn session_row(
        &self,
        sql: &str,
        session: &str,
    ) -> Result<Option<tokio_postgres::Row>, StoreError> {
        let client = self.reader().await?;
        client
            .query_opt(sql, &[&session_key(session)])
            .await
            .map_err(StoreError::new)
    }

    async fn count(&self, sql: &str, id: &str, now_ms: u64) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one(sql, &[&id, &to_sql(now_ms)])
            .await
            .map_err(StoreError::new)?;
        self.wrote().await;
        Ok(from_sql(row.get(0)))
    }
}

impl CallStore for PostgresStore {
    async fn next_step(&self, session: &str, now_ms: u64) -> Result<u64, StoreError> {
        self.count(
            "INSERT INTO toolcall_steps (session, count, touched_ms) VALUES ($1, 1, $2)
             ON CONFLICT (session) DO UPDATE SET count = toolcall_steps.count + 1, touched_ms = EXCLUDED.touched_ms
             RETURNING count",
            &session_key(session),
            now_ms,
        )
        .await
    }

    /// One statement: the step, the call's count, what is recorded of its
    /// key, its resource's lock and whether its session read untrusted
    /// output, as asked.
    async fn begin_call(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        self.begin(start).await
    }

    /// One statement: the result stored, the claim and the lock freed.
    async fn complete_unlocking(&self, done: &Completion<'_>) -> Result<bool, StoreError> {
        let text = result_text(done.result)?;
        self.started.freed(done.holder);
        self.execute(
            begin::COMPLETE_UNLOCKING,
            &[
                &done.key.as_str(),
                &text,
                &to_sql(now_ms()),
                &session_key(done.resource.as_str()),
                &done.holder,
            ],
        )
        .await?;
        self.wrote().await;
        Ok(true)
    }

    async fn peek_step(&self, session: &str) -> Result<u64, StoreError> {
        let row = self
            .session_row(
                "SELECT count FROM toolcall_steps WHERE session = $1",
                session,
            )
            .await?;
        Ok(row.map_or(0, |row| from_sql(row.get(0))))
    }

    async fn count_call(&self, key: &Key, now_ms: u64) -> Result<u64, StoreError> {
        let key = key.as_str();
        self.count(
            "INSERT INTO toolcall_calls (key, count, touched_ms) VALUES ($1, 1, $2)
             ON CONFLICT (key) DO UPDATE SET count = toolcall_calls.count + 1, touched_ms = EXCLUDED.touched_ms
             RETURNING count",
            key,
            now_ms,
        )
        .await
    }

    async fn uncount_call(&self, key: &Key) -> Result<(), StoreError> {
        self.execute_on(
            "UPDATE toolcall_calls SET count = GREATEST(count - 1, 0) WHERE key = $1",
            key,
        )
        .await
    }

    async fn outcome(&self, key: &Key) -> Result<Option<RecordedOutcome>, StoreError> {
        let key = key.as_str();
        let client = self.reader().await?;
        let row = client
            .query_opt(
                "SELECT CASE WHEN state = 'in_flight' AND until_ms <= $2 THEN 'in_doubt' ELSE state END,
                        result
                 FROM toolcall_records WHERE key = $1",
                &[&key, &to_sql(now_ms())],
            )
            .await
            .map_err(StoreError::new)?;
        record::outcome(
            row.as_ref().map(|row| row.get(0)),
            row.as_ref().and_then(|row| row.get(1)),
        )
    }

    async fn claim(&self, key: &Key, lease: Lease) -> Result<Claim, StoreError> {
        self.claim_keeping(key, lease, None).await
    }

    async fn claim_asking(
        &self,
        key: &Key,
        asking: &QuestionLease<'_>,
    ) -> Result<Claim, StoreError> {
        let text = record::question_text(asking.question)?;
        self.claim_keeping(key, asking.lease, Some(&text)).await
    }

    async fn unsettled(&self, now_ms: u64, limit: usize) -> Result<Vec<Unsettled>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &record::unsettled_statement(|n| format!("${n}")),
                &[&to_sql(now_ms), &limit_sql(limit)],
            )
            .await
            .map_err(StoreError::new)?;
        rows.iter()
            .map(|row| {
                let key: String = row.try_get(0).map_err(StoreError::new)?;
                let question: String = row.try_get(1).map_err(StoreError::new)?;
                Ok(Unsettled {
                    key: key.parse::<Key>().map_err(StoreError::new)?,
                    question: record::parse_question(&question)?,
                })
            })
            .collect()
    }

    async fn renew(&self, key: &Key, lease: Lease) -> Result<bool, StoreError> {
        let Lease { now_ms, lease_ms } = lease;
        let key = key.as_str();
        let client = self.client().await?;
        let renewed = client
            .execute(
                "UPDATE toolcall_records SET until_ms = $2, touched_ms = $3
                 WHERE key = $1 AND state = 'in_flight'",
                &[
                    &key,
                    &to_sql(now_ms.saturating_add(lease_ms)),
                    &to_sql(now_ms),
                ],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(renewed > 0)
    }

    async fn complete(&self, key: &Key, result: &ToolResult) -> Result<(), StoreError> {
        let key = key.as_str();
        let text = result_text(result)?;
        self.execute(COMPLETE, &[&key, &text, &to_sql(now_ms())])
            .await?;
        self.wrote().await;
        Ok(())
    }

    fn transaction(&self) -> Option<Arc<dyn toolcall_ledger::store::Transaction>> {
        Some(Arc::new(Transaction::new(
            self.url.clone(),
            self.pool.clone(),
            Arc::clone(&self.shared),
            Arc::clone(&self.sent),
        )))
    }

    /// The result (and the lock's release) in the handler's transaction,
    /// one statement, then its commit.
    async fn complete_in(
        &self,
        transaction: &dyn toolcall_ledger::store::Transaction,
        key: &Key,
        result: &ToolResult,
        unlock: Option<Unlock<'_>>,
    ) -> Result<(), StoreError> {
        let transaction: &dyn std::any::Any = transaction;
        let transaction = transaction
            .downcast_ref::<Transaction>()
            .ok_or_else(|| StoreError::new("a transaction of another store"))?;
        let text = result_text(result)?;
        let now = to_sql(now_ms());
        match unlock {
            Some(unlock) => {
                self.started.freed(unlock.holder);
                let resource = session_key(unlock.resource.as_str());
                transaction
                    .commit_with(
                        begin::COMPLETE_UNLOCKING,
                        &[&key.as_str(), &text, &now, &resource, &unlock.holder],
                    )
                    .await?;
            }
            None => {
                transaction
                    .commit_with(COMPLETE, &[&key.as_str(), &text, &now])
                    .await?
            }
        }
        self.wrote().await;
        Ok(())
    }

    async fn release(&self, key: &Key) -> Result<(), StoreError> {
        self.execute_on(
            "DELETE FROM toolcall_records WHERE key = $1 AND state = 'in_flight'",
            key,
        )
        .await
    }

    async fn doubt(&self, key: &Key) -> Result<(), StoreError> {
        let key = key.as_str();
        self
            .execute(
            "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
             VALUES ($1, 'in_doubt', 0, NULL, $2)
             ON CONFLICT (key) DO UPDATE SET state = 'in_doubt', until_ms = 0, result = NULL, touched_ms = $2
             WHERE toolcall_records.state <> 'completed'",
            &[&key, &to_sql(now_ms())],
            )
            .await?;
        self.wrote().await;
        Ok(())
    }
}

impl QuestionStore for PostgresStore {
    async fn put_approval(&self, a: &PendingApproval) -> Result<(), StoreError> {
        approvals::put(self, a).await
    }

    async fn take_approval(&self, taking: &ApprovalUse<'_>) -> Result<TakeApproval, StoreError> {
        approvals::take(self, taking).await
    }

    async fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        approvals::pending(self, now_ms, limit).await
    }

    async fn ask_approval(
        &self,
        approval: &PendingApproval,
        bounds: impl Into<OpenBounds> + Send,
    ) -> Result<AskApproval, StoreError> {
        approvals::ask(self, approval, bounds.into()).await
    }

    async fn find_approval(
        &self,
        lookup: &ApprovalLookup<'_>,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        approvals::find(self, lookup).await
    }

    async fn pending_page(&self, query: &PendingQuery<'_>) -> Result<PendingPage, StoreError> {
        approvals::page(self, query).await
    }

    async fn decide_approval(
        &self,
        deciding: &DecisionWrite<'_>,
    ) -> Result<DecideOutcome, StoreError> {
        approvals::decide(self, deciding).await
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
        approvals::get(self, id).await
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        approvals::decided(self, limit).await
    }

    async fn settle_approval(&self, id: &str, result: &ApprovalResult) -> Result<(), StoreError> {
        approvals::settle(self, id, result).await
    }

    async fn give_back_approval(&self, id: &str) -> Result<bool, StoreError> {
        approvals::give_back(self, id).await
    }

    /// Waits on a connection of its own that `LISTEN`s on
    /// [`DECISION_CHANNEL`]: a decision wakes it at once. It also looks
    /// again every 2 seconds, whatever it heard.
    async fn wait_approval(
        &self,
        id: &str,
        until_ms: u64,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        approvals::wait(self, id, until_ms).await
    }

    /// One transaction that locks the approval's row (`SELECT ... FOR
    /// UPDATE`): the signature kept and, for the last one, the decision
    /// recorded and announced on [`DECISION_CHANNEL`].
    async fn sign_approval(&self, signing: &SignatureWrite<'_>) -> Result<SignOutcome, StoreError> {
        controls::sign(self, signing).await
    }

    async fn signatures(&self, id: &str) -> Result<Vec<Signature>, StoreError> {
        controls::signatures(self, id).await
    }
}

impl LockStore for PostgresStore {
    async fn lock_resource(&self, lock: &LockAsk<'_>, now_ms: u64) -> Result<bool, StoreError> {
        let resource = lock.resource.as_str();
        // One statement: taken if free, held by `holder`, or run out.
        self.wrote_if(
            "INSERT INTO toolcall_locks (resource_key, resource, holder, until_ms)
             VALUES ($1, $2, $3, $5)
             ON CONFLICT (resource_key) DO UPDATE SET holder = EXCLUDED.holder, until_ms = EXCLUDED.until_ms
             WHERE toolcall_locks.holder = EXCLUDED.holder OR toolcall_locks.until_ms <= $4
             RETURNING 1",
            &[
                &session_key(resource),
                &resource,
                &lock.holder,
                &to_sql(now_ms),
                &to_sql(now_ms.saturating_add(lock.lease_ms)),
            ],
        )
        .await
    }

    async fn unlock_resource(&self, resource: &Key, holder: &str) -> Result<(), StoreError> {
        self.started.freed(holder);
        let resource = resource.as_str();
        self.execute(
            "DELETE FROM toolcall_locks WHERE resource_key = $1 AND holder = $2",
            &[&session_key(resource), &holder],
        )
        .await?;
        Ok(())
    }
}

impl ControlStore for PostgresStore {
    async fn controls(&self, known: u64) -> Result<Option<StoredControls>, StoreError> {
        controls::get(self, known).await
    }

    /// One statement: the document written if its version is `expected`,
    /// and the change kept.
    async fn put_controls(&self, write: &ControlsWrite<'_>) -> Result<bool, StoreError> {
        controls::put(self, write).await
    }

    async fn controls_history(&self, limit: usize) -> Result<Vec<ControlsChange>, StoreError> {
        controls::history(self, limit).await
    }

    /// One statement: counted only below the limit.
    async fn take_rate(&self, window: &RateWindow<'_>, limit: u64) -> Result<bool, StoreError> {
        controls::take_rate(self, window, limit).await
    }

    async fn rate_count(&self, bucket: &str, window_start_ms: u64) -> Result<u64, StoreError> {
        controls::rate_count(self, bucket, window_start_ms).await
    }
}
