//! The command line's clap definitions: the subcommands and their
//! arguments.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use toolcall_providers::Format;

/// The subcommands every application gets from its registry.
#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Prints the tool definitions in a provider's format (the value of its
    /// `tools` field), for the tools the caller may use.
    Definitions(DefinitionsArgs),
    /// Runs calls from a file, one JSON object a line, as one conversation:
    /// `--session-id`'s, or the application's default (printed on standard
    /// error at start).
    ///
    /// Each line is `{"tool": "...", "arguments": "<raw JSON text>" | {...},
    /// "confirmed": false, "call_id": "...", "approval": "<question_id>",
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
    /// outcomes. It reads the audit file only: `--store` changes nothing.
    ///
    /// `report --verify FILE...` checks the audit's hash chain instead,
    /// over the files in the order written: exit 0 with the last record's
    /// hash, exit 1 naming the first record that was changed, removed,
    /// inserted or reordered.
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
    /// output, or over streamable HTTP at `http://ADDR/mcp` with `--http
    /// ADDR`; every call goes through the pipeline.
    ///
    /// With `--session-id X`, every connection runs in conversation X, and
    /// so does every other process over the same `--store`: a reconnect
    /// keeps the conversation's taint (untrusted output read), its replays,
    /// loop guard, step budget and pending approvals. Without it, each
    /// connection is a conversation of its own, and a reconnect forgets all
    /// of that. A client may also name its conversation in a call's `_meta`
    /// (`"toolcall/conversation": "NAME"`, scoped to the server's caller).
    /// The conversation used is printed on standard error at start.
    #[cfg_attr(not(feature = "mcp"), command(hide = true))]
    Mcp(McpArgs),
    /// Serves the approval inbox: a web page, over the store the agents
    /// use (`--store`), where a person sees every pending high-risk call,
    /// approves, denies or edits it, and sees what came of it.
    ///
    /// It listens on 127.0.0.1 unless told otherwise, and every request
    /// needs a token: the address printed at start signs a browser in.
    /// With `--audit FILE`, its metrics page charts that audit log.
    #[cfg_attr(not(feature = "inbox"), command(hide = true))]
    Serve(ServeArgs),
    /// Runs an agent loop against a model server: sends the prompt and the
    /// tools the caller may use, runs every tool call the model makes
    /// through the pipeline (parallel calls in the model's order), answers
    /// each call id with the pipeline's text, asks for approvals, and stops
    /// at the model's text answer or after `--max-turns` requests. Prints
    /// the transcript.
    ///
    /// `--provider openai` (the default) talks to any OpenAI-compatible
    /// Chat Completions server (`--base-url http://127.0.0.1:8080/v1` for a
    /// local llama.cpp, Ollama or vLLM server; the key from
    /// OPENAI_API_KEY when set), with the tools as strict function
    /// definitions; `--provider anthropic` to an Anthropic-compatible
    /// Messages one (`--base-url https://api.anthropic.com`; the key from
    /// ANTHROPIC_API_KEY). The model is `--model`'s, or LLM_MODEL's.
    /// The conversation is `--session-id`'s, or the application's default.
    ///
    /// `agent --serve-script FILE` serves a scripted model instead (a JSON
    /// file of the model's turns; see toolcall-cli's `agent::script`), for
    /// trying the loop without a key.
    ///
    /// Exit codes: 0 with the model's answer, 3 when the model server
    /// cannot be used (down, an HTTP error, an answer that is not a
    /// completion), 4 when the model made no answer within `--max-turns`,
    /// 2 for the other errors.
    #[cfg_attr(not(feature = "agent"), command(hide = true))]
    Agent(AgentArgs),
    /// The operators' controls, kept in the store (`--store`) and obeyed
    /// by every process that shares it from its next call on: stop a tool,
    /// a caller or everything (`disable`, `enable`), load the policy file
    /// (`policy load FILE`), and read what changed when (`history`).
    #[command(subcommand)]
    Admin(AdminCommand),
}

