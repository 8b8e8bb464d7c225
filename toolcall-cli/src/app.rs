//! [`App`]: the whole command line, for an application that has none of
//! its own.

use std::any::Any;
use std::fmt::Display;
use std::future::Future;
use std::io::Write as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, ValueEnum};
use toolcall_core::store::Store;
use toolcall_core::{
    Approvals, Caller, Dispatcher, DispatcherBuilder, JsonLinesAudit, Policy, Registry, Settings,
};

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
/// **The state** is given to [`new`](App::new), or built from the store by
/// [`from_store`](App::from_store): inside the command's runtime, once the
/// command line is read, from `--store`'s [`StoreSpec`], so that the
/// application's own tables can live in the same database; `definitions`,
/// `lock`, `check`, `report` and `agent --serve-script` build none and need
/// no database.
///
/// **Results go to standard output, notices to standard error**: what a
/// command produces (definitions, answers, metrics, a transcript) is
/// written to standard output; where a server listens, the conversation,
/// warnings and errors, to standard error.
///
/// **The pipeline's settings** are the code's ([`configure`](App::configure)),
/// and the command line narrows them as it narrows the policy: `--max-steps`,
/// `--max-retries` and `--max-duplicate-calls` may lower the code's value,
/// and `--approvals inbox` makes only a person's decision in the store
/// approve; `--approvals host` where the code says `inbox`, or a value above
/// the code's, is an error (exit code 2) naming the code's.
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
    about: Option<&'static str>,
    state: StateSource<S>,
    code: Code<S>,
}

/// What the code sets up: the tools, the policies and the dispatcher's
/// adjustments.
struct Code<S> {
    registry: Registry,
    policy: Option<Policy>,
    callers: Vec<Caller>,
    /// What [`App::part`] was given: each adds its part to a builder.
    parts: Vec<Configure<S>>,
    configure: Option<Configure<S>>,
}

type Configure<S> = Box<dyn Fn(DispatcherBuilder<S>) -> DispatcherBuilder<S>>;

/// A state being built: its future, boxed, on the command's runtime.
type Building<S> = Pin<Box<dyn Future<Output = Result<Arc<S>, Error>>>>;

/// Where the state comes from.
enum StateSource<S> {
    /// Given to [`App::new`].
    Ready(Arc<S>),
    /// Built from `--store` by [`App::from_store`]'s function, once.
    FromStore(Box<dyn FnOnce(StoreSpec) -> Building<S>>),
}

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
    #[command(flatten)]
    pipeline: PipelineArgs,
}

/// The pipeline's settings the command line may narrow.
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Pipeline")]
struct PipelineArgs {
    /// Tool calls allowed in a conversation: at most the code's (10 unless
    /// the application sets it).
    #[arg(long, value_name = "N", global = true)]
    max_steps: Option<u64>,
    /// Times one exact call may be made before LOOP_DETECTED: at most the
    /// code's.
    #[arg(long, value_name = "N", global = true)]
    max_duplicate_calls: Option<u64>,
    /// Retries after a transient failure (never of an unknown outcome): at
    /// most the code's.
    #[arg(long, value_name = "N", global = true)]
    max_retries: Option<u32>,
    /// Who approves a high-risk call: `inbox`, only a person's decision in
    /// the store; `host`, also the host's `confirmed` (only where the code
    /// says `host`).
    #[arg(long, value_enum, global = true)]
    approvals: Option<ApprovalsArg>,
    /// How long a person has to decide a question, and the call to be
    /// carried out once approved, in seconds (the application's otherwise:
    /// 900 unless it sets it). A question whether an earlier attempt took
    /// effect never expires.
    #[arg(long, value_name = "SECONDS", value_parser = parse_ttl, global = true)]
    approval_ttl: Option<u64>,
    /// How long a denial (or an edit) answers the identical calls, from the
    /// decision, in seconds (the application's otherwise: 86400, a day,
    /// unless it sets it).
    #[arg(long, value_name = "SECONDS", value_parser = parse_ttl, global = true)]
    denial_ttl: Option<u64>,
}

/// A TTL in whole seconds: from 1 second to 30 days.
fn parse_ttl(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(seconds) if (1..=30 * 86_400).contains(&seconds) => Ok(seconds),
        _ => Err(format!(
            "`{text}` is no time to live: write whole seconds, from 1 to 2592000 (30 days)"
        )),
    }
}

/// `--approvals`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ApprovalsArg {
    /// The host's `confirmed` approves too.
    Host,
    /// Only a person's decision recorded in the store approves.
    Inbox,
}

