//! Resource locks, one row each in `toolcall_locks`, each taken and
//! given back in one statement.

use rusqlite::params;
use toolcall_ledger::store::{Key, LockAsk, LockStore, StoreError, session_key};
use toolcall_sql::to_sql;

use crate::{SqliteStore, off_runtime};

/// A resource's lock taken (?1 its key, ?2 the resource, ?3 the holder,
/// ?5 the lease's end) if it is free, held by the same holder, or its lease
/// ran out at ?4: one statement.
pub(crate) const LOCK: &str =
    "INSERT INTO toolcall_locks (resource_key, resource, holder, until_ms)
     VALUES (?1, ?2, ?3, ?5)
     ON CONFLICT (resource_key) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms
     WHERE holder = excluded.holder OR until_ms <= ?4
     RETURNING 1";

impl LockStore for SqliteStore {
    async fn lock_resource(&self, lock: &LockAsk<'_>, now_ms: u64) -> Result<bool, StoreError> {
        off_runtime(|| {
            let resource = lock.resource.as_str();
            // One statement: taken if free, held by `holder`, or run out.
            self.wrote_if(
                LOCK,
                params![
                    session_key(resource),
                    resource,
                    lock.holder,
                    to_sql(now_ms),
                    to_sql(now_ms.saturating_add(lock.lease_ms))
                ],
            )
        })
    }

    async fn unlock_resource(&self, resource: &Key, holder: &str) -> Result<(), StoreError> {
        off_runtime(|| {
            let resource = resource.as_str();
            self.execute(
                "DELETE FROM toolcall_locks WHERE resource_key = ?1 AND holder = ?2",
                params![session_key(resource), holder],
            )?;
            Ok(())
        })
    }
}