/// `admin`'s subcommands.
#[derive(Clone, Debug, Subcommand)]
pub enum AdminCommand {
    /// Stops a tool (`disable refund_order --reason ...`), a caller
    /// (`--caller ID`) or every call (`--all`): each replica answers its
    /// next call STOPPED with the reason, and no pending question of it can
    /// be approved until it is enabled again.
    Disable(StopArgs),
    /// Lifts a stop: `enable refund_order`, `enable --caller ID`,
    /// `enable --all`.
    Enable(StopArgs),
    /// The policy file: `check FILE` reads it against the tools and callers
    /// and writes nothing; `load FILE` checks it and, when it checks, makes
    /// it every replica's policy (an old one stands otherwise); `show`
    /// prints the controls in the store.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Prints the latest changes of the controls, newest first: version,
    /// when, who, what.
    History {
        /// How many changes.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
}

/// `admin policy`'s subcommands.
#[derive(Clone, Debug, Subcommand)]
pub enum PolicyCommand {
    /// Checks a policy file (TOML) against the tools and callers.
    Check {
        /// The policy file.
        file: PathBuf,
    },
    /// Checks a policy file and makes it the policy of every replica.
    Load {
        /// The policy file.
        file: PathBuf,
        /// Who loads it (the history records it): `$USER` otherwise.
        #[arg(long)]
        by: Option<String>,
    },
    /// Prints the controls kept in the store, as TOML.
    Show,
}

/// What `admin disable` and `admin enable` stop or resume.
#[derive(Clone, Debug, Args)]
pub struct StopArgs {
    /// The tool.
    #[arg(
        required_unless_present_any = ["caller", "all"],
        conflicts_with_all = ["caller", "all"]
    )]
    pub tool: Option<String>,
    /// A caller, every call it makes.
    #[arg(long, conflicts_with = "all")]
    pub caller: Option<String>,
    /// Every call.
    #[arg(long)]
    pub all: bool,
    /// Why (required with `disable`): the model and the people on duty
    /// are told it.
    #[arg(long)]
    pub reason: Option<String>,
    /// Who (the history records it): `$USER` otherwise.
    #[arg(long)]
    pub by: Option<String>,
}

/// `agent`'s arguments.
#[derive(Clone, Debug, Args)]
pub struct AgentArgs {
    /// What the person asks.
    #[arg(value_name = "PROMPT", required_unless_present = "serve_script")]
    pub prompt: Option<String>,
    /// The API's base URL: for `openai`, the one `/chat/completions` is
    /// added to (`http://127.0.0.1:8080/v1`); for `anthropic`, the one
    /// `/v1/messages` is added to (`https://api.anthropic.com`).
    #[arg(long, value_name = "URL", required_unless_present = "serve_script")]
    pub base_url: Option<String>,
    /// The model; LLM_MODEL when not given.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The API the server speaks.
    #[arg(long, value_enum, default_value = "openai")]
    pub provider: AgentProvider,
    /// A system prompt.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Requests to the model at most; without a text answer by then, the
    /// loop stops with exit code 4.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: u32,
    /// The most tokens the model may write in one answer.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_tokens: u32,
    /// Seconds one request to the model may take.
    #[arg(long, value_name = "SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// What the model may do with the tools: `auto` (answer or call, as it
    /// sees fit), `required` (call at least one), `none` (call none), or a
    /// tool's name (call that one), sent as the API's `tool_choice` with
    /// every request that sends tools. `required` and a tool's name hold
    /// until the model has called a tool, then `auto`, so that it can
    /// answer with what the calls returned.
    #[arg(long, value_name = "auto|required|none|TOOL", default_value = "auto")]
    pub tool_choice: toolcall_providers::ToolChoice,
    /// While a request to the model waits, a line on standard error every
    /// this many seconds (the turn, the seconds waited), and one when it is
    /// answered; 0 prints none.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub progress_every: u64,
    /// Approve the calls that wait for a person without asking (in host
    /// mode; with no terminal and without it, the model reads that the call
    /// waits for a person).
    #[arg(long)]
    pub yes: bool,
    /// With `--approvals inbox`: wait up to this many seconds for a
    /// person's decision in the inbox (`serve`, over the same `--store`),
    /// then make the call again with its approval. 0, the default, answers
    /// the model at once that the call waits for a person.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub wait_approval: u64,
    /// Print one JSON object at the end instead of the transcript:
    /// `{"answer", "error", "messages"}`, the messages as last sent.
    #[arg(long)]
    pub json: bool,
    /// Serve a scripted model from this JSON file instead of running the
    /// loop: an OpenAI- and Anthropic-compatible server that plays the
    /// file's turns and records the requests it got (`GET /requests`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt", "base_url"])]
    pub serve_script: Option<PathBuf>,
    /// With `--serve-script`: the address to listen on, 127.0.0.1:8090
    /// unless told otherwise (port 0 picks a free one; the address is
    /// printed at start).
    #[arg(long, value_name = "ADDR", requires = "serve_script")]
    pub listen: Option<SocketAddr>,
}

/// `agent --provider`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentProvider {
    /// OpenAI Chat Completions, or a server compatible with it.
    Openai,
    /// Anthropic Messages, or a server compatible with it.
    Anthropic,
}

