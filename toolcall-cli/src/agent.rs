//! `agent`: the whole agent loop against a model server, every tool call
//! through the pipeline.
//!
//! Each turn sends the conversation and the tools the caller may use
//! (OpenAI: strict function definitions, `Format::OpenAi`; Anthropic:
//! `Format::Anthropic`), reads the assistant message with the project's
//! adapter for that API ([`Provider`]: `OpenAi`, `Anthropic`), runs every
//! call of it through the dispatcher in the model's order, asks
//! for the approvals the calls wait for, and sends back the pipeline's
//! answer to every call id ([`Turn::messages`]). It stops at the first
//! assistant message without a tool call (the answer), or after
//! `--max-turns` requests (an error: the model never answered).
//!
//! Every request that sends tools sends `--tool-choice` as the API's
//! `tool_choice` ([`ToolChoice::value`]): `auto` unless told otherwise (a
//! server that reads no `tool_choice` as "no tools", as llama-cpp-python's
//! `chatml-function-calling` does, then offers them); `required` or a
//! tool's name until the model has called a tool, then `auto`. While a
//! request waits, standard error says so every `--progress-every` seconds.

mod anthropic;
mod openai;
pub mod script;

use std::any::Any;
use std::io::{self, BufRead, IsTerminal, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolcall_core::store::Store;
use toolcall_core::{Approvals, Call, Decision, Dispatcher};
use toolcall_providers::{Format, Outcome, Provider, RunOptions, ToolChoice, Turn};

use crate::{AgentArgs, AgentProvider, Error};

/// Who decides an approval at the terminal, for the audit record.
const PERSON: &str = "terminal";

/// `agent`: serves a script (`--serve-script`), or runs the loop.
pub(crate) async fn agent<S, St>(
    dispatcher: &Dispatcher<S, St>,
    session: &str,
    args: &AgentArgs,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    if let Some(path) = &args.serve_script {
        return serve_script(path, args).await;
    }
    let settings = Settings::from_args(args)?;
    let mut transcript = Transcript::new(args.json);
    transcript.line(format!("user: {}", settings.prompt));
    let outcome = run(
        dispatcher,
        session,
        &settings,
        args.provider,
        &mut transcript,
    )
    .await;
    transcript.finish(&outcome);
    outcome.map(|_| ())
}

/// The model server, in the API it speaks.
enum Api {
    OpenAi(openai::OpenAi),
    Anthropic(anthropic::Anthropic),
}

/// One answer of the model server.
pub(crate) struct Reply {
    /// The body as it came: the adapter reads the calls from this text.
    pub(crate) text: String,
    /// The assistant's words.
    pub(crate) said: String,
    /// The assistant message as the next request sends it back.
    pub(crate) assistant: Value,
}

impl Api {
    fn url(&self) -> &str {
        match self {
            Api::OpenAi(api) => api.url(),
            Api::Anthropic(api) => api.url(),
        }
    }

    fn provider(&self) -> Provider {
        match self {
            Api::OpenAi(_) => Provider::OpenAi,
            Api::Anthropic(_) => Provider::Anthropic,
        }
    }

    async fn complete(&self, messages: &[Value], choice: &ToolChoice) -> Result<Reply, Error> {
        match self {
            Api::OpenAi(api) => api.complete(messages, choice).await,
            Api::Anthropic(api) => api.complete(messages, choice).await,
        }
    }
}

/// The names of the tools the definitions describe (the `neutral` format's).
fn tool_names(neutral: &Value) -> Vec<&str> {
    neutral
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str())
        .collect()
}

