//! The command line an application gets from its toolcall registry.
//!
//! Seven subcommands, in [`Command`]:
//!
//! | command | needs | does |
//! |---|---|---|
//! | `definitions --format F [-o FILE] [--check]` | the registry | prints the tool definitions in a provider's format ([`Format`]); `--check` compares them with FILE and fails (exit 1) naming each difference |
//! | `replay [FILE]` | a dispatcher | runs a file of model calls through the pipeline, one conversation |
//! | `report AUDIT.jsonl [--json] [--rejected-calls FILE]` | the registry | metrics from an audit log ([`report`](toolcall_contract::report)), the failing fields ([`rejected`](toolcall_contract::rejected)) |
//! | `lock [--file tools.lock.json]` | the registry | writes the tools' contract ([`lock`](toolcall_contract::lock)) |
//! | `check [--file tools.lock.json]` | the registry | fails when a contract changed incompatibly |
//! | `mcp` | a dispatcher | serves the tools over MCP on standard input and output |
//! | `serve [--listen ADDR] [--token-file PATH]` | a dispatcher (its store) | the approval inbox ([`toolcall_inbox`]): a web page where a person decides the pending approvals of every process that shares the store |
//!
//! An application with no command line of its own takes all of it from [`App`]:
//!
//! ```no_run
//! use std::process::ExitCode;
//! use std::sync::Arc;
//!
//! # struct Shop;
//! # fn registry() -> toolcall_core::Registry { toolcall_core::Registry::default() }
//! fn main() -> ExitCode {
//!     // `toolcall::tools![get_order, refund_order]` in a real application.
//!     let registry = registry();
//!     toolcall_cli::App::new("shop", registry, Arc::new(Shop)).run()
//! }
//! ```
//!
//! An application that has its own [clap] parser puts [`Command`] among its
//! subcommands, runs the registry-only ones with [`Command::run_static`] and
//! the others with [`Command::run`] once it has built its dispatcher (the
//! `orders` example does this). Exit codes: 0 on success, 1 when `check`
//! finds a breaking change, 2 for every other error; errors go to standard
//! error ([`exit`]).

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use toolcall_contract::{diff, lock, rejected, report};
use toolcall_core::{
    Arguments, Call, Dispatcher, DispatcherBuilder, JsonLinesAudit, Policy, Registry, Store,
};
pub use toolcall_providers::Format;

/// The subcommands every application gets from its registry.
#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Prints the tool definitions in a provider's format (the value of its
    /// `tools` field), for the tools the caller may use.
    Definitions(DefinitionsArgs),
    /// Runs calls from a file, one JSON object a line, as one conversation.
    ///
    /// Each line is `{"tool": "...", "arguments": "<raw JSON text>" | {...},
    /// "confirmed": false, "call_id": "...", "approval": "<confirmation_id>",
    /// "dry_run": false}`; only `tool` is required. `approval` brings the id
    /// of an earlier CONFIRMATION_REQUIRED answer, once a person decided it;
    /// `dry_run` goes through every stage up to execution and runs nothing.
    /// Arguments written as an object are read as the text the line has,
    /// like a model's: a member twice in them is INVALID_JSON, and the size
    /// and depth limits measure that text. A member twice in the line
    /// itself is an error naming the line.
    /// Prints, a line per call, the text that would go back to the model.
    Replay(ReplayArgs),
    /// Metrics from an audit log: rejections by tool, by code and by field,
    /// recovery after a rejection, replays, loop guards and confirmation
    /// outcomes.
    Report(ReportArgs),
    /// Writes the tools' contract (names, flags, fields and their types) to
    /// a lock file, to commit beside the code.
    Lock(LockArgs),
    /// Compares the tools with the lock file; fails (exit code 1), naming
    /// each change, when a tool changed incompatibly without a new version.
    ///
    /// Each change is printed as `breaking:`, `review:` (a description
    /// changed: check that its meaning, a unit say, did not) or `compatible:`.
    Check(LockArgs),
    /// Serves the tools over the Model Context Protocol on standard input and
    /// output; every call goes through the pipeline.
    Mcp(McpArgs),
    /// Serves the approval inbox: a web page, over the store the agents
    /// use (`--store`), where a person sees every pending high-risk call,
    /// approves, denies or edits it, and sees what came of it.
    ///
    /// It listens on 127.0.0.1 unless told otherwise, and every request
    /// needs a token: the address printed at start signs a browser in.
    /// With `--audit FILE`, its metrics page charts that audit log.
    Serve(ServeArgs),
}

