//! The command line an application gets from its toolcall registry.
//!
//! Eight subcommands, in [`Command`]:
//!
//! | command | needs | does |
//! |---|---|---|
//! | `definitions --format F [-o FILE] [--check]` | the registry | prints the tool definitions in a provider's format ([`Format`]); `--check` compares them with FILE and fails (exit 1) naming each difference |
//! | `replay [FILE]` | a dispatcher | runs a file of model calls through the pipeline, one conversation |
//! | `report AUDIT.jsonl [--json] [--rejected-calls FILE]` | the registry and the audit file (no store) | metrics from an audit log ([`report`](toolcall_contract::report)), the failing fields ([`rejected`](toolcall_contract::rejected)) |
//! | `report --verify AUDIT.jsonl [MORE.jsonl...] [--after HASH]` | the audit files | verifies the audit's hash chain ([`audit_chain`](toolcall_core::audit_chain)): exit 0 with the last hash, or exit 1 naming the first record changed, removed, inserted or reordered |
//! | `lock [--file tools.lock.json]` | the registry | writes the tools' contract ([`lock`](toolcall_contract::lock)) |
//! | `check [--file tools.lock.json]` | the registry | fails when a contract changed incompatibly |
//! | `mcp [--wait-approval SECS] [--elicitation-approves] [--pin-conversation]` | a dispatcher (feature `mcp`) | serves the tools over MCP on standard input and output: every connection in `--session-id`'s conversation, or each in its own without it; with `--pin-conversation`, a call that names another conversation in its `_meta` is refused |
//! | `mcp --http ADDR [--token-file PATH] [--allow-host HOST] [--allow-origin URL]` | a dispatcher (feature `http`) | the same server over MCP's streamable HTTP at `http://ADDR/mcp` (`toolcall_mcp::http`): each token's caller is the pipeline's caller; without tokens, loopback clients only; a non-loopback `ADDR` needs `--token-file` |
//! | `serve [--listen ADDR] [--token-file PATH]` | a dispatcher, its store shared (feature `inbox`) | the approval inbox (`toolcall-inbox`): a web page where a person decides the pending approvals of every process that shares the store |
//! | `agent --base-url URL [--model NAME] [--provider openai\|anthropic] [--yes] "PROMPT"` | a dispatcher (feature `agent`) | the whole agent loop against an OpenAI-compatible (or Anthropic-compatible) server, every tool call through the pipeline (the module `agent`, with the feature); `agent --serve-script FILE` serves a scripted model for it, with the registry alone (no store, no state) |
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
//! codes: 0 on success, 1 when `check` finds a breaking change, 3 when
//! `agent`'s model server cannot be used, 4 when its model made no answer
//! within `--max-turns`, 2 for every other error; errors go to standard
//! error ([`exit`]), as every notice does (where a server listens, the
//! conversation, warnings): standard output carries results only.
//!
//! # Features
//!
//! On by default: `mcp`, `http`, `inbox` and `postgres`, what most
//! applications run (MCP on standard input and output and over HTTP, the
//! approval inbox, a store the replicas share). Off by default, each asked
//! for by name because it pulls crates an application that does not use it
//! should not build: `sqlite` (SQLite, compiled from C), `oauth` (the JWT
//! crates), `agent` (an OpenAI client and reqwest) and `metrics`
//! (OpenTelemetry). An application that needs one names it:
//!
//! ```toml
//! toolcall-cli = { version = "0.1", features = ["sqlite", "oauth"] }
//! ```
//!
//! Without any (`default-features = false`) the crate pulls neither rmcp,
//! nor axum, nor a database driver.
//!
//! | feature | brings | without it |
//! |---|---|---|
//! | `mcp` (default) | `mcp` (rmcp, through `toolcall-mcp`) | `mcp` answers [`Error::MissingFeature`] |
//! | `http` (default; implies `mcp`) | `mcp --http` (axum, through `toolcall-mcp`'s `http`) | `mcp --http` answers [`Error::MissingFeature`] |
//! | `inbox` (default) | `serve` (axum, through `toolcall-inbox`) | `serve` answers [`Error::MissingFeature`] |
//! | `postgres` (default) | `--store postgres://...` (`toolcall-postgres`, TLS as `sslmode` asks) | the value is refused, naming the feature |
//! | `sqlite` (opt-in) | `--store sqlite:PATH` (`toolcall-sqlite`, SQLite bundled) | the value is refused, naming the feature |
//! | `oauth` (opt-in; implies `http`) | `mcp --http ADDR --oauth-issuer URL`: the server as an OAuth 2.1 resource server (jsonwebtoken, reqwest, through `toolcall-mcp`'s `oauth`) | `--oauth-issuer` answers [`Error::MissingFeature`] |
//! | `agent` (opt-in) | `agent` (async-openai, reqwest with rustls over ring, and axum for `--serve-script`) | `agent` answers [`Error::MissingFeature`] |
//! | `metrics` (opt-in) | the audit recorded as OpenTelemetry metrics (`toolcall-metrics`), and with `inbox` `serve`'s `GET /api/metrics` | no OpenTelemetry crate |
//!
//! The commands stay in [`Command`] whatever the features (an application's
//! `match` on it compiles under any of them); one whose feature is left out
//! is hidden from `--help` and answers an error naming the feature.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod admin;
#[cfg(feature = "agent")]
pub mod agent;
mod app;
mod args;
mod contract;
mod definitions;
mod error;
#[cfg(feature = "http")]
mod http;
mod output;
mod policy;
mod replay;
mod run;
#[cfg(feature = "inbox")]
mod serve;
mod store;

