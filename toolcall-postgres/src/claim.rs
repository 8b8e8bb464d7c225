//! A side effect's claim of its key: one statement that takes the key and
//! confirms, in the same durable commit, the resource lock its call's start
//! took; then, for a key it could not take, what is recorded of it.

use toolcall_ledger::store::{Claim, Key, Lease, StoreError};
use toolcall_sql::record::parse_result;
use toolcall_sql::to_sql;

use crate::PostgresStore;

impl PostgresStore {
    /// [`CallStore::claim`], keeping `question` (its JSON text, with the
    /// time it was kept) with a claim it acquires
    /// ([`CallStore::claim_asking`]), and nothing with one it does not.
    ///
    /// [`CallStore::claim`]: toolcall_ledger::store::CallStore::claim
    /// [`CallStore::claim_asking`]: toolcall_ledger::store::CallStore::claim_asking
    pub(crate) async fn claim_keeping(
        &self,
        key: &Key,
        lease: Lease,
        question: Option<&str>,
    ) -> Result<Claim, StoreError> {
        let Lease { now_ms, lease_ms } = lease;
        let key = key.as_str();
        let client = self.client().await?;
        let until = to_sql(now_ms.saturating_add(lease_ms));
        let now = to_sql(now_ms);
        let asked_ms = question.map(|_| now);
        // The lock the call's start took, confirmed in the claim's durable
        // commit: a start the server lost in a crash took its lock with it.
        let started = self.started.of(key);
        let (resource_key, holder) = match &started {
            Some((resource_key, holder)) => (Some(resource_key.as_str()), Some(holder.as_str())),
            None => (None, None),
        };
        let row = client
            .query_one(
                "WITH held AS (
                     SELECT $6::TEXT IS NULL OR EXISTS (
                         SELECT 1 FROM toolcall_locks WHERE resource_key = $6 AND holder = $7
                     ) AS held
                 ), won AS (
                     INSERT INTO toolcall_records
                         (key, state, until_ms, result, touched_ms, question, asked_ms)
                     SELECT $1::TEXT, 'in_flight', $2::BIGINT, NULL, $3::BIGINT, $4::TEXT, $5::BIGINT
                     FROM held WHERE held.held
                     ON CONFLICT (key) DO UPDATE SET state = 'in_flight', until_ms = $2,
                         result = NULL, touched_ms = $3, question = $4, asked_ms = $5
                     WHERE toolcall_records.state = 'in_doubt'
                     RETURNING key
                 )
                 SELECT (SELECT held FROM held), EXISTS (SELECT 1 FROM won)",
                &[&key, &until, &now, &question, &asked_ms, &resource_key, &holder],
            )
            .await
            .map_err(StoreError::new)?;
        if !row.get::<_, bool>(0) {
            return Err(StoreError::new(
                "the call's start is no longer kept (its resource lock is gone: \
                 the server lost it, or its lease ran out and another call took it); \
                 nothing ran",
            ));
        }
        if row.get::<_, bool>(1) {
            self.wrote().await;
            return Ok(Claim::Acquired);
        }
        // Held by a lease that ran out with no outcome: in doubt, not taken.
        let abandoned = client
            .query_opt(
                "UPDATE toolcall_records SET state = 'in_doubt', touched_ms = $2
                 WHERE key = $1 AND state = 'in_flight' AND until_ms <= $2
                 RETURNING key",
                &[&key, &now],
            )
            .await
            .map_err(StoreError::new)?;
        if abandoned.is_some() {
            return Ok(Claim::Abandoned);
        }
        let row = client
            .query_opt(
                "SELECT state, result FROM toolcall_records WHERE key = $1",
                &[&key],
            )
            .await
            .map_err(StoreError::new)?;
        match row {
            Some(row) if row.get::<_, String>(0) == "completed" => {
                match row.get::<_, Option<String>>(1) {
                    Some(text) => Ok(Claim::Completed(parse_result(&text)?)),
                    None => Ok(Claim::InFlight),
                }
            }
            // Held by another replica, or released or doubted between the
            // two statements: either way the caller asks again.
            _ => Ok(Claim::InFlight),
        }
    }
}