/// The loop; the model's answer.
async fn run<S, St>(
    dispatcher: &Dispatcher<S, St>,
    session: &str,
    settings: &Settings,
    provider: AgentProvider,
    transcript: &mut Transcript,
) -> Result<String, Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    let policy = dispatcher.default_caller().policy();
    let definitions =
        |format| toolcall_providers::definitions(dispatcher.registry(), policy, format);
    if let Some(tool) = settings.tool_choice.tool() {
        let neutral = definitions(Format::Neutral);
        let allowed = tool_names(&neutral);
        if !allowed.contains(&tool) {
            return Err(Error::Input(format!(
                "agent: --tool-choice {tool}: not a tool the caller may use (allowed: {})",
                if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                }
            )));
        }
    }
    let (api, mut messages) = match provider {
        AgentProvider::Openai => (
            Api::OpenAi(openai::OpenAi::new(settings, definitions(Format::OpenAi))?),
            openai::OpenAi::start(settings),
        ),
        AgentProvider::Anthropic => (
            Api::Anthropic(anthropic::Anthropic::new(
                settings,
                definitions(Format::Anthropic),
            )?),
            anthropic::Anthropic::start(settings),
        ),
    };
    let mut choice = settings.tool_choice.clone();
    for number in 1..=settings.max_turns {
        let progress = Progress {
            number,
            turns: settings.max_turns,
            url: api.url(),
            every: settings.progress_every,
        };
        // The whole request within --timeout, the client's own retries
        // (and a server's Retry-After) included.
        let request = tokio::time::timeout(settings.timeout, api.complete(&messages, &choice));
        let reply = progress.wait(request).await.map_err(|_| {
            Error::Model(format!(
                "the model server at {}: no answer in time (--timeout {} s), its retries \
                 included",
                api.url(),
                settings.timeout.as_secs()
            ))
        })??;
        // The text form: a member written twice in the message is an
        // error, and each call's arguments reach the pipeline as written.
        let mut turn = api
            .provider()
            .run_str(dispatcher, &reply.text, RunOptions::new().session(session))
            .await
            .map_err(|e| {
                Error::Model(format!(
                    "the model server at {}: {}",
                    api.url(),
                    safe(&e.to_string())
                ))
            })?;
        if choice.forces_a_call() && !turn.outcomes.is_empty() {
            // Called: from now on the model may answer.
            choice = ToolChoice::Auto;
        }
        if !reply.said.is_empty() {
            transcript.line(format!("assistant: {}", reply.said));
        }
        messages.push(reply.assistant);
        if turn.outcomes.is_empty() {
            transcript.messages(&messages);
            return Ok(reply.said);
        }
        transcript.turn(&turn);
        settle(dispatcher, session, settings, &mut turn, transcript).await?;
        messages.extend(turn.messages());
        transcript.messages(&messages);
    }
    Err(Error::NoAnswer {
        turns: settings.max_turns,
    })
}

/// `agent --serve-script FILE`, which runs no tool: without a dispatcher.
pub(crate) async fn agent_without_tools(args: &AgentArgs) -> Result<(), Error> {
    match &args.serve_script {
        Some(path) => serve_script(path, args).await,
        None => Err(Error::NeedsDispatcher),
    }
}

/// `agent --serve-script FILE`: the scripted model, until the process ends.
async fn serve_script(path: &std::path::Path, args: &AgentArgs) -> Result<(), Error> {
    let script = script::Script::from_file(path)?;
    let turns = script.turns.len();
    let listen = args
        .listen
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8090)));
    let server = script.serve(listen).await?;
    // Addresses are notices: standard error, as every command's are.
    let mut stderr = io::stderr().lock();
    writeln!(
        stderr,
        "scripted model ({turns} turn(s) from {}) at {}\n  \
         OpenAI-compatible: --base-url {}\n  \
         Anthropic-compatible: --provider anthropic --base-url {}\n  \
         the requests it got: GET http://{}/requests",
        path.display(),
        server.addr(),
        server.openai_base_url(),
        server.anthropic_base_url(),
        server.addr(),
    )
    .and_then(|()| stderr.flush())
    .map_err(Error::io("write to standard error"))?;
    drop(stderr);
    std::future::pending::<()>().await;
    Ok(())
}

/// What every loop needs from the command line.
pub(crate) struct Settings {
    pub(crate) prompt: String,
    pub(crate) base_url: String,
    pub(crate) model: String,
    pub(crate) system: Option<String>,
    pub(crate) max_turns: u32,
    pub(crate) max_tokens: u32,
    pub(crate) timeout: Duration,
    pub(crate) yes: bool,
    pub(crate) wait_approval: u64,
    pub(crate) tool_choice: ToolChoice,
    pub(crate) progress_every: u64,
}

impl Settings {
    fn from_args(args: &AgentArgs) -> Result<Settings, Error> {
        if args.listen.is_some() {
            return Err(Error::Input(
                "agent: --listen goes with --serve-script".to_owned(),
            ));
        }
        let prompt = args
            .prompt
            .clone()
            .ok_or_else(|| Error::Input("agent: give the prompt".to_owned()))?;
        let base_url = args
            .base_url
            .clone()
            .ok_or_else(|| Error::Input("agent: give --base-url".to_owned()))?;
        let model = match &args.model {
            Some(model) => model.clone(),
            None => std::env::var("LLM_MODEL")
                .ok()
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| {
                    Error::Input(
                        "agent: give the model with --model NAME, or in LLM_MODEL".to_owned(),
                    )
                })?,
        };
        Ok(Settings {
            prompt,
            base_url: base_url.trim_end_matches('/').to_owned(),
            model,
            system: args.system.clone(),
            max_turns: args.max_turns,
            max_tokens: args.max_tokens,
            timeout: Duration::from_secs(args.timeout),
            yes: args.yes,
            wait_approval: args.wait_approval,
            tool_choice: args.tool_choice.clone(),
            progress_every: args.progress_every,
        })
    }
}