/// `mcp`'s arguments.
#[derive(Clone, Debug, Default, Args)]
pub struct McpArgs {
    /// When a call waits for a person (CONFIRMATION_REQUIRED) and the MCP
    /// client cannot ask one itself (no elicitation), wait up to this many
    /// seconds for the decision in the store (the inbox's, `serve`), then
    /// answer the call with what came of it: run once, run edited, or
    /// denied. 0, the default, answers CONFIRMATION_REQUIRED at once.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub wait_approval: u64,
}

/// `serve`'s arguments.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on. Keep it on loopback and put a TLS proxy in
    /// front to reach it from elsewhere.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// A file of tokens, a line a person: `NAME TOKEN`, or only `TOKEN`
    /// (named `operator`); each decision records the name. Without it, one
    /// token is generated and its sign-in address printed.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
}

/// `definitions`' arguments.
#[derive(Clone, Debug, Args)]
pub struct DefinitionsArgs {
    /// neutral, openai, openai-responses, anthropic, gemini or mcp.
    #[arg(long, short, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Format,
    /// Write to this file instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write nothing: compare the definitions with the file `--output`
    /// names, and exit 1, naming each change, when it is out of date (for
    /// CI: definitions committed beside the code stay in sync with it).
    #[arg(long, requires = "output")]
    pub check: bool,
}

fn parse_format(name: &str) -> Result<Format, String> {
    name.parse()
        .map_err(|e: toolcall_providers::UnknownFormat| e.to_string())
}

/// `replay`'s arguments.
#[derive(Clone, Debug, Args)]
pub struct ReplayArgs {
    /// The calls; `-` or nothing reads standard input.
    #[arg(value_name = "FILE|-")]
    pub input: Option<PathBuf>,
    /// When a call waits for a person (CONFIRMATION_REQUIRED), wait up to
    /// this many seconds for the decision in the store (the inbox's), then
    /// make the call again with its approval id and print that answer
    /// instead. 0, the default, answers at once.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub wait_approval: u64,
}

/// `report`'s arguments.
#[derive(Clone, Debug, Args)]
pub struct ReportArgs {
    /// The audit log, one JSON record a line; `-` reads standard input.
    #[arg(value_name = "AUDIT.jsonl|-")]
    pub audit_log: PathBuf,
    /// Print the metrics as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the distinct rejected calls (INVALID_ARGUMENTS,
    /// INVALID_JSON) to this file as `replay` lines: regression tests taken
    /// from what models really sent. Only what the audit kept is written (a
    /// sensitive value stays `[redacted]`); calls whose arguments the audit
    /// did not keep whole are left out, and counted on standard error.
    #[arg(long, value_name = "FILE")]
    pub rejected_calls: Option<PathBuf>,
}

/// `lock`'s and `check`'s arguments.
#[derive(Clone, Debug, Args)]
pub struct LockArgs {
    /// The lock file.
    #[arg(long, value_name = "FILE", default_value = "tools.lock.json")]
    pub file: PathBuf,
}

/// Why a command failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file or stream could not be read or written.
    Io {
        /// What was being done, naming the file.
        action: String,
        /// The cause.
        source: io::Error,
    },
    /// The input is not what the command reads.
    Input(String),
    /// `check` found changes that break the locked contract.
    Breaking {
        /// How many.
        count: usize,
        /// The lock file.
        file: PathBuf,
    },
    /// `definitions --check` found the file out of date.
    Stale {
        /// How many places differ.
        count: usize,
        /// The definitions file.
        file: PathBuf,
    },
    /// The command runs tools: call [`Command::run`] with a dispatcher.
    NeedsDispatcher,
    /// The MCP server stopped with an error.
    Mcp(toolcall_mcp::Error),
    /// The inbox (`serve`) could not start, or stopped.
    Serve(String),
    /// The command line could not be parsed, or asked for `--help` or
    /// `--version`: clap's own message, printed by [`exit`].
    Usage(clap::Error),
}

impl Error {
    fn io(action: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let action = action.into();
        move |source| Error::Io { action, source }
    }

