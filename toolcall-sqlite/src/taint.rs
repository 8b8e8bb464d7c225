//! What a conversation read in untrusted output: its mark, its values'
//! fingerprints and where they came from, one row each in `toolcall_taint`.

use rusqlite::{OptionalExtension, params};
use toolcall_ledger::store::{
    Exposure, StoreError, TaintHit, TaintSource, TaintStore, now_ms, session_key,
};
use toolcall_sql::to_sql;

use crate::{SqliteStore, immediate, off_runtime};

impl TaintStore for SqliteStore {
    async fn add_taint(&self, seen: &Exposure<'_>) -> Result<(), StoreError> {
        off_runtime(|| {
            let session = session_key(seen.session);
            let now = to_sql(now_ms());
            {
                let mut conn = self.conn();
                let tx = immediate(&mut conn)?;
                {
                    let mut insert = tx
                    .prepare(
                        "INSERT INTO toolcall_taint (session, print, touched_ms) VALUES (?1, ?2, ?3)
                         ON CONFLICT (session, print) DO UPDATE SET touched_ms = excluded.touched_ms",
                    )
                    .map_err(StoreError::new)?;
                    for print in
                        std::iter::once("").chain(seen.fingerprints.iter().map(String::as_str))
                    {
                        insert
                            .execute(params![session, print, now])
                            .map_err(StoreError::new)?;
                    }
                }
                // Read and written in the same transaction: two sources
                // added at once are both kept.
                let held: Option<String> = tx
                    .query_row(
                        "SELECT sources FROM toolcall_taint WHERE session = ?1 AND print = ''",
                        params![session],
                        |row| row.get(0),
                    )
                    .map_err(StoreError::new)?;
                let sources = toolcall_sql::taint::added(held.as_deref(), seen.source)?;
                tx.execute(
                    "UPDATE toolcall_taint SET sources = ?2 WHERE session = ?1 AND print = ''",
                    params![session, sources],
                )
                .map_err(StoreError::new)?;
                tx.commit().map_err(StoreError::new)?;
            }
            self.wrote();
            Ok(())
        })
    }

    async fn tainted(
        &self,
        session: &str,
        fingerprints: &[String],
    ) -> Result<TaintHit, StoreError> {
        off_runtime(|| {
            let session = session_key(session);
            let conn = self.conn();
            let mut select = conn
                .prepare_cached("SELECT 1 FROM toolcall_taint WHERE session = ?1 AND print = ?2")
                .map_err(StoreError::new)?;
            let mut has = |print: &str| {
                select
                    .exists(params![session, print])
                    .map_err(StoreError::new)
            };
            if !has("")? {
                return Ok(TaintHit::default());
            }
            let mut seen = Vec::new();
            for print in fingerprints {
                if !print.is_empty() && has(print)? {
                    seen.push(print.clone());
                }
            }
            Ok(TaintHit::new(true, seen))
        })
    }

    async fn taint_sources(&self, session: &str) -> Result<Vec<TaintSource>, StoreError> {
        off_runtime(|| {
            let session = session_key(session);
            let conn = self.conn();
            let held: Option<Option<String>> = conn
                .query_row(
                    "SELECT sources FROM toolcall_taint WHERE session = ?1 AND print = ''",
                    params![session],
                    |row| row.get(0),
                )
                .optional()
                .map_err(StoreError::new)?;
            toolcall_sql::taint::sources(held.flatten().as_deref())
        })
    }
}
