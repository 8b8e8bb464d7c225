//! [`App`]: the whole command line, for an application that has none of
//! its own.

use std::any::Any;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser};
use toolcall_core::store::Store;
use toolcall_core::{Caller, Dispatcher, DispatcherBuilder, JsonLinesAudit, Policy, Registry};

use crate::policy::parse_limit;
use crate::{Command, Context, Error, StoreSpec, WithStore, exit, narrow};

/// A whole command line for an application that has none of its own: the
/// [`Command`]s, with a few flags that set up the dispatcher.
///
/// **The code's policy is the ceiling.** The application gives its
/// default caller's policy with [`policy`](App::policy) (or sets it in
/// [`configure`](App::configure), which counts the same), and its other
/// callers with [`callers`](App::callers). The command line can only narrow
/// the policy of the caller a command runs as (the default one, or
/// `--caller`'s): `--allow` keeps some of the tools the code allows, and
/// `--limit NAME=VALUE` lowers a limit the code sets. A tool the code does
/// not allow, a limit it does not set, or a value above the code's, is an
/// error (exit code 2) naming what the code allows. The other callers keep
/// the code's policy: no command runs as them in this process, and the
/// inbox (`serve`) decides their calls' approvals as the code set them.
/// Without a policy, the default caller may call every tool and sets no
/// limit (so a tool that declares one answers `POLICY_LIMIT`, and says so
/// at start).
///
/// **The store** is `--store`'s (`memory`, the default, `sqlite:PATH` or a
/// `postgres://` URL: [`StoreSpec`]), for `replay`, `mcp` and `serve`, so
/// that several processes (an agent's `mcp`, a person's `serve`) share the
/// calls, replays and approvals.
///
/// **The warnings** of the dispatcher's build
/// ([`Dispatcher::warnings`](toolcall_core::Dispatcher::warnings): a limit
/// an allowed tool declares and the caller's policy does not set) are
/// printed on standard error when `replay`, `mcp` or `serve` starts, one
/// line each with its fix, unless `--quiet`.
///
/// ```no_run
/// use std::process::ExitCode;
/// use std::sync::Arc;
/// use toolcall_core::{Caller, Policy};
///
/// # struct Bank;
/// # fn registry() -> toolcall_core::Registry { toolcall_core::Registry::default() }
/// fn main() -> ExitCode {
///     toolcall_cli::App::new("bank", registry(), Arc::new(Bank))
///         .policy(
///             Policy::new()
///                 .allow(["get_balance", "transfer_money"])
///                 .limit("max_transfer_cents", 100_000),
///         )
///         .callers([Caller::new(
///             "auditor",
///             Policy::new().allow(["get_balance"]),
///         )])
///         .run()
/// }
/// ```
pub struct App<S> {
    name: &'static str,
    version: Option<&'static str>,
    registry: Registry,
    state: Arc<S>,
    policy: Option<Policy>,
    callers: Vec<Caller>,
    configure: Option<Configure<S>>,
}

