//! The command line an application gets from its toolcall registry.
//!
//! Seven subcommands, in [`Command`]:
//!
//! | command | needs | does |
//! |---|---|---|
//! | `definitions --format F [-o FILE] [--check]` | the registry | prints the tool definitions in a provider's format ([`Format`]); `--check` compares them with FILE and fails (exit 1) naming each difference |
//! | `replay [FILE]` | a dispatcher | runs a file of model calls through the pipeline, one conversation |
//! | `report AUDIT.jsonl [--json] [--rejected-calls FILE]` | the registry and the audit file (no store) | metrics from an audit log ([`report`](toolcall_contract::report)), the failing fields ([`rejected`](toolcall_contract::rejected)) |
//! | `lock [--file tools.lock.json]` | the registry | writes the tools' contract ([`lock`](toolcall_contract::lock)) |
//! | `check [--file tools.lock.json]` | the registry | fails when a contract changed incompatibly |
//! | `mcp [--wait-approval SECS] [--elicitation-approves]` | a dispatcher (feature `mcp`) | serves the tools over MCP on standard input and output: every connection in `--session-id`'s conversation, or each in its own without it |
//! | `serve [--listen ADDR] [--token-file PATH]` | a dispatcher, its store shared (feature `inbox`) | the approval inbox (`toolcall-inbox`): a web page where a person decides the pending approvals of every process that shares the store |
//!
//! An application with no command line of its own takes all of it from
//! [`App`]. Its code's policy is the ceiling: `--allow TOOL,...` and
//! `--limit NAME=VALUE` narrow the caller a command runs as (the default
//! one, or `--caller ID`'s), and an error (exit 2) names what the code
//! allows when they would widen it ([`narrow`]). `--store` names the store
//! `replay`, `mcp` and `serve` share with other processes ([`StoreSpec`]);
//! the dispatcher's build warnings are printed on standard error at start,
//! unless `--quiet`.
//!
//! ```no_run
//! use std::process::ExitCode;
//! use std::sync::Arc;
//! use toolcall_core::Policy;
//!
//! # struct Shop;
//! # fn registry() -> toolcall_core::Registry { toolcall_core::Registry::default() }
//! fn main() -> ExitCode {
//!     // `toolcall::tools![get_order, refund_order]` in a real application.
//!     let registry = registry();
//!     toolcall_cli::App::new("shop", registry, Arc::new(Shop))
//!         .policy(
//!             Policy::new()
//!                 .allow(["get_order", "refund_order"])
//!                 .limit("max_refund_cents", 50_000),
//!         )
//!         .run()
//! }
//! ```
//!
//! An application that has its own [clap] parser puts [`Command`] among its
//! subcommands, runs the registry-only ones with [`Command::run_static`] and
//! the others with [`Command::run`] once it has built its dispatcher, over
//! the store a [`StoreSpec`] opened (the `orders` example does this). Exit
//! codes: 0 on success, 1 when `check` finds a breaking change, 2 for every
//! other error; errors go to standard error ([`exit`]).
//!
//! # Features
//!
//! All on by default. Without them (`default-features = false`) the crate
//! pulls neither rmcp, nor axum, nor a database driver.
//!
//! | feature | brings | without it |
//! |---|---|---|
//! | `mcp` | `mcp` (rmcp, through `toolcall-mcp`) | `mcp` answers [`Error::MissingFeature`] |
//! | `inbox` | `serve` (axum, through `toolcall-inbox`) | `serve` answers [`Error::MissingFeature`] |
//! | `sqlite` | `--store sqlite:PATH` (`toolcall-sqlite`, SQLite bundled) | the value is refused, naming the feature |
//! | `postgres` | `--store postgres://...` (`toolcall-postgres`) | the value is refused, naming the feature |
//!
//! The commands stay in [`Command`] whatever the features (an application's
//! `match` on it compiles under any of them); one whose feature is left out
//! is hidden from `--help` and answers an error naming the feature.

mod app;
mod args;
mod contract;
mod definitions;
mod error;
mod output;
mod policy;
mod replay;
mod run;
#[cfg(feature = "inbox")]
mod serve;
mod store;