/// The HTTP client both loops use: rustls over ring, a timeout per request.
pub(crate) fn http_client(timeout: Duration) -> Result<reqwest::Client, Error> {
    // Another part of the process (or the application, for post-quantum key
    // exchange with aws-lc-rs) may have installed a provider already.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // rustls 0.23.48 deprecates ring's provider for its lack of
        // post-quantum key exchange and offers no other way to make it; ring
        // stays because aws-lc-rs would add a C build to the command line's.
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| Error::Model(format!("cannot set up the HTTP client: {e}")))
}

/// The reason a request to the model failed, for a person: what was asked
/// of which server, and why.
pub(crate) fn unreachable(url: &str, error: &reqwest::Error) -> Error {
    let why = if error.is_connect() {
        "cannot connect (is the server running?)".to_owned()
    } else if error.is_timeout() {
        "no answer in time (--timeout)".to_owned()
    } else {
        let mut why = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            why.push_str(": ");
            why.push_str(&cause.to_string());
            source = cause.source();
        }
        why
    };
    Error::Model(format!("the model server at {url}: {why}"))
}

/// At most 300 characters of a server's body, for an error message, its
/// control and invisible characters escaped ([`safe`]).
pub(crate) fn excerpt(body: &str) -> String {
    const MAX: usize = 300;
    let body = body.trim();
    let body = match body.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &body[..at]),
        None => body.to_owned(),
    };
    safe(&body)
}

/// Text that came from the model or its server, for a terminal: a control
/// character (an ANSI escape, a newline, a carriage return), a
/// bidirectional override or an invisible one escaped (`\u{1b}`), at most
/// [`MAX_LINE`] bytes.
pub(crate) fn safe(text: &str) -> String {
    toolcall_core::__private::echo::printable(text, MAX_LINE).into_owned()
}

/// One turn's request, for the lines on standard error while it waits.
struct Progress<'a> {
    number: u32,
    turns: u32,
    url: &'a str,
    /// Seconds between two lines; 0 prints none.
    every: u64,
}