    /// The process's exit code for this error: 1 for a breaking contract
    /// change, clap's code for [`Usage`](Error::Usage) (0 for `--help` and
    /// `--version`, 2 for a malformed command line), 2 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Breaking { .. } | Error::Stale { .. } => 1,
            Error::Usage(error) => u8::try_from(error.exit_code()).unwrap_or(2),
            _ => 2,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { action, source } => write!(f, "cannot {action}: {source}"),
            Error::Input(message) => f.write_str(message),
            Error::Breaking { count, file } => write!(
                f,
                "{count} breaking change(s) against {}: give the changed tool a new version \
                 (#[tool(version = N)]), or run `lock` if the change is meant",
                file.display()
            ),
            Error::Stale { count, file } => write!(
                f,
                "{} is out of date ({count} difference(s)): write it again with `definitions --format F -o {}` and commit it",
                file.display(),
                file.display()
            ),
            Error::NeedsDispatcher => f.write_str("this command runs tools and needs a dispatcher"),
            Error::Mcp(error) => write!(f, "the MCP server stopped: {error}"),
            Error::Serve(error) => write!(f, "the inbox: {error}"),
            Error::Usage(error) => write!(f, "{}", error.render()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Mcp(error) => Some(error),
            _ => None,
        }
    }
}