impl PipelineArgs {
    /// The code's settings narrowed by these flags, or an error naming the
    /// code's value a flag would raise.
    fn narrow(&self, code: &Settings) -> Result<Settings, Error> {
        fn at_most<T: PartialOrd + Copy + Display>(
            flag: &str,
            given: Option<T>,
            code: T,
        ) -> Result<T, Error> {
            match given {
                Some(value) if value > code => Err(Error::Input(format!(
                    "--{flag} {value} is above the application's {code}: the command line can \
                     only lower it"
                ))),
                Some(value) => Ok(value),
                None => Ok(code),
            }
        }
        let mut settings = code.clone();
        settings.max_steps = at_most("max-steps", self.max_steps, code.max_steps)?;
        settings.max_duplicate_calls = at_most(
            "max-duplicate-calls",
            self.max_duplicate_calls,
            code.max_duplicate_calls,
        )?;
        settings.max_retries = at_most("max-retries", self.max_retries, code.max_retries)?;
        if let Some(seconds) = self.approval_ttl {
            settings.approval_ttl = std::time::Duration::from_secs(seconds);
        }
        if let Some(seconds) = self.denial_ttl {
            settings.denial_ttl = std::time::Duration::from_secs(seconds);
        }
        settings.approvals = match (self.approvals, code.approvals) {
            (None, approvals) => approvals,
            (Some(ApprovalsArg::Inbox), _) => Approvals::Inbox,
            (Some(ApprovalsArg::Host), Approvals::Host) => Approvals::Host,
            (Some(ApprovalsArg::Host), _) => {
                return Err(Error::Input(
                    "--approvals host would let the host's `confirmed` approve, and the \
                     application says only a person's decision in the store does (inbox)"
                        .to_owned(),
                ));
            }
        };
        Ok(settings)
    }
}

impl<S: Any + Send + Sync> App<S> {
    /// The command line named `name` (in `--help` and in error messages) for
    /// these tools over this state.
    pub fn new(name: &'static str, registry: Registry, state: Arc<S>) -> Self {
        App::with_state(name, registry, StateSource::Ready(state))
    }