/// `mcp`'s arguments.
#[derive(Clone, Debug, Default, Args)]
pub struct McpArgs {
    /// When a call waits for a person (CONFIRMATION_REQUIRED) and the MCP
    /// client cannot ask one itself (no elicitation, or `--approvals inbox`
    /// without `--elicitation-approves`), wait up to this many
    /// seconds for the decision in the store (the inbox's, `serve`), then
    /// answer the call with what came of it: run once, run edited, or
    /// denied. 0, the default, answers CONFIRMATION_REQUIRED at once.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub wait_approval: u64,
    /// With `--approvals inbox`, let a person's yes through the MCP client's
    /// elicitation approve a call (recorded in the store as their decision).
    /// Without it, in inbox mode only a decision taken in the inbox
    /// approves: the client is not asked, and the call answers
    /// CONFIRMATION_REQUIRED with the id the inbox lists (or waits,
    /// `--wait-approval`). It changes nothing in host mode.
    #[arg(long)]
    pub elicitation_approves: bool,
    /// Run every call in the conversation this server gives it
    /// (`--session-id`'s, or its connection's), and refuse, nothing run, a
    /// call that names another in its `_meta` (`toolcall/conversation`): a
    /// client cannot shed its conversation's step budget, taint or
    /// questions by naming a fresh one.
    #[arg(long)]
    pub pin_conversation: bool,
    /// Serve MCP over streamable HTTP at `http://ADDR/mcp` instead of
    /// standard input and output (`127.0.0.1:8808`; port 0 picks a free
    /// one): the address served is printed on standard error at start.
    /// Every session (or, on protocol 2026-07-28, every request) is served
    /// as a stdio connection is, in the same conversations. An address
    /// other than loopback needs `--token-file` or `--oauth-issuer`; keep it on loopback and
    /// put a TLS proxy in front to reach it from elsewhere.
    #[arg(long, value_name = "ADDR")]
    #[cfg_attr(not(feature = "http"), arg(hide = true))]
    pub http: Option<SocketAddr>,
    /// With `--http`: a file of bearer tokens, a line a token, `CALLER
    /// TOKEN` (at least 16 characters; `#` starts a comment line). Each
    /// request then needs `Authorization: Bearer TOKEN`, or gets 401, and
    /// runs as the token's caller: one the application knows (the caller
    /// the command runs as, `default` unless told otherwise, or another its
    /// code names), with that caller's policy (`--allow` narrows only the
    /// caller the command runs as). Without it, only clients on this
    /// machine are served, as the caller the command runs as.
    #[arg(long, value_name = "PATH", requires = "http")]
    #[cfg_attr(not(feature = "http"), arg(hide = true))]
    pub token_file: Option<PathBuf>,
    /// With `--http`: serve as an OAuth 2.1 resource server of this
    /// authorization server (its issuer URL: `https`, or `http` on
    /// loopback). Each request then needs an access token (a JWT) it signed
    /// for `--oauth-audience`, checked against the keys it publishes; a
    /// client without one is pointed, by the 401, to this server's
    /// protected resource metadata (`/.well-known/oauth-protected-resource/mcp`).
    /// A `tools/call` needs `--oauth-read-scope` for a tool with no side
    /// effect, `--oauth-write-scope` for one with side effects (403
    /// `insufficient_scope` otherwise). Who the token names is recorded in
    /// every audit record, question and inbox card. Not with `--token-file`.
    #[arg(
        long,
        value_name = "URL",
        requires_all = ["http", "oauth_audience"],
        conflicts_with = "token_file"
    )]
    #[cfg_attr(not(feature = "oauth"), arg(hide = true))]
    pub oauth_issuer: Option<String>,
    /// With `--oauth-issuer`: this server's canonical resource URI, the
    /// `aud` its tokens must name (`https://mcp.example.com/mcp`).
    #[arg(long, value_name = "URI", requires = "oauth_issuer")]
    #[cfg_attr(not(feature = "oauth"), arg(hide = true))]
    pub oauth_audience: Option<String>,
    /// With `--oauth-issuer`: the scope a call of a tool with no side
    /// effect needs (`NAME.read`, NAME the application's).
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    #[cfg_attr(not(feature = "oauth"), arg(hide = true))]
    pub oauth_read_scope: Option<String>,
    /// With `--oauth-issuer`: the scope a call of a tool with side effects
    /// needs (`NAME.write`).
    #[arg(long, value_name = "SCOPE", requires = "oauth_issuer")]
    #[cfg_attr(not(feature = "oauth"), arg(hide = true))]
    pub oauth_write_scope: Option<String>,
    /// With `--oauth-issuer`: which caller a token's principal runs as,
    /// `CALLER=sub:SUBJECT`, `CALLER=client_id:CLIENT` or `CALLER=*`; the
    /// first rule that admits it wins, and a principal none admits is
    /// refused (403). Without any, every principal runs as the caller the
    /// command runs as. Repeatable.
    #[arg(long, value_name = "RULE", requires = "oauth_issuer")]
    #[cfg_attr(not(feature = "oauth"), arg(hide = true))]
    pub oauth_caller: Vec<String>,
    /// With `--oauth-issuer`: the least seconds between two reads of the
    /// issuer's keys for a token signed with a key not among them (10).
    #[arg(long, value_name = "SECONDS", requires = "oauth_issuer", value_parser = clap::value_parser!(u32).range(1..))]
    #[cfg_attr(not(feature = "oauth"), arg(hide = true))]
    pub oauth_keys_refresh: Option<u32>,
    /// With `--http`: a browser origin allowed to call
    /// (`https://console.example.com`), besides the server's own loopback
    /// one; a request from any other `Origin` gets 403. Repeatable.
    #[arg(long, value_name = "URL", requires = "http")]
    #[cfg_attr(not(feature = "http"), arg(hide = true))]
    pub allow_origin: Vec<String>,
    /// With `--http`: a host a request may name in its `Host` header
    /// (`mcp.example.com`, or with a port), besides the loopback names and
    /// the address bound; a request naming another gets 403 (against DNS
    /// rebinding). Give the name a proxy in front, or clients of a
    /// `0.0.0.0` bind, reach the server by. Repeatable.
    #[arg(long, value_name = "HOST[:PORT]", requires = "http")]
    #[cfg_attr(not(feature = "http"), arg(hide = true))]
    pub allow_host: Vec<String>,
    /// With `--http`: connections open at once, at most (1024); one more
    /// is answered 503 with `Retry-After` and closed.
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
    #[cfg_attr(not(feature = "http"), arg(hide = true))]
    pub max_connections: Option<u32>,
    /// With `--http`: sessions one caller may have open at once (64); one
    /// more `initialize` is answered 429 until the caller ends one or one
    /// idles out.
    #[arg(long, value_name = "N", requires = "http", value_parser = clap::value_parser!(u32).range(1..))]
    #[cfg_attr(not(feature = "http"), arg(hide = true))]
    pub max_sessions_per_caller: Option<u32>,
}

