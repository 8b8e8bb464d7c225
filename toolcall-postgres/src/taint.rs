//! What a conversation read in untrusted output: its mark, its values'
//! fingerprints and where they came from, one row each in `toolcall_taint`.

use toolcall_ledger::store::{
    Exposure, StoreError, TaintHit, TaintSource, TaintStore, now_ms, session_key,
};
use toolcall_sql::to_sql;

use crate::PostgresStore;

impl TaintStore for PostgresStore {
    /// One transaction: the session marked and its fingerprints kept (the
    /// mark's row locked until it commits), its sources read and written
    /// back with `seen.source` added, so that two sources added at once are
    /// both kept.
    async fn add_taint(&self, seen: &Exposure<'_>) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let key = session_key(seen.session);
        let mut prints: Vec<&str> = vec![""];
        prints.extend(seen.fingerprints.iter().map(String::as_str));
        let tx = client.transaction().await?;
        let held = tx
            .query_one(
                "WITH marked AS (
                     INSERT INTO toolcall_taint (session, print, touched_ms)
                     SELECT $1, p, $3 FROM unnest($2::TEXT[]) AS p
                     ON CONFLICT (session, print) DO UPDATE SET touched_ms = EXCLUDED.touched_ms
                     RETURNING print, sources)
                 SELECT sources FROM marked WHERE print = ''",
                &[&key, &prints, &to_sql(now_ms())],
            )
            .await
            .map_err(StoreError::new)?;
        let held: Option<String> = held.get(0);
        let sources = toolcall_sql::taint::added(held.as_deref(), seen.source)?;
        tx.execute(
            "UPDATE toolcall_taint SET sources = $2 WHERE session = $1 AND print = ''",
            &[&key, &sources],
        )
        .await
        .map_err(StoreError::new)?;
        tx.commit().await.map_err(StoreError::new)?;
        self.sent.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
        drop(client);
        self.wrote().await;
        Ok(())
    }

    async fn taint_sources(&self, session: &str) -> Result<Vec<TaintSource>, StoreError> {
        let row = self
            .session_row(
                "SELECT sources FROM toolcall_taint WHERE session = $1 AND print = ''",
                session,
            )
            .await?;
        let held: Option<String> = row.and_then(|row| row.get(0));
        toolcall_sql::taint::sources(held.as_deref())
    }

    async fn tainted(
        &self,
        session: &str,
        fingerprints: &[String],
    ) -> Result<TaintHit, StoreError> {
        let client = self.reader().await?;
        let mut prints: Vec<&str> = vec![""];
        prints.extend(
            fingerprints
                .iter()
                .map(String::as_str)
                .filter(|p| !p.is_empty()),
        );
        let rows = client
            .query(
                "SELECT print FROM toolcall_taint WHERE session = $1 AND print = ANY($2::TEXT[])",
                &[&session_key(session), &prints],
            )
            .await
            .map_err(StoreError::new)?;
        let found: std::collections::HashSet<String> =
            rows.iter().map(|row| row.get::<_, String>(0)).collect();
        if !found.contains("") {
            return Ok(TaintHit::default());
        }
        let seen = fingerprints
            .iter()
            .filter(|p| !p.is_empty() && found.contains(*p))
            .cloned()
            .collect();
        Ok(TaintHit::new(true, seen))
    }
}
