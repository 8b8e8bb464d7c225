//! An ops bot's tools over volumes kept in Postgres, built as README's
//! "Your own application" says: tools on plain functions, a business check
//! that asks the database, and `toolcall_cli::App` for the command line,
//! its state built from the store `--store` opens.
//!
//! ```sh
//! STORE=postgres://postgres@127.0.0.1:5432/test
//! cargo run -p volumes -- definitions --format openai
//! echo '{"tool": "delete_volume", "arguments": {"name": "vol-scratch"}}' \
//!   | cargo run -p volumes -- replay --store "$STORE"
//! ```

use std::process::ExitCode;

use serde_json::{Value, json};
use toolcall::{Caller, Ctx, Policy, Rejection, ToolError, tool, tools};
use toolcall_cli::{App, StoreSpec};
use toolcall_postgres::deadpool_postgres::{Object, tokio_postgres};
use toolcall_postgres::{Pool, SharedConnection};

/// The application's state: a pool of its own on the store's database,
/// where its table lives beside the pipeline's.
struct Ops {
    pool: Pool,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS volumes_volumes (
    name    TEXT PRIMARY KEY,
    size_gb INTEGER NOT NULL,
    deleted BOOLEAN NOT NULL DEFAULT FALSE
);
INSERT INTO volumes_volumes (name, size_gb) VALUES ('vol-scratch', 20), ('vol-logs', 200)
    ON CONFLICT (name) DO NOTHING;
";

impl Ops {
    /// Connects to the database `--store` names and makes the table.
    async fn connect(store: StoreSpec) -> Result<Ops, String> {
        let StoreSpec::Postgres(url) = store else {
            return Err(
                "volumes keeps its volumes in Postgres: give --store postgres://...".into(),
            );
        };
        let pool = Pool::connect(&url).await.map_err(|e| e.to_string())?;
        let client = pool.get().await.map_err(|e| e.to_string())?;
        client
            .batch_execute(SCHEMA)
            .await
            .map_err(|e| e.to_string())?;
        drop(client);
        Ok(Ops { pool })
    }

    /// A connection of its own, for a statement that writes. A checkout
    /// that fails sent nothing to the database: `not_applied`, retried as
    /// it is, never an unknown outcome.
    async fn client(&self) -> Result<Object, ToolError> {
        self.pool.get().await.map_err(ToolError::not_applied)
    }