/// `serve`'s arguments.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on. Keep it on loopback and put a TLS proxy in
    /// front to reach it from elsewhere.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// A file of tokens, a line a person: `NAME TOKEN`, or only `TOKEN`
    /// (named `operator`); each decision records the name. `NAME TOKEN
    /// admin` makes the person an admin, who may also stop a tool, a caller
    /// or everything from the inbox (`/admin`). Without it, one token is
    /// generated and its sign-in address printed.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Make the generated token an admin's (without `--token-file`): it may
    /// also stop a tool, a caller or everything from the inbox (`/admin`).
    /// With a token file, end an admin's line with `admin` instead.
    #[arg(long, conflicts_with = "token_file")]
    pub admin: bool,
    /// Mark the sign-in cookie `Secure`, so a browser sends it only over
    /// TLS: set it when the inbox is reached through a TLS proxy. (A
    /// sign-in whose request says it came over TLS, by an `https` Origin or
    /// `X-Forwarded-Proto: https`, gets `Secure` without it.)
    #[arg(long)]
    pub cookie_secure: bool,
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
    /// With `--verify`, the first file of the chain.
    #[arg(value_name = "AUDIT.jsonl|-")]
    pub audit_log: PathBuf,
    /// With `--verify`: the files that continue the chain, in the order
    /// they were written (rotated files, oldest first).
    #[arg(value_name = "MORE.jsonl", requires = "verify")]
    pub more: Vec<PathBuf>,
    /// Verify the audit's hash chain over the files instead of reporting:
    /// exit 0 with a line naming the last record and its hash (keep it
    /// elsewhere: a removed tail or a file rewritten whole is caught only
    /// by it), exit 1 naming the first record that was changed, removed,
    /// inserted or reordered (file:line and why).
    #[arg(long, conflicts_with_all = ["json", "rejected_calls"])]
    pub verify: bool,
    /// With `--verify`: the first file continues a chain whose last line
    /// hashed to HASH (its file is gone, or kept elsewhere), instead of
    /// starting it.
    #[arg(long, value_name = "HASH", requires = "verify")]
    pub after: Option<String>,
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