/// The process's exit for a command's outcome: prints an error to standard
/// error as `program: message` and maps it to its [exit code](Error::exit_code).
/// A [usage](Error::Usage) message is printed as clap prints it (`--help` to
/// standard output, with exit code 0).
pub fn exit(program: &str, outcome: Result<(), Error>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Usage(error)) => {
            let _ = error.print();
            ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
        }
        Err(error) => {
            eprintln!("{program}: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

impl Command {
    /// Whether the command runs tools (`replay`, `mcp`) and so needs a
    /// dispatcher; the others need at most the registry.
    pub fn runs_tools(&self) -> bool {
        matches!(
            self,
            Command::Replay(_) | Command::Mcp(_) | Command::Serve(_)
        )
    }

    /// Runs a command that does not run tools, against the registry; the
    /// tools `policy` allows are the ones `definitions` prints. A command
    /// that runs tools is [`Error::NeedsDispatcher`].
    pub fn run_static(&self, registry: &Registry, policy: &Policy) -> Result<(), Error> {
        match self {
            Command::Definitions(args) => definitions(registry, policy, args),
            Command::Report(args) => report(registry, args),
            Command::Lock(args) => write_lock(registry, &args.file),
            Command::Check(args) => check(registry, &args.file),
            Command::Replay(_) | Command::Mcp(_) | Command::Serve(_) => Err(Error::NeedsDispatcher),
        }
    }

    /// Runs any command with the application's dispatcher; its registry and
    /// its default caller's policy stand for [`run_static`](Self::run_static)'s.
    /// `program` is the application's name (the MCP server introduces itself
    /// by it). `session` is the conversation `replay` runs in, and the prefix
    /// of `mcp`'s sessions: each MCP connection runs in a session of its own,
    /// `<session>/<connection id>` (see `toolcall_mcp::Options::session`).
    pub async fn run<S, St>(
        &self,
        program: &str,
        dispatcher: Arc<Dispatcher<S, St>>,
        session: &str,
    ) -> Result<(), Error>
    where
        S: Any + Send + Sync,
        St: Store + 'static,
    {
        let context = Context {
            program,
            session,
            audit: None,
        };
        self.run_in(&context, dispatcher).await
    }

    /// [`run`](Self::run), with everything a command may need besides the
    /// dispatcher: `serve` reads the audit log's metrics from
    /// [`Context::audit`].
    pub async fn run_in<S, St>(
        &self,
        context: &Context<'_>,
        dispatcher: Arc<Dispatcher<S, St>>,
    ) -> Result<(), Error>
    where
        S: Any + Send + Sync,
        St: Store + 'static,
    {
        let Context {
            program,
            session,
            audit,
        } = *context;
        match self {
            Command::Replay(args) => replay(&dispatcher, session, args).await,
            Command::Serve(args) => serve(program, dispatcher, args, audit).await,
            Command::Mcp(args) => {
                let options = toolcall_mcp::Options::new(session)
                    .name(program)
                    .wait_approval(std::time::Duration::from_secs(args.wait_approval));
                toolcall_mcp::serve_stdio(dispatcher, options)
                    .await
                    .map_err(Error::Mcp)
            }
            other => other.run_static(dispatcher.registry(), dispatcher.default_caller().policy()),
        }
    }
}

/// What a command may need besides the dispatcher ([`Command::run_in`]).
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The application's name (the MCP server and the inbox go by it).
    pub program: &'a str,
    /// The conversation `replay` runs in, and the prefix of `mcp`'s sessions.
    pub session: &'a str,
    /// The audit log the application writes (`--audit`): the inbox's
    /// metrics page reads it.
    pub audit: Option<&'a Path>,
}

/// `serve`: the approval inbox over the dispatcher's store, until the
/// process ends.
async fn serve<S, St>(
    program: &str,
    dispatcher: Arc<Dispatcher<S, St>>,
    args: &ServeArgs,
    audit: Option<&Path>,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    let generated = args.token_file.is_none();
    let access = match &args.token_file {
        Some(path) => toolcall_inbox::Access::from_file(path, toolcall_inbox::DEFAULT_NAME),
        None => toolcall_inbox::Access::generate(toolcall_inbox::DEFAULT_NAME),
    }
    .map_err(|e| Error::Input(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Error::Serve(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Serve(e.to_string()))?
        .to_string();
    let mut options = toolcall_inbox::Options::new(access.clone())
        .title(program)
        .summarize(Arc::new(|records| {
            report::Report::from_records(records).to_json()
        }));
    if let Some(path) = audit {
        options = options.audit(path);
    }
    let mut stdout = io::stdout().lock();
    let lines = if generated {
        format!(
            "{program} inbox: {}\n(open it once to sign in; the token was generated for this run)\n",
            toolcall_inbox::sign_in_url(&addr, &access.users()[0])
        )
    } else {
        format!(
            "{program} inbox: http://{addr}/?token=TOKEN, with a token of {}\n",
            args.token_file
                .as_deref()
                .unwrap_or(Path::new(""))
                .display()
        )
    };
    stdout
        .write_all(lines.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(Error::io("write to standard output"))?;
    drop(stdout);
    if !args.listen.ip().is_loopback() {
        eprintln!(
            "{program}: the inbox listens on {addr}, beyond this machine: put a TLS proxy in front of it"
        );
    }
    toolcall_inbox::serve(dispatcher, options, listener)
        .await
        .map_err(|e| Error::Serve(e.to_string()))
}

/// A policy that allows the named tools, and nothing else: what `--allow`
/// gives.
///
/// Names are trimmed, and empty ones between commas are skipped
/// (`"get_order, refund_order,"` names two tools). It is an error, never a
/// silent default:
///
/// * to name a tool the registry does not have (a typo would otherwise deny
///   every call, or print no definitions, without a word);
/// * to name no tool at all (`""`, `","`, `" "`): an allowlist that was given
///   but is empty fails closed. It never means "every tool"; an application
///   whose default is every tool says so with [`every_tool`] when `--allow`
///   is not given at all ([`App`] does).
pub fn allowlist<T: AsRef<str>>(registry: &Registry, names: &[T]) -> Result<Policy, Error> {
    let names: Vec<&str> = names
        .iter()
        .map(|name| name.as_ref().trim())
        .filter(|name| !name.is_empty())
        .collect();
    let known = || {
        registry
            .iter()
            .map(|spec| spec.name())
            .collect::<Vec<_>>()
            .join(",")
    };
    if names.is_empty() {
        return Err(Error::Input(format!(
            "--allow names no tool: pass the tools the caller may use, comma-separated \
             (for example `--allow {}`), or leave --allow out for the default",
            known()
        )));
    }
    let unknown: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| registry.get(name).is_none())
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Input(format!(
            "--allow names no tool `{}`; the tools are: {}",
            unknown.join("`, `"),
            known().replace(',', ", ")
        )));
    }
    Ok(Policy::new().allow(names))
}

/// A policy that allows every tool of the registry: an application's
/// explicit choice of default when no allowlist is given.
pub fn every_tool(registry: &Registry) -> Policy {
    Policy::new().allow(registry.iter().map(|spec| spec.name()))
}

/// Opens `path` for reading; `-` is standard input.
fn open_input(path: Option<&Path>) -> Result<Box<dyn BufRead>, Error> {
    match path {
        None => Ok(Box::new(io::stdin().lock())),
        Some(path) if path.as_os_str() == "-" => Ok(Box::new(io::stdin().lock())),
        Some(path) => File::open(path)
            .map(|file| Box::new(BufReader::new(file)) as Box<dyn BufRead>)
            .map_err(Error::io(format!("open {}", path.display()))),
    }
}

/// Writes `text` to `path`, or to standard output.
fn write_output(path: Option<&Path>, text: &str) -> Result<(), Error> {
    match path {
        // Written beside the target and renamed over it, so that a reader
        // never sees half a file.
        Some(path) => {
            let mut partial = path.as_os_str().to_owned();
            partial.push(".partial");
            let partial = PathBuf::from(partial);
            std::fs::write(&partial, text)
                .and_then(|()| std::fs::rename(&partial, path))
                .map_err(|source| {
                    let _ = std::fs::remove_file(&partial);
                    Error::Io {
                        action: format!("write {}", path.display()),
                        source,
                    }
                })
        }
        None => {
            let mut stdout = io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(Error::io("write to standard output"))
        }
    }
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

fn definitions(registry: &Registry, policy: &Policy, args: &DefinitionsArgs) -> Result<(), Error> {
    let tools = toolcall_providers::definitions(registry, policy, args.format);
    match (&args.output, args.check) {
        (Some(file), true) => check_definitions(file, &tools),
        _ => write_output(args.output.as_deref(), &pretty(&tools)),
    }
}

/// `definitions --check`: the file holds exactly `current`, or each
/// difference is printed and the answer is [`Error::Stale`].
fn check_definitions(file: &Path, current: &Value) -> Result<(), Error> {
    let text = std::fs::read_to_string(file).map_err(|source| Error::Io {
        action: format!(
            "read {} (write it with `definitions --format F -o FILE`)",
            file.display()
        ),
        source,
    })?;
    let committed: Value = serde_json::from_str(&text)
        .map_err(|e| Error::Input(format!("{}: not JSON: {e}", file.display())))?;
    let mut changes = diff::changes(&committed, current);
    let mut stdout = io::stdout().lock();
    if changes.is_empty() && text == pretty(current) {
        writeln!(stdout, "{} is up to date", file.display())
            .map_err(Error::io("write to standard output"))?;
        return Ok(());
    }
    if changes.is_empty() {
        changes.push("layout: same definitions, written differently".to_owned());
    }
    for change in &changes {
        writeln!(stdout, "{change}").map_err(Error::io("write to standard output"))?;
    }
    Err(Error::Stale {
        count: changes.len(),
        file: file.to_owned(),
    })
}

fn report(registry: &Registry, args: &ReportArgs) -> Result<(), Error> {
    let input = open_input(Some(&args.audit_log))?;
    let records = report::read_audit(input)
        .map_err(|e| Error::Input(format!("{}: {e}", args.audit_log.display())))?;
    let report = report::Report::from_records(&records);
    let fields = rejected::by_field(&records, registry);
    let text = if args.json {
        let mut json = report.to_json();
        json["invalid_arguments_by_field"] = rejected::to_json(&fields);
        pretty(&json)
    } else {
        let table = rejected::FieldTable(&fields).to_string();
        if table.is_empty() {
            report.to_string()
        } else {
            format!("{report}\n{table}")
        }
    };
    if let Some(path) = &args.rejected_calls {
        let found = rejected::regression_calls(&records, registry);
        write_output(Some(path), &found.to_jsonl())?;
        eprintln!(
            "wrote {} rejected call(s) to {}",
            found.calls.len(),
            path.display()
        );
        for (reason, count) in &found.left_out {
            eprintln!("left out {count} rejected call(s): {reason}");
        }
    }
    write_output(None, &text)
}

fn write_lock(registry: &Registry, file: &Path) -> Result<(), Error> {
    let lock = lock::Lockfile::from_registry(registry);
    write_output(Some(file), &lock.to_json_pretty())?;
    eprintln!(
        "wrote the contract of {} tool(s) to {}",
        registry.len(),
        file.display()
    );
    Ok(())
}

fn check(registry: &Registry, file: &Path) -> Result<(), Error> {
    let text = std::fs::read_to_string(file).map_err(|source| Error::Io {
        action: format!("read {} (run `lock` to write it)", file.display()),
        source,
    })?;
    let locked = lock::Lockfile::parse(&text)
        .map_err(|e| Error::Input(format!("{}: {e}", file.display())))?;
    let current = lock::Lockfile::from_registry(registry);
    let changes = lock::check(&locked, &current);
    let mut stdout = io::stdout().lock();
    let mut breaking = 0;
    for change in &changes {
        if change.is_breaking() {
            breaking += 1;
        }
        writeln!(stdout, "{}: {change}", change.severity())
            .map_err(Error::io("write to standard output"))?;
    }
    if breaking > 0 {
        return Err(Error::Breaking {
            count: breaking,
            file: file.to_owned(),
        });
    }
    if changes.is_empty() {
        writeln!(stdout, "the tools match {}", file.display())
            .map_err(Error::io("write to standard output"))?;
    }
    Ok(())
}

/// One line of a replay file. Its members are read once each: a line with
/// a member twice (`"tool"`, `"arguments"`, ...) is not a replay call.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayLine<'a> {
    tool: String,
    /// The arguments' own text, as the line has it: the pipeline parses it
    /// (see [`replay_arguments`]).
    #[serde(default, borrow, deserialize_with = "present")]
    arguments: Option<&'a RawValue>,
    #[serde(default)]
    confirmed: bool,
    #[serde(default)]
    call_id: Option<String>,
    /// A confirmation id from an earlier `CONFIRMATION_REQUIRED` answer:
    /// the call brings the approval a person gave (in the inbox).
    #[serde(default)]
    approval: Option<String>,
    /// A dry run: every stage up to execution, nothing run, no step used
    /// (`DRY_RUN` where the call would run).
    #[serde(default)]
    dry_run: bool,
}

/// A member that is there, even as `null` (which the pipeline refuses as
/// arguments that are not an object): only a missing one is `None`.
fn present<'de, D>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// The text the pipeline reads for a replay line's `arguments`, always as
/// [`Arguments::Raw`] so that its limits hold whatever the line's form: a
/// JSON string is the model's text (`"{\"amount_cents\": 100}"`, decoded);
/// any other value (`{"amount_cents": 100}`) is taken as the very text the
/// line has, never parsed and written again, so a member given twice at any
/// depth is `INVALID_JSON` and the 64 KiB and depth limits measure what was
/// written. No `arguments` at all calls the tool with none.
fn replay_arguments(arguments: Option<&RawValue>) -> Result<Cow<'_, str>, serde_json::Error> {
    match arguments {
        None => Ok(Cow::Borrowed("{}")),
        Some(raw) if raw.get().starts_with('"') => serde_json::from_str(raw.get()).map(Cow::Owned),
        Some(raw) => Ok(Cow::Borrowed(raw.get())),
    }
}