impl Progress<'_> {
    /// Runs `request`, saying on standard error that the turn waits every
    /// `every` seconds, and in how many seconds it was answered.
    async fn wait<F: std::future::Future>(&self, request: F) -> F::Output {
        if self.every == 0 {
            return request.await;
        }
        let started = Instant::now();
        let (number, turns) = (self.number, self.turns);
        progress_line(&format!(
            "agent: turn {number}/{turns}: asking the model at {}",
            self.url
        ));
        let every = Duration::from_secs(self.every);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tokio::pin!(request);
        let output = loop {
            tokio::select! {
                output = &mut request => break output,
                _ = ticks.tick() => progress_line(&format!(
                    "agent: turn {number}/{turns}: waiting for the model, {} s",
                    started.elapsed().as_secs()
                )),
            }
        };
        progress_line(&format!(
            "agent: turn {number}/{turns}: done in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        output
    }
}

fn progress_line(line: &str) {
    let mut stderr = io::stderr().lock();
    let _ = writeln!(stderr, "{}", safe(line)).and_then(|()| stderr.flush());
}

/// What the loop prints: the transcript as it goes (standard output), or,
/// with `--json`, one JSON object at the end.
pub(crate) struct Transcript {
    json: bool,
    messages: Vec<Value>,
}

/// The longest line of the transcript, in bytes: 4 KiB (a longer one is
/// shown as its head and tail).
const MAX_LINE: usize = 4096;

impl Transcript {
    fn new(json: bool) -> Self {
        Transcript {
            json,
            messages: Vec::new(),
        }
    }

    /// Prints one line of the transcript. What the model wrote (its text,
    /// a tool's name, arguments, what a tool answered) is shown escaped
    /// (a newline as `\n`, an ANSI escape as `\u{1b}`) and bounded to
    /// [`MAX_LINE`] bytes, so that it can neither forge a line of the
    /// transcript (a made-up `model calls ... -> {"ok":true}` above an
    /// approval prompt) nor flood the terminal.
    pub(crate) fn line(&mut self, line: String) {
        if !self.json {
            let line = toolcall_core::__private::echo::printable(&line, MAX_LINE);
            let mut stdout = io::stdout().lock();
            let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
        }
    }

    /// The calls of a turn and what the model reads back.
    pub(crate) fn turn(&mut self, turn: &Turn) {
        for outcome in &turn.outcomes {
            let arguments = match outcome.call.arguments() {
                toolcall_core::Arguments::Raw(text) => text.to_owned(),
                toolcall_core::Arguments::Parsed(value) => value.to_string(),
            };
            self.line(format!(
                "model calls {} {arguments} ({})",
                outcome.call.name(),
                outcome.call.id().unwrap_or("no id")
            ));
            self.line(format!("  -> {}", outcome.result.to_model_text()));
        }
    }

    /// The conversation as sent, for `--json`.
    pub(crate) fn messages(&mut self, messages: &[Value]) {
        self.messages = messages.to_vec();
    }

    fn finish(&mut self, outcome: &Result<String, Error>) {
        if !self.json {
            return;
        }
        let record = json!({
            "answer": outcome.as_ref().ok(),
            "error": outcome.as_ref().err().map(ToString::to_string),
            "messages": self.messages,
        });
        let mut stdout = io::stdout().lock();
        let _ = writeln!(stdout, "{record}").and_then(|()| stdout.flush());
    }
}

/// Asks for the approvals the calls of `turn` wait for, and puts what came
/// of each in place ([`Turn::resolve`]), as the rest of the command line
/// does: in host mode, `--yes` approves, a person at a terminal is asked (a
/// no denies the call), and without a terminal the model reads that the
/// call waits for a person. In inbox mode only a decision in the store
/// approves: with `--wait-approval SECS` the loop waits for it (a person
/// decides in `serve`), then makes the call again with its approval.
async fn settle<S, St>(
    dispatcher: &Dispatcher<S, St>,
    session: &str,
    settings: &Settings,
    turn: &mut Turn,
    transcript: &mut Transcript,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    let pending: Vec<Outcome> = turn.pending().cloned().collect();
    for outcome in pending {
        let Some(id) = outcome.result.question_id.clone() else {
            continue;
        };
        let tool = outcome.call.name();
        let asked = outcome
            .result
            .data
            .get("pending")
            .map(Value::to_string)
            .unwrap_or_default();
        let decided = if dispatcher.settings().approvals == Approvals::Inbox {
            wait_for_inbox(dispatcher, session, settings, &outcome, &id, transcript).await?
        } else {
            let decision = Decision::new(&id, session).tool(tool).by(PERSON);
            match ask(tool, &asked, settings.yes, transcript) {
                Some(true) => Some(dispatcher.approve(decision).await),
                Some(false) => Some(
                    dispatcher
                        .deny(decision, "the person at the terminal declined")
                        .await,
                ),
                None => None,
            }
        };
        if let Some(result) = decided {
            transcript.line(format!("  -> {}", result.to_model_text()));
            turn.resolve(&id, result);
        }
    }
    Ok(())
}

/// In inbox mode: waits up to `--wait-approval` for a decision in the
/// store, then makes the call again with its approval.
async fn wait_for_inbox<S, St>(
    dispatcher: &Dispatcher<S, St>,
    session: &str,
    settings: &Settings,
    outcome: &Outcome,
    id: &str,
    transcript: &mut Transcript,
) -> Result<Option<toolcall_core::ToolResult>, Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    if settings.wait_approval == 0 {
        transcript.line(format!(
            "  {} waits for a person in the inbox (`serve`): approval {id}",
            outcome.call.name()
        ));
        return Ok(None);
    }
    transcript.line(format!(
        "  waiting up to {}s for a decision on approval {id} in the inbox",
        settings.wait_approval
    ));
    let until =
        toolcall_core::store::now_ms().saturating_add(settings.wait_approval.saturating_mul(1000));
    let mut call = Call::new(outcome.call.name(), outcome.call.arguments()).session(session);
    if let Some(call_id) = outcome.call.id() {
        call = call.call_id(call_id);
    }
    let answer = dispatcher.wait_for_decision(call, id, until).await;
    if answer.code == toolcall_core::Code::ConfirmationRequired {
        transcript.line(format!("  no decision on approval {id} in time"));
        return Ok(None);
    }
    Ok(Some(answer))
}

/// Asks the person: `Some(true)` approved (or `--yes`), `Some(false)`
/// declined, `None` when there is no terminal to ask.
fn ask(tool: &str, pending: &str, yes: bool, transcript: &mut Transcript) -> Option<bool> {
    if yes {
        transcript.line(format!("  approved with --yes: {tool} {pending}"));
        return Some(true);
    }
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        transcript.line(format!(
            "  no terminal to ask for approval of {tool} {pending}: the model reads that it \
             waits for a person (pass --yes to approve)"
        ));
        return None;
    }
    eprint!("approve {}? [y/N] ", safe(&format!("{tool} {pending}")));
    let _ = io::stderr().flush();
    let mut answer = String::new();
    if stdin.lock().read_line(&mut answer).is_err() {
        return None;
    }
    let approved = answer.trim().eq_ignore_ascii_case("y");
    transcript.line(format!(
        "  {} at the terminal: {tool} {pending}",
        if approved { "approved" } else { "declined" }
    ));
    Some(approved)
}