    /// A connection shared with the other reads of the moment, for a
    /// statement that only reads; a failed checkout sent nothing either.
    async fn reader(&self) -> Result<SharedConnection, ToolError> {
        self.pool.shared().await.map_err(ToolError::not_applied)
    }
}

/// What a statement's error says happened. The database answered with an
/// error: it rolled the statement back, nothing happened (`not_applied`).
/// The connection failed before the answer: the statement may have
/// committed (`transient`: of a side effect, an unknown outcome).
fn sent(error: tokio_postgres::Error) -> ToolError {
    if error.as_db_error().is_some() {
        ToolError::not_applied(error)
    } else {
        ToolError::transient(error)
    }
}

/// Lists the volumes that exist, with their sizes in GB.
#[tool]
async fn list_volumes(ctx: &Ctx<Ops>) -> Result<Value, ToolError> {
    let client = ctx.state.reader().await?;
    let rows = client
        .query(
            "SELECT name, size_gb FROM volumes_volumes WHERE NOT deleted ORDER BY name",
            &[],
        )
        .await
        .map_err(sent)?;
    let volumes: Vec<Value> = rows
        .iter()
        .map(|row| json!({"name": row.get::<_, String>(0), "size_gb": row.get::<_, i32>(1)}))
        .collect();
    Ok(json!({ "volumes": volumes }))
}

/// Deletes a volume and its data, for good. Call list_volumes first.
#[tool(side_effect, high_risk, async_check = volume_exists)]
async fn delete_volume(
    ctx: &Ctx<Ops>,
    /// The volume's name, as list_volumes gives it.
    #[arg(pattern = "^vol-[a-z0-9-]{1,40}$", resource = "volume")]
    name: String,
) -> Result<Value, ToolError> {
    let client = ctx.state.client().await?;
    let deleted = client
        .execute(
            "UPDATE volumes_volumes SET deleted = TRUE WHERE name = $1 AND NOT deleted",
            &[&name],
        )
        .await
        .map_err(sent)?;
    if deleted == 0 {
        // The check saw it a moment ago, under the lock: only a deletion
        // from outside toolcall can have come in between.
        return Err(Rejection::new(
            "VOLUME_ALREADY_DELETED",
            format!("{name} was deleted meanwhile, not by this call."),
        )
        .into());
    }
    Ok(json!({ "deleted": name }))
}

/// The business check: the volume exists now. It asks the database, with
/// the call's lock on the volume held, each time the call is made: after a
/// person approved it too, so a volume deleted meanwhile is refused here.
async fn volume_exists(args: &DeleteVolumeArgs, ctx: &Ctx<Ops>) -> Result<(), ToolError> {
    let client = ctx.state.reader().await?;
    let row = client
        .query_opt(
            "SELECT 1 FROM volumes_volumes WHERE name = $1 AND NOT deleted",
            &[&args.name],
        )
        .await
        .map_err(sent)?;
    match row {
        Some(_) => Ok(()),
        None => Err(not_found(&args.name).into()),
    }
}

fn not_found(name: &str) -> Rejection {
    Rejection::new(
        "VOLUME_NOT_FOUND",
        format!("No volume {name}. Call list_volumes for the volumes that exist."),
    )
}

fn main() -> ExitCode {
    let registry = tools![list_volumes, delete_volume].expect("the tools' names are unique");
    App::from_store("volumes", registry, Ops::connect)
        .about("An ops bot's tools over volumes, behind toolcall's pipeline.")
        .version(env!("CARGO_PKG_VERSION"))
        .policy(Policy::new().allow(["list_volumes", "delete_volume"]))
        .callers([Caller::new(
            "auditor",
            Policy::new().allow(["list_volumes"]),
        )])
        .run()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use toolcall::{Call, Code, Dispatcher};

    use super::*;

    /// The state over `TOOLCALL_POSTGRES_URL`'s database, its pool of two
    /// connections that waits for none: one the reads share, one for the
    /// test to hold.
    async fn two_connections() -> Option<Ops> {
        let Ok(url) = std::env::var("TOOLCALL_POSTGRES_URL") else {
            eprintln!("SKIPPED: TOOLCALL_POSTGRES_URL is not set");
            return None;
        };
        let sep = if url.contains('?') { '&' } else { '?' };
        let url = format!("{url}{sep}pool_max_size=2&pool_timeout=0");
        Some(Ops::connect(StoreSpec::Postgres(url)).await.unwrap())
    }

    /// The handler's checkout fails once the check has passed (on the
    /// reads' connection): nothing reached the database, so the call is
    /// retried and answered UPSTREAM_UNAVAILABLE, nothing in doubt, no
    /// question for a person, and the volume is still there.
    #[tokio::test]
    async fn a_failed_checkout_is_not_applied_never_an_unknown_outcome() {
        let Some(ops) = two_connections().await else {
            return;
        };
        let name = format!(
            "vol-checkout-{}-{}",
            std::process::id(),
            std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos()
        );
        ops.client()
            .await
            .unwrap()
            .execute(
                "INSERT INTO volumes_volumes (name, size_gb) VALUES ($1, 10)",
                &[&name],
            )
            .await
            .unwrap();
        // The reads' connection is taken for them; the test holds the other.
        drop(ops.reader().await.unwrap());
        let held = ops.pool.get().await.unwrap();

        let registry = tools![list_volumes, delete_volume].unwrap();
        let dispatcher = Dispatcher::builder(registry, Arc::new(ops))
            .retry_backoff(Duration::from_millis(1))
            .build()
            .unwrap();
        let arguments = json!({ "name": name }).to_string();
        let call = Call::new("delete_volume", &arguments)
            .session("checkout")
            .confirmed(true);
        let result = dispatcher.execute(call).await;
        let answer = serde_json::to_value(&result).unwrap();
        assert_eq!(result.code, Code::UpstreamUnavailable, "{answer}");
        assert_eq!(answer["data"]["in_doubt"], Value::Null, "{answer}");
        assert_eq!(result.question_id, None, "{answer}");

        drop(held);
        let deleted: bool = dispatcher
            .state()
            .client()
            .await
            .unwrap()
            .query_one(
                "SELECT deleted FROM volumes_volumes WHERE name = $1",
                &[&name],
            )
            .await
            .unwrap()
            .get(0);
        assert!(!deleted, "the volume is still there");
    }
}
