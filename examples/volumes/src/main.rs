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
use toolcall::{Ctx, Policy, Rejection, ToolError, tool, tools};
use toolcall_cli::{App, StoreSpec};
use toolcall_postgres::Pool;

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

    async fn client(&self) -> Result<toolcall_postgres::deadpool_postgres::Object, ToolError> {
        self.pool.get().await.map_err(ToolError::transient)
    }
}

/// Lists the volumes that exist, with their sizes in GB.
#[tool]
async fn list_volumes(ctx: &Ctx<Ops>) -> Result<Value, ToolError> {
    let client = ctx.state.client().await?;
    let rows = client
        .query(
            "SELECT name, size_gb FROM volumes_volumes WHERE NOT deleted ORDER BY name",
            &[],
        )
        .await
        .map_err(ToolError::transient)?;
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
        .map_err(ToolError::transient)?;
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
    let client = ctx.state.client().await?;
    let row = client
        .query_opt(
            "SELECT 1 FROM volumes_volumes WHERE name = $1 AND NOT deleted",
            &[&args.name],
        )
        .await
        .map_err(ToolError::transient)?;
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
        .run()
}