pub use app::App;
pub use args::{
    AdminCommand, AgentArgs, AgentProvider, Command, DefinitionsArgs, LockArgs, McpArgs,
    PolicyCommand, ReplayArgs, ReportArgs, ServeArgs, StopArgs,
};
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
    pub(crate) struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    /// Pays someone: one tool with a side effect, for the commands' tests.
    #[toolcall::tool(side_effect)]
    pub(crate) fn pay(
        /// Who gets the money.
        to: String,
    ) -> Result<serde_json::Value, toolcall::Rejection> {
        Ok(serde_json::json!({"to": to}))
    }

    /// The command `argv` parses to, which must parse.
    pub(crate) fn command(argv: &[&str]) -> Command {
        Cli::try_parse_from(argv).unwrap().command
    }

    #[test]
    fn serve_listens_on_loopback_unless_told_otherwise() {
        let Command::Serve(args) = command(&["app", "serve"]) else {
            panic!("not serve");
        };
        assert_eq!(args.listen, "127.0.0.1:8080".parse().unwrap());
        assert!(args.token_file.is_none());
        let Command::Serve(args) = command(&["app", "serve", "--listen", "0.0.0.0:9000"]) else {
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
        let Command::Replay(args) = command(&["app", "replay", "--wait-approval", "30"]) else {
            panic!("not replay");
        };
        assert_eq!(args.wait_approval, 30);
    }

    #[test]
    fn agent_takes_a_prompt_and_a_server_or_serves_a_script() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).map(|cli| cli.command);
        let Command::Agent(args) = parse(&[
            "app",
            "agent",
            "--base-url",
            "http://127.0.0.1:8080/v1",
            "--provider",
            "anthropic",
            "--yes",
            "Refund ORD-1001",
        ])
        .unwrap() else {
            panic!("not agent");
        };
        assert_eq!(args.provider, AgentProvider::Anthropic);
        assert_eq!(args.prompt.as_deref(), Some("Refund ORD-1001"));
        assert_eq!((args.max_turns, args.yes, args.model), (10, true, None));
        let Command::Agent(args) = parse(&["app", "agent", "--serve-script", "s.json"]).unwrap()
        else {
            panic!("not agent");
        };
        assert_eq!(args.listen, None, "127.0.0.1:8090");
        let command = Command::Agent(args);
        assert!(
            !command.runs_tools(),
            "a scripted model runs no tool: no store, no state"
        );
        assert_eq!(command.conversation_line(None, "default"), None);
        for refused in [
            &["app", "agent", "Hi"][..],
            &["app", "agent", "--base-url", "http://x/v1"],
            &[
                "app",
                "agent",
                "--base-url",
                "http://x/v1",
                "--max-turns",
                "0",
                "Hi",
            ],
            &["app", "agent", "--serve-script", "s.json", "Hi"],
        ] {
            let Err(error) = parse(refused) else {
                panic!("accepted: {refused:?}");
            };
            assert_eq!(error.exit_code(), 2, "{refused:?}");
        }
    }

    #[test]
    fn mcp_may_wait_for_an_approval() {
        let Command::Mcp(args) = command(&["app", "mcp"]) else {
            panic!("not mcp");
        };
        assert_eq!(args.wait_approval, 0, "it answers at once by default");
        let Command::Mcp(args) = command(&["app", "mcp", "--wait-approval", "120"]) else {
            panic!("not mcp");
        };
        assert_eq!(args.wait_approval, 120);
        assert!(Command::Mcp(args).runs_tools());
        assert!(Cli::try_parse_from(["app", "mcp", "--wait-approval", "soon"]).is_err());
    }

    #[test]
    fn in_inbox_mode_elicitation_approves_only_when_asked() {
        let Command::Mcp(args) = command(&["app", "mcp"]) else {
            panic!("not mcp");
        };
        assert!(!args.elicitation_approves);
        let Command::Mcp(args) = command(&["app", "mcp", "--elicitation-approves"]) else {
            panic!("not mcp");
        };
        assert!(args.elicitation_approves);
    }

    #[test]
    fn replay_and_mcp_say_which_conversation_they_run_in() {
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
        let agent = command(&["app", "agent", "--base-url", "http://127.0.0.1:1/v1", "Hi"]);
        assert_eq!(
            agent.missing_feature(),
            (!cfg!(feature = "agent")).then_some("agent")
        );
        if !cfg!(feature = "agent") {
            let app = App::new("shop", Registry::default(), Arc::new(()));
            let error = app
                .run_from(["shop", "agent", "--base-url", "http://127.0.0.1:1/v1", "Hi"])
                .unwrap_err();
            assert_eq!(
                (error.exit_code(), error.to_string()),
                (
                    2,
                    "`agent` is not in this build: it needs toolcall-cli's `agent` feature"
                        .to_owned()
                )
            );
        }
        let http = command(&["app", "mcp", "--http", "127.0.0.1:0"]);
        assert_eq!(
            http.missing_feature(),
            if !cfg!(feature = "mcp") {
                Some("mcp")
            } else {
                (!cfg!(feature = "http")).then_some("http")
            }
        );
        // `oauth` is opt-in: a default build names it for `--oauth-issuer`.
        let given = [
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--oauth-issuer",
            "https://auth.example.com",
            "--oauth-audience",
            "https://mcp.example.com/mcp",
        ];
        let oauth = command(&[["app"].as_slice(), &given].concat());
        let expected = if !cfg!(feature = "mcp") {
            Some("mcp")
        } else if !cfg!(feature = "http") {
            Some("http")
        } else {
            (!cfg!(feature = "oauth")).then_some("oauth")
        };
        assert_eq!(oauth.missing_feature(), expected);
        if cfg!(all(feature = "http", not(feature = "oauth"))) {
            let app = App::new("shop", Registry::default(), Arc::new(()));
            let error = app
                .run_from([["shop"].as_slice(), &given].concat())
                .unwrap_err();
            assert_eq!(
                (error.exit_code(), error.to_string()),
                (
                    2,
                    "`mcp --oauth-issuer` is not in this build: it needs toolcall-cli's `oauth` \
                     feature"
                        .to_owned()
                )
            );
        }
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

    /// Without the `http` feature (and with `mcp`), `mcp --http` is an
    /// error naming the feature, exit 2.
    #[cfg(all(feature = "mcp", not(feature = "http")))]
    #[test]
    fn mcp_http_without_its_feature_names_the_feature() {
        let app = App::new("shop", Registry::default(), Arc::new(()));
        let error = app
            .run_from(["shop", "mcp", "--http", "127.0.0.1:0"])
            .unwrap_err();
        assert_eq!(
            (error.exit_code(), error.to_string()),
            (
                2,
                "`mcp --http` is not in this build: it needs toolcall-cli's `http` feature"
                    .to_owned()
            )
        );
    }

    /// `--token-file`, `--allow-host` and `--allow-origin` mean something
    /// only with `--http`: without it, a usage error.
    #[cfg(feature = "mcp")]
    #[test]
    fn the_http_flags_need_http() {
        for flag in [
            ["--token-file", "tokens"],
            ["--allow-host", "mcp.example.com"],
            ["--allow-origin", "https://console.example.com"],
        ] {
            let parsed = Cli::try_parse_from(["app", "mcp", flag[0], flag[1]]);
            let error = parsed.err().expect("refused without --http");
            assert_eq!(error.exit_code(), 2);
            assert!(error.to_string().contains("--http"), "{error}");
        }
        let Command::Mcp(args) = command(&[
            "app",
            "mcp",
            "--http",
            "127.0.0.1:8808",
            "--allow-host",
            "a.example",
            "--allow-host",
            "b.example:443",
            "--allow-origin",
            "https://console.example.com",
        ]) else {
            panic!("not mcp");
        };
        assert_eq!(args.http, Some("127.0.0.1:8808".parse().unwrap()));
        assert_eq!(args.allow_host, ["a.example", "b.example:443"]);
        assert_eq!(args.allow_origin, ["https://console.example.com"]);
    }

    /// A non-loopback `--http` without tokens, a token file that cannot be
    /// used, and a token for a caller the application does not know are
    /// refused before anything listens (exit 2).
    #[cfg(feature = "http")]
    #[test]
    fn mcp_http_refuses_what_it_cannot_serve_safely() {
        use toolcall_core::{Caller, Policy};

        let run = |args: &[&str]| {
            let app = App::new("shop", Registry::default(), Arc::new(()))
                .callers([Caller::new("auditor", Policy::new())]);
            let error = app.run_from(args.iter().copied()).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{error}");
            error.to_string()
        };
        let open = run(&["shop", "mcp", "--http", "0.0.0.0:8808"]);
        assert!(
            open.starts_with("--http 0.0.0.0:8808 is not a loopback address")
                && open.contains("--token-file"),
            "{open}"
        );
        let v6 = run(&["shop", "mcp", "--http", "[2001:db8::1]:8808"]);
        assert!(v6.contains("is not a loopback address"), "{v6}");

        let dir = std::env::temp_dir().join(format!("toolcall-cli-mcp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Each refusal names what is wrong with the file, never its token.
        for (name, tokens, says, token) in [
            (
                "unknown",
                "agent-7 token-of-agent-7-0123456789\n",
                "the caller `agent-7` is not one this application knows",
                "token-of-agent-7",
            ),
            (
                "short",
                "auditor too-short\n",
                "line 1: a token needs at least 16 characters",
                "too-short",
            ),
        ] {
            let file = dir.join(name);
            std::fs::write(&file, tokens).unwrap();
            let error = run(&[
                "shop",
                "mcp",
                "--http",
                "127.0.0.1:0",
                "--token-file",
                file.to_str().unwrap(),
            ]);
            assert!(
                error.contains(says) && !error.contains(token),
                "{name}: {error}"
            );
        }
        let error = run(&[
            "shop",
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--allow-origin",
            "console.example.com",
        ]);
        assert!(error.contains("console.example.com"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The bound address's own host is allowed for a real non-loopback
    /// bind, not for loopback (already allowed) nor for 0.0.0.0 (no
    /// client names it).
    #[cfg(feature = "http")]
    #[test]
    fn a_non_loopback_bind_allows_its_own_host() {
        let args = McpArgs {
            token_file: None,
            ..McpArgs::default()
        };
        let hosts = |addr: &str, args: &McpArgs| {
            http::http_options("app", args, addr.parse().unwrap())
                .map(|options| options.allowed_hosts)
        };
        assert_eq!(
            hosts("127.0.0.1:8808", &args).unwrap(),
            Vec::<String>::new()
        );
        let dir = std::env::temp_dir().join(format!("toolcall-cli-hosts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens");
        std::fs::write(&file, "default token-of-the-desk-0123456789\n").unwrap();
        let with_tokens = McpArgs {
            token_file: Some(file),
            allow_host: vec!["mcp.example.com".to_owned()],
            ..McpArgs::default()
        };
        assert_eq!(
            hosts("10.0.0.7:8808", &with_tokens).unwrap(),
            ["mcp.example.com", "10.0.0.7"]
        );
        assert_eq!(
            hosts("[2001:db8::1]:8808", &with_tokens).unwrap(),
            ["mcp.example.com", "[2001:db8::1]"]
        );
        assert_eq!(
            hosts("0.0.0.0:8808", &with_tokens).unwrap(),
            ["mcp.example.com"]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `--max-sessions-per-caller` reaches the server's options; a bound
    /// of 0, or either bound without `--http`, is refused by the parser.
    #[cfg(feature = "http")]
    #[test]
    fn the_servers_bounds_are_read_and_zero_is_refused() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Line {
            #[command(subcommand)]
            command: Command,
        }
        let parse = |line: &str| Line::try_parse_from(line.split_whitespace());
        let Line {
            command: Command::Mcp(args),
        } = parse("app mcp --http 127.0.0.1:0 --max-sessions-per-caller 3 --max-connections 9")
            .unwrap()
        else {
            panic!("mcp")
        };
        assert_eq!(
            (args.max_sessions_per_caller, args.max_connections),
            (Some(3), Some(9))
        );
        let options = http::http_options("app", &args, "127.0.0.1:0".parse().unwrap()).unwrap();
        assert_eq!(options.max_sessions_per_caller, 3);
        for bad in [
            "app mcp --http 127.0.0.1:0 --max-connections 0",
            "app mcp --http 127.0.0.1:0 --max-sessions-per-caller 0",
            "app mcp --max-connections 5",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
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
