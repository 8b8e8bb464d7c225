//! [`App`]: the whole command line, for an application that has none of
//! its own.

use std::any::Any;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser};
use toolcall_core::{Dispatcher, DispatcherBuilder, JsonLinesAudit, Registry};

use crate::{Command, Context, Error, allowlist, every_tool, exit};

/// A whole command line for an application that has none of its own: the
/// [`Command`]s, with a few flags that set up the dispatcher.
///
/// The dispatcher keeps its memory for one run ([`MemoryStore`](toolcall_core::MemoryStore));
/// [`configure`](App::configure) changes its settings.
pub struct App<S> {
    name: &'static str,
    version: Option<&'static str>,
    registry: Registry,
    state: Arc<S>,
    configure: Option<Configure<S>>,
}

type Configure<S> = Box<dyn FnOnce(DispatcherBuilder<S>) -> DispatcherBuilder<S>>;

/// Tools behind toolcall's deterministic pipeline.
#[derive(Parser)]
struct AppCli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    common: CommonArgs,
}

/// The flags [`App`] adds to every command.
#[derive(Clone, Debug, Args)]
struct CommonArgs {
    /// The conversation's id: it scopes the step budget, the idempotency
    /// keys (replays), the loop guard, the taint of untrusted output and the
    /// pending approvals. `replay` runs in `default` without it. `mcp` runs
    /// every connection in it; without it, each connection is a
    /// conversation of its own, and a reconnect forgets all of that.
    #[arg(long, global = true)]
    session_id: Option<String>,
    /// The tools the caller may use, comma-separated (all of them when
    /// `--allow` is not given; given, it must name at least one).
    #[arg(long, value_name = "TOOL,...", value_delimiter = ',', global = true)]
    allow: Option<Vec<String>>,
    /// Append an audit record per call to this file, as JSON lines.
    #[arg(long, value_name = "FILE", global = true)]
    audit: Option<PathBuf>,
}

impl<S: Any + Send + Sync> App<S> {
    /// The command line named `name` (in `--help` and in error messages) for
    /// these tools over this state.
    pub fn new(name: &'static str, registry: Registry, state: Arc<S>) -> Self {
        App {
            name,
            version: None,
            registry,
            state,
            configure: None,
        }
    }

    /// The version `--version` prints: the application's, usually
    /// `env!("CARGO_PKG_VERSION")`. Without one there is no `--version`.
    pub fn version(mut self, version: &'static str) -> Self {
        self.version = Some(version);
        self
    }

    /// Adjusts the dispatcher before it is built: its settings, its policy's
    /// limits, its audit sink. `--allow` and `--audit` are applied first.
    pub fn configure(
        mut self,
        configure: impl FnOnce(DispatcherBuilder<S>) -> DispatcherBuilder<S> + 'static,
    ) -> Self {
        self.configure = Some(Box::new(configure));
        self
    }

    /// Parses the process's arguments and runs the command.
    pub fn run(self) -> ExitCode {
        let name = self.name;
        exit(name, self.run_from(std::env::args_os()))
    }

    /// Parses these arguments (the first is the program) and runs the
    /// command. `--help`, `--version` and a malformed command line are
    /// [`Error::Usage`], which [`exit`] prints as clap does.
    pub fn run_from<I, T>(self, args: I) -> Result<(), Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::CommandFactory as _;
        use clap::FromArgMatches as _;
        let mut command = AppCli::command().name(self.name).bin_name(self.name);
        if let Some(version) = self.version {
            command = command.version(version).propagate_version(true);
        }
        let cli = command
            .try_get_matches_from_mut(args)
            .and_then(|matches| AppCli::from_arg_matches(&matches))
            .map_err(|error| Error::Usage(error.format(&mut command)))?;
        let policy = match &cli.common.allow {
            Some(names) => allowlist(&self.registry, names)?,
            None => every_tool(&self.registry),
        };
        let runs_tools = cli.command.runs_tools();
        let mut builder = Dispatcher::builder(self.registry, self.state).policy(policy);
        if let Some(path) = cli.common.audit.as_ref().filter(|_| runs_tools) {
            let sink = JsonLinesAudit::open(path)
                .map_err(Error::io(format!("open {}", path.display())))?;
            builder = builder.audit(sink);
        }
        if let Some(configure) = self.configure {
            builder = configure(builder);
        }
        let dispatcher = builder.build().map_err(|e| Error::Input(e.to_string()))?;
        if !runs_tools {
            // The policy `configure` set, if any, is the one `definitions` follows.
            return cli
                .command
                .run_static(dispatcher.registry(), dispatcher.default_caller().policy());
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::io("start the async runtime"))?;
        let context = Context {
            program: self.name,
            session: cli.common.session_id.as_deref(),
            default_session: crate::DEFAULT_CONVERSATION,
            audit: cli.common.audit.as_deref(),
        };
        runtime.block_on(cli.command.run_in(&context, Arc::new(dispatcher)))
    }
}