pub use app::App;
pub use args::{Command, DefinitionsArgs, LockArgs, McpArgs, ReplayArgs, ReportArgs, ServeArgs};
pub use error::{Error, exit};
pub use policy::{allowlist, every_tool, narrow};
pub use run::{Context, DEFAULT_CONVERSATION};
pub use store::{StoreSpec, StoreSpecError, WithStore};
pub use toolcall_providers::Format;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use clap::Parser;
    use toolcall_core::Registry;

    use super::*;
    use crate::replay::ReplayLine;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[test]
    fn serve_listens_on_loopback_unless_told_otherwise() {
        let Command::Serve(args) = Cli::try_parse_from(["app", "serve"]).unwrap().command else {
            panic!("not serve");
        };
        assert_eq!(args.listen, "127.0.0.1:8080".parse().unwrap());
        assert!(args.token_file.is_none());
        let Command::Serve(args) =
            Cli::try_parse_from(["app", "serve", "--listen", "0.0.0.0:9000"])
                .unwrap()
                .command
        else {
            panic!("not serve");
        };
        assert!(!args.listen.ip().is_loopback());
        assert!(Command::Serve(args).runs_tools(), "it needs the store");
    }

    #[test]
    fn a_replay_line_brings_an_approval_id_and_replay_may_wait() {
        let line: ReplayLine<'_> =
            serde_json::from_str(r#"{"tool": "refund_order", "approval": "3f2a"}"#).unwrap();
        assert_eq!(line.approval.as_deref(), Some("3f2a"));
        let Command::Replay(args) = Cli::try_parse_from(["app", "replay", "--wait-approval", "30"])
            .unwrap()
            .command
        else {
            panic!("not replay");
        };
        assert_eq!(args.wait_approval, 30);
    }

    #[test]
    fn mcp_may_wait_for_an_approval() {
        let Command::Mcp(args) = Cli::try_parse_from(["app", "mcp"]).unwrap().command else {
            panic!("not mcp");
        };
        assert_eq!(args.wait_approval, 0, "it answers at once by default");
        let Command::Mcp(args) = Cli::try_parse_from(["app", "mcp", "--wait-approval", "120"])
            .unwrap()
            .command
        else {
            panic!("not mcp");
        };
        assert_eq!(args.wait_approval, 120);
        assert!(Command::Mcp(args).runs_tools());
        assert!(Cli::try_parse_from(["app", "mcp", "--wait-approval", "soon"]).is_err());
    }

    #[test]
    fn in_inbox_mode_elicitation_approves_only_when_asked() {
        let Command::Mcp(args) = Cli::try_parse_from(["app", "mcp"]).unwrap().command else {
            panic!("not mcp");
        };
        assert!(!args.elicitation_approves);
        let Command::Mcp(args) = Cli::try_parse_from(["app", "mcp", "--elicitation-approves"])
            .unwrap()
            .command
        else {
            panic!("not mcp");
        };
        assert!(args.elicitation_approves);
    }

    #[test]
    fn replay_and_mcp_say_which_conversation_they_run_in() {
        let command = |args: &[&str]| Cli::try_parse_from(args).unwrap().command;
        let mcp = command(&["app", "mcp"]);
        let per_connection = mcp.conversation_line(None, "default").unwrap();
        assert!(
            per_connection
                .starts_with("conversation: per connection (no --session-id: a reconnect forgets"),
            "{per_connection}"
        );
        assert_eq!(
            mcp.conversation_line(Some("desk-42"), "default").unwrap(),
            "conversation: desk-42 (--session-id: every connection, and every process over the \
             same store)"
        );
        let replay = command(&["app", "replay"]);
        assert_eq!(
            replay.conversation_line(None, "default").unwrap(),
            "conversation: default (default; --session-id names another)"
        );
        assert_eq!(
            replay.conversation_line(Some("s1"), "default").unwrap(),
            "conversation: s1 (--session-id)"
        );
        for line in [
            per_connection,
            replay.conversation_line(None, "default").unwrap(),
        ] {
            assert!(!line.contains('\n'), "one line: {line}");
        }
        let lock = command(&["app", "lock"]);
        assert_eq!(lock.conversation_line(Some("s1"), "default"), None);
    }

    /// A command or a store whose feature this build leaves out answers an
    /// error naming the feature; with the feature, it is there.
    #[test]
    fn a_command_or_store_without_its_feature_names_the_feature() {
        let command = |args: &[&str]| Cli::try_parse_from(args).unwrap().command;
        let mcp = command(&["app", "mcp"]);
        let serve = command(&["app", "serve"]);
        assert_eq!(
            mcp.missing_feature(),
            (!cfg!(feature = "mcp")).then_some("mcp")
        );
        assert_eq!(
            serve.missing_feature(),
            (!cfg!(feature = "inbox")).then_some("inbox")
        );
        assert_eq!(command(&["app", "replay"]).missing_feature(), None);
        let sqlite = "sqlite:bank.db".parse::<StoreSpec>();
        if cfg!(feature = "sqlite") {
            assert_eq!(sqlite.unwrap(), StoreSpec::Sqlite("bank.db".into()));
        } else {
            assert_eq!(
                sqlite.unwrap_err().to_string(),
                "the store `sqlite:bank.db` needs toolcall-cli's `sqlite` feature, which this \
                 build leaves out: use `memory`, or build with the feature"
            );
        }
        if !cfg!(feature = "mcp") {
            let app = App::new("shop", Registry::default(), Arc::new(()));
            let error = app.run_from(["shop", "mcp"]).unwrap_err();
            assert_eq!(
                (error.exit_code(), error.to_string()),
                (
                    2,
                    "`mcp` is not in this build: it needs toolcall-cli's `mcp` feature".to_owned()
                )
            );
        }
    }

    #[cfg(feature = "inbox")]
    #[test]
    fn serve_refuses_a_token_file_it_cannot_use() {
        let dir = std::env::temp_dir().join(format!("toolcall-cli-serve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens");
        std::fs::write(&file, "too-short\n").unwrap();
        let app = App::new("shop", Registry::default(), Arc::new(()));
        let error = app
            .run_from([
                "shop",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                file.to_str().unwrap(),
            ])
            .unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(
            error.to_string().contains("at least 16 characters"),
            "{error}"
        );
    }
}