type Configure<S> = Box<dyn Fn(DispatcherBuilder<S>) -> DispatcherBuilder<S>>;

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
    /// The caller the command runs as: one the application names in its
    /// code (`default` unless told otherwise). `--allow` and `--limit`
    /// narrow its policy.
    #[arg(long, value_name = "ID", global = true)]
    caller: Option<String>,
    /// Narrows the tools the caller may use to these, comma-separated: each
    /// must be one the application's code allows it (an error names them).
    /// Without it, the caller may use all of those.
    #[arg(long, value_name = "TOOL,...", value_delimiter = ',', global = true)]
    allow: Option<Vec<String>>,
    /// Lowers a limit the application's code sets for the caller
    /// (`max_transfer_cents=5000`); repeat it, or separate with commas. It
    /// can only lower: a limit the code does not set, or a value above the
    /// code's, is an error naming the code's limits.
    #[arg(long, value_name = "NAME=VALUE", value_delimiter = ',', value_parser = parse_limit, global = true)]
    limit: Vec<(String, i64)>,
    /// Where the pipeline remembers calls (claims, completed side effects
    /// to replay, pending approvals), for `replay`, `mcp` and `serve`:
    /// `memory` (this process only), `sqlite:PATH` (a file every process on
    /// this machine shares) or a `postgres://` URL (a database replicas
    /// share). `definitions`, `lock`, `check` and `report` (which reads its
    /// audit file only) open no store.
    #[arg(
        long,
        value_name = "memory|sqlite:PATH|postgres://...",
        default_value = "memory",
        global = true
    )]
    store: StoreSpec,
    /// Append an audit record per call to this file, as JSON lines.
    #[arg(long, value_name = "FILE", global = true)]
    audit: Option<PathBuf>,
    /// Print no warnings at start (a limit the code does not set for an
    /// allowed tool, so that each of its calls is POLICY_LIMIT).
    #[arg(long, short, global = true)]
    quiet: bool,
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
            policy: None,
            callers: Vec::new(),
            configure: None,
        }
    }

    /// The version `--version` prints: the application's, usually
    /// `env!("CARGO_PKG_VERSION")`. Without one there is no `--version`.
    pub fn version(mut self, version: &'static str) -> Self {
        self.version = Some(version);
        self
    }

    /// The default caller's policy (caller id `default`): the tools it may
    /// call and its limits. It is the ceiling: `--allow` and `--limit`
    /// narrow it, never widen it. Without it (and without one set in
    /// [`configure`](Self::configure)), the default caller may call every
    /// tool and sets no limit.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Other callers, each with its own policy, besides those given before.
    /// `--caller ID` runs a command as one of them, its policy the ceiling
    /// `--allow` and `--limit` narrow; the build checks each against the
    /// tools, and warns of each limit one does not set.
    pub fn callers(mut self, callers: impl IntoIterator<Item = Caller>) -> Self {
        self.callers.extend(callers);
        self
    }

    /// Adjusts the dispatcher before it is built: its settings, its audit
    /// sink, its messages. `--audit` is applied first, so an audit sink set
    /// here wins. A policy set here (`builder.policy(...)` or
    /// `builder.caller(...)`) is the default caller's, a ceiling like
    /// [`policy`](Self::policy)'s: the command line narrows it after. To
    /// read that policy, the function is called twice (once to build a
    /// dispatcher it reads the policy from, once to build the one that
    /// runs): keep it free of side effects. Give other callers with
    /// [`callers`](Self::callers), not here, to run as them with `--caller`.
    pub fn configure(
        mut self,
        configure: impl Fn(DispatcherBuilder<S>) -> DispatcherBuilder<S> + 'static,
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
        let common = &cli.common;

        // The code's policies, as the code builds them: the ceiling.
        let code = self.builder(None, None)?.build().map_err(build_error)?;
        let caller_id = common
            .caller
            .as_deref()
            .unwrap_or_else(|| code.default_caller().id());
        let Some(ceiling) = code.caller(caller_id) else {
            let mut known = vec![code.default_caller().id()];
            known.extend(self.callers.iter().map(Caller::id));
            return Err(Error::Input(format!(
                "--caller `{caller_id}` is no caller of {}: the callers are {}",
                self.name,
                known.join(", ")
            )));
        };
        let policy = narrow(
            &self.registry,
            ceiling,
            common.allow.as_deref(),
            &common.limit,
        )?;
        let runs_as = Caller::new(caller_id, policy);
        if !cli.command.runs_tools() {
            return cli.command.run_static(&self.registry, runs_as.policy());
        }
        if let Some(error) = cli.command.missing_feature_error() {
            return Err(error);
        }
        // Its default caller aside, a caller the code gave in `configure`
        // cannot be replaced by its narrowed self.
        let from_app = caller_id == code.default_caller().id()
            || self.callers.iter().any(|c| c.id() == caller_id);
        if !from_app && runs_as != *ceiling {
            return Err(Error::Input(format!(
                "--caller `{caller_id}` was given in configure: give it with App::callers to \
                 narrow its policy"
            )));
        }
        let default = code.default_caller().clone();
        let builder = self.builder(Some(&runs_as), common.audit.as_ref())?;
        let builder = builder.caller(runs_as.clone());
        let builder = if caller_id == default.id() {
            builder
        } else {
            builder.callers([default])
        };
        let runtime = cli
            .command
            .runtime()
            .map_err(Error::io("start the async runtime"))?;
        let run = Run {
            program: self.name,
            builder,
            command: &cli.command,
            session: common.session_id.as_deref(),
            audit: common.audit.as_deref(),
            quiet: common.quiet,
        };
        runtime.block_on(async { common.store.open(run).await? })
    }

    /// The dispatcher as the code sets it up: the policy, the callers,
    /// `--audit`'s sink, then `configure`. With `runs_as`, the callers leave
    /// out the one of its id (the caller replaces it).
    fn builder(
        &self,
        runs_as: Option<&Caller>,
        audit: Option<&PathBuf>,
    ) -> Result<DispatcherBuilder<S>, Error> {
        let mut builder = Dispatcher::builder(self.registry.clone(), Arc::clone(&self.state));
        if let Some(policy) = &self.policy {
            builder = builder.policy(policy.clone());
        }
        let others = self
            .callers
            .iter()
            .filter(|caller| runs_as.is_none_or(|runs_as| caller.id() != runs_as.id()))
            .cloned();
        builder = builder.callers(others);
        if let Some(path) = audit {
            let sink = JsonLinesAudit::open(path)
                .map_err(Error::io(format!("open {}", path.display())))?;
            builder = builder.audit(sink);
        }
        if let Some(configure) = &self.configure {
            builder = configure(builder);
        }
        Ok(builder)
    }
}

fn build_error(error: toolcall_core::BuildError) -> Error {
    Error::Input(error.to_string())
}

/// A command that runs tools, once the store is open.
struct Run<'a, S> {
    program: &'static str,
    builder: DispatcherBuilder<S>,
    command: &'a Command,
    session: Option<&'a str>,
    audit: Option<&'a std::path::Path>,
    quiet: bool,
}

impl<S: Any + Send + Sync> WithStore for Run<'_, S> {
    type Output = Result<(), Error>;

    async fn with_store<St: Store + 'static>(
        self,
        store: St,
        _spec: &StoreSpec,
    ) -> Result<(), Error> {
        let dispatcher = self.builder.store(store).build().map_err(build_error)?;
        if !self.quiet {
            let mut stderr = std::io::stderr().lock();
            for warning in dispatcher.warnings() {
                let _ = writeln!(stderr, "{}: warning: {warning}", self.program);
            }
        }
        let context = Context {
            program: self.program,
            session: self.session,
            default_session: crate::DEFAULT_CONVERSATION,
            audit: self.audit,
        };
        self.command.run_in(&context, Arc::new(dispatcher)).await
    }
}