    /// The command line named `name` for these tools, over a state `build`
    /// makes from the store `--store` names, once, inside the command's
    /// runtime: the application's backend can connect to the same database
    /// (`StoreSpec::Postgres(url)`) or file. Only the commands that run tools
    /// build it; `definitions`, `lock`, `check`, `report` and
    /// `agent --serve-script` open nothing.
    /// An error of `build` ends the command with its message (exit code 2).
    ///
    /// The default caller's policy is [`policy`](Self::policy)'s (or every
    /// tool): `definitions` reads it without building the state, so
    /// [`configure`](Self::configure) must not set another one (an error
    /// when a command runs tools).
    ///
    /// ```no_run
    /// use std::process::ExitCode;
    /// use toolcall_cli::{App, StoreSpec};
    ///
    /// # fn registry() -> toolcall_core::Registry { toolcall_core::Registry::default() }
    /// struct Ops { database: Option<String> }
    ///
    /// fn main() -> ExitCode {
    ///     App::from_store("ops", registry(), |store: StoreSpec| async move {
    ///         let database = match store {
    ///             StoreSpec::Postgres(url) => Some(url), // connect a pool here
    ///             _ => None,
    ///         };
    ///         Ok::<_, std::io::Error>(Ops { database })
    ///     })
    ///     .run()
    /// }
    /// ```
    pub fn from_store<F, Fut, E>(name: &'static str, registry: Registry, build: F) -> Self
    where
        F: FnOnce(StoreSpec) -> Fut + 'static,
        Fut: Future<Output = Result<S, E>> + 'static,
        E: Display,
    {
        let build = move |spec: StoreSpec| -> Building<S> {
            let future = build(spec);
            Box::pin(async move {
                future
                    .await
                    .map(Arc::new)
                    .map_err(|error| Error::State(error.to_string()))
            })
        };
        App::with_state(name, registry, StateSource::FromStore(Box::new(build)))
    }

    /// The application of [`new`](Self::new) and
    /// [`from_store`](Self::from_store), which differ only in where the
    /// state comes from.
    fn with_state(name: &'static str, registry: Registry, state: StateSource<S>) -> Self {
        App {
            name,
            version: None,
            about: None,
            state,
            code: Code {
                registry,
                policy: None,
                callers: Vec::new(),
                parts: Vec::new(),
                configure: None,
            },
        }
    }

    /// The line `--help` prints under the name (a default one otherwise).
    pub fn about(mut self, about: &'static str) -> Self {
        self.about = Some(about);
        self
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
        self.code.policy = Some(policy);
        self
    }

    /// Other callers, each with its own policy, besides those given before.
    /// `--caller ID` runs a command as one of them, its policy the ceiling
    /// `--allow` and `--limit` narrow; the build checks each against the
    /// tools, and warns of each limit one does not set.
    pub fn callers(mut self, callers: impl IntoIterator<Item = Caller>) -> Self {
        self.code.callers.extend(callers);
        self
    }

    /// A part of the state for the tools that take `&Ctx<P>` rather than
    /// the whole state, made from the state once per dispatcher (also for
    /// an application whose state [`from_store`](Self::from_store) builds):
    /// see [`DispatcherBuilder::part`]. A read-only tool given a read-only
    /// connection cannot write, whatever the code.
    ///
    /// ```no_run
    /// use std::process::ExitCode;
    /// use std::sync::Arc;
    ///
    /// # fn registry() -> toolcall_core::Registry { toolcall_core::Registry::default() }
    /// struct Bank { reader: Reader }
    /// #[derive(Clone)]
    /// struct Reader;
    ///
    /// fn main() -> ExitCode {
    ///     toolcall_cli::App::new("bank", registry(), Arc::new(Bank { reader: Reader }))
    ///         .part(|bank: &Bank| bank.reader.clone())
    ///         .run()
    /// }
    /// ```
    pub fn part<P: Any + Send + Sync>(mut self, part: impl Fn(&S) -> P + 'static) -> Self {
        // The dispatcher is built twice (once to read the policy), so the
        // function is kept, not consumed.
        self.code
            .parts
            .push(Box::new(move |builder: DispatcherBuilder<S>| {
                builder.part(|state: &S| part(state))
            }));
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
        self.code.configure = Some(Box::new(configure));
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
        let App {
            name,
            version,
            about,
            state,
            code,
        } = self;
        let mut command = AppCli::command().name(name).bin_name(name);
        if let Some(version) = version {
            command = command.version(version).propagate_version(true);
        }
        if let Some(about) = about {
            command = command.about(about);
        }
        let cli = command
            .try_get_matches_from_mut(args)
            .and_then(|matches| AppCli::from_arg_matches(&matches))
            .map_err(|error| Error::Usage(error.format(&mut command)))?;
        let common = &cli.common;

        if !cli.command.runs_tools() {
            // The code's policy, read without a store or a state.
            let ceiling = match &state {
                StateSource::Ready(state) => code.runs_as(name, state, common)?.0,
                StateSource::FromStore(_) => code.stateless_runs_as(name, common)?,
            };
            return cli.command.run_static(&code.registry, ceiling.policy());
        }
        if let Some(error) = cli.command.missing_feature_error() {
            return Err(error);
        }
        let runtime = cli
            .command
            .runtime()
            .map_err(Error::io("start the async runtime"))?;
        runtime.block_on(async {
            let (state, from_store) = match state {
                StateSource::Ready(state) => (state, false),
                StateSource::FromStore(build) => (build(common.store.clone()).await?, true),
            };
            let (runs_as, default, code_settings) = code.runs_as(name, &state, common)?;
            if from_store {
                let stateless = code.stateless_runs_as(name, common)?;
                if stateless != runs_as {
                    return Err(Error::Input(format!(
                        "{name}'s configure sets the policy of caller `{}`: with \
                         App::from_store give it with App::policy or App::callers, which \
                         `definitions` reads without building the state",
                        runs_as.id()
                    )));
                }
            }
            let settings = common.pipeline.narrow(&code_settings)?;
            let builder = code.builder(&state, Some(&runs_as), common.audit.as_ref())?;
            let builder = builder.settings(settings).caller(runs_as.clone());
            let builder = if runs_as.id() == default.id() {
                builder
            } else {
                builder.callers([default])
            };
            let run = Run {
                program: name,
                builder,
                command: &cli.command,
                session: common.session_id.as_deref(),
                audit: common.audit.as_deref(),
                quiet: common.quiet,
            };
            common.store.open(run).await?
        })
    }
}

impl<S: Any + Send + Sync> Code<S> {
    /// The caller the command runs as, its policy the code's narrowed by
    /// `--allow` and `--limit`; the code's default caller; and the code's
    /// settings.
    fn runs_as(
        &self,
        program: &str,
        state: &Arc<S>,
        common: &CommonArgs,
    ) -> Result<(Caller, Caller, Settings), Error> {
        let code = self
            .builder(state, None, None)?
            .build()
            .map_err(build_error)?;
        let caller_id = common
            .caller
            .as_deref()
            .unwrap_or_else(|| code.default_caller().id());
        let Some(ceiling) = code.caller(caller_id) else {
            return Err(self.unknown_caller(program, caller_id, code.default_caller()));
        };
        let runs_as = self.narrowed(caller_id, ceiling, common)?;
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
        Ok((
            runs_as,
            code.default_caller().clone(),
            code.settings().clone(),
        ))
    }