async fn replay<S, St>(
    dispatcher: &Dispatcher<S, St>,
    session: &str,
    args: &ReplayArgs,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    let input = args.input.as_deref();
    let reader = open_input(input)?;
    let source = match input {
        Some(path) if path.as_os_str() != "-" => path.display().to_string(),
        _ => "standard input".to_owned(),
    };
    let mut stdout = BufWriter::new(io::stdout().lock());
    for (index, line) in reader.lines().enumerate() {
        let line = line.map_err(Error::io(format!("read line {} of {source}", index + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let not_a_call = |e: serde_json::Error| {
            Error::Input(format!(
                "{source}: line {}: not a replay call: {e}",
                index + 1
            ))
        };
        let call: ReplayLine<'_> = serde_json::from_str(&line).map_err(not_a_call)?;
        let arguments = replay_arguments(call.arguments).map_err(not_a_call)?;
        let mut request = Call::new(&call.tool, Arguments::Raw(&arguments))
            .session(session)
            .confirmed(call.confirmed)
            .dry_run(call.dry_run);
        if let Some(id) = &call.call_id {
            request = request.call_id(id);
        }
        if let Some(id) = &call.approval {
            request = request.approval(id);
        }
        let mut result = dispatcher.execute(request).await;
        if args.wait_approval > 0
            && result.code == toolcall_core::Code::ConfirmationRequired
            && let Some(id) = result.confirmation_id.clone()
        {
            // Wait for the person's decision (woken by the store where it
            // can), then bring it, as the model's next call would.
            let until = toolcall_core::store::now_ms()
                .saturating_add(args.wait_approval.saturating_mul(1000));
            let decided = dispatcher
                .store()
                .wait_approval(&id, until)
                .await
                .map_err(|e| Error::Input(format!("waiting for approval {id}: {e}")))?;
            if decided.is_some_and(|entry| entry.approval.decision.is_some()) {
                result = dispatcher.execute(request.approval(&id)).await;
            }
        }
        writeln!(stdout, "{}", result.to_model_text())
            .and_then(|()| stdout.flush())
            .map_err(Error::io("write to standard output"))?;
    }
    Ok(())
}

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
    /// The conversation's id (it scopes the step budget and the idempotency keys).
    #[arg(long, default_value = "default", global = true)]
    session_id: String,
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
            session: &cli.common.session_id,
            audit: cli.common.audit.as_deref(),
        };
        runtime.block_on(cli.command.run_in(&context, Arc::new(dispatcher)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