    /// [`runs_as`](Self::runs_as) from [`App::policy`] and
    /// [`App::callers`] alone, for an application whose state is built from
    /// the store.
    fn stateless_runs_as(&self, program: &str, common: &CommonArgs) -> Result<Caller, Error> {
        let default = Caller::new(
            "default",
            self.policy
                .clone()
                .unwrap_or_else(|| crate::every_tool(&self.registry)),
        );
        let caller_id = common.caller.as_deref().unwrap_or("default");
        let ceiling = if caller_id == default.id() {
            &default
        } else {
            match self.callers.iter().find(|caller| caller.id() == caller_id) {
                Some(caller) => caller,
                None => return Err(self.unknown_caller(program, caller_id, &default)),
            }
        };
        self.narrowed(caller_id, ceiling, common)
    }

    /// `--caller` names neither `default` nor one of [`App::callers`].
    fn unknown_caller(&self, program: &str, caller_id: &str, default: &Caller) -> Error {
        let mut known = vec![default];
        known.extend(self.callers.iter());
        unknown_caller(program, caller_id, &self.registry, &known)
    }

    /// The caller `caller_id` runs as: `ceiling` narrowed by `--allow` and
    /// `--limit`.
    fn narrowed(
        &self,
        caller_id: &str,
        ceiling: &Caller,
        common: &CommonArgs,
    ) -> Result<Caller, Error> {
        let policy = narrow(
            &self.registry,
            ceiling,
            common.allow.as_deref(),
            &common.limit,
        )?;
        Ok(Caller::new(caller_id, policy))
    }

    /// The dispatcher as the code sets it up: the policy, the callers,
    /// `--audit`'s sink, then `configure`. With `runs_as`, the callers leave
    /// out the one of its id (the caller replaces it).
    fn builder(
        &self,
        state: &Arc<S>,
        runs_as: Option<&Caller>,
        audit: Option<&PathBuf>,
    ) -> Result<DispatcherBuilder<S>, Error> {
        let mut builder = Dispatcher::builder(self.registry.clone(), Arc::clone(state));
        if let Some(policy) = &self.policy {
            builder = builder.policy(policy.clone());
        }
        let others = self
            .callers
            .iter()
            .filter(|caller| runs_as.is_none_or(|runs_as| caller.id() != runs_as.id()))
            .cloned();
        builder = builder.callers(others);
        for part in &self.parts {
            builder = part(builder);
        }
        if let Some(path) = audit {
            let sink = JsonLinesAudit::open(path)
                .map_err(Error::io(format!("open {}", path.display())))?;
            // With `metrics`, each record is measured on the global
            // MeterProvider before it is written (tools by their registry
            // names: any other name is one series, `_OTHER`).
            #[cfg(feature = "metrics")]
            let sink = toolcall_metrics::MetricsAudit::new(sink)
                .tools(self.registry.iter().map(|spec| spec.name()));
            builder = builder.audit(sink);
        }
        #[cfg(feature = "metrics")]
        if audit.is_none() {
            // The dispatcher's own default sink, measured the same way.
            let sink = toolcall_metrics::MetricsAudit::new(toolcall_core::MemoryAudit::new())
                .tools(self.registry.iter().map(|spec| spec.name()));
            builder = builder.audit(sink);
        }
        if let Some(configure) = &self.configure {
            builder = configure(builder);
        }
        Ok(builder)
    }
}

/// `--caller` names none of `callers`: the closest real one when one is
/// close enough to be a typo, and all of them.
fn unknown_caller(
    program: &str,
    caller_id: &str,
    registry: &Registry,
    callers: &[&Caller],
) -> Error {
    let target = toolcall_core::controls::Target::Caller(caller_id.to_owned());
    let near = toolcall_core::controls::unknown_target(&target, registry, callers)
        .and_then(|unknown| unknown.closest)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default();
    let known: Vec<&str> = callers.iter().map(|caller| caller.id()).collect();
    Error::Input(format!(
        "--caller `{caller_id}` is no caller of {program}{near}: the callers are {}",
        known.join(", ")
    ))
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
