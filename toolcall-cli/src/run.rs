//! Running a command: against the registry alone, or with the
//! application's dispatcher.

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use toolcall_core::store::Store;
use toolcall_core::{Dispatcher, Policy, Registry};

use crate::contract::{check, report, write_lock};
use crate::definitions::definitions;
use crate::replay::replay;
use crate::{Command, Error};

impl Command {
    /// Whether the command runs tools (`replay`, `mcp`, `serve`, `agent`,
    /// `admin`) and so needs a dispatcher and its store; the others need at
    /// most the registry. `agent --serve-script` runs none: it plays a
    /// model, and the tools run in the `agent` that talks to it.
    pub fn runs_tools(&self) -> bool {
        match self {
            Command::Agent(args) => args.serve_script.is_none(),
            Command::Replay(_) | Command::Mcp(_) | Command::Serve(_) | Command::Admin(_) => true,
            Command::Definitions(_) | Command::Report(_) | Command::Lock(_) | Command::Check(_) => {
                false
            }
        }
    }

    /// Whether the command serves clients over HTTP (`mcp --http`, `serve`):
    /// then it runs on a multi-threaded runtime ([`Command::runtime`]).
    pub fn serves_http(&self) -> bool {
        match self {
            Command::Mcp(args) => args.http.is_some(),
            Command::Serve(_) => true,
            _ => false,
        }
    }

    /// The async runtime the command runs on: a multi-threaded one for a
    /// server ([`serves_http`](Command::serves_http)), a worker a core, so
    /// that one client's call waiting for the store never stalls another
    /// client; one thread for the others, which serve one conversation.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        if self.serves_http() {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
    }

    /// The command's name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Definitions(_) => "definitions",
            Command::Replay(_) => "replay",
            Command::Report(_) => "report",
            Command::Lock(_) => "lock",
            Command::Check(_) => "check",
            Command::Mcp(_) => "mcp",
            Command::Serve(_) => "serve",
            Command::Agent(_) => "agent",
            Command::Admin(_) => "admin",
        }
    }

    /// The cargo feature of this crate the command needs, when this build
    /// leaves it out: `mcp` for `mcp`, `http` for `mcp --http`, `oauth` for
    /// `mcp --oauth-issuer`, `inbox` for `serve`, `agent` for `agent`. Such
    /// a command answers [`Error::MissingFeature`].
    pub fn missing_feature(&self) -> Option<&'static str> {
        match self {
            Command::Mcp(_) if !cfg!(feature = "mcp") => Some("mcp"),
            Command::Mcp(args) if args.http.is_some() && !cfg!(feature = "http") => Some("http"),
            Command::Mcp(args) if args.oauth_issuer.is_some() && !cfg!(feature = "oauth") => {
                Some("oauth")
            }
            Command::Serve(_) if !cfg!(feature = "inbox") => Some("inbox"),
            Command::Agent(_) if !cfg!(feature = "agent") => Some("agent"),
            _ => None,
        }
    }

    /// [`Error::MissingFeature`] for a command whose feature this build
    /// leaves out ([`missing_feature`](Self::missing_feature)), naming the
    /// command as it was given (`mcp --http` for `http`).
    pub(crate) fn missing_feature_error(&self) -> Option<Error> {
        let feature = self.missing_feature()?;
        let command = match feature {
            "http" => "mcp --http",
            "oauth" => "mcp --oauth-issuer",
            _ => self.name(),
        };
        Some(Error::MissingFeature { command, feature })
    }

    /// Runs a command that does not run tools, against the registry; the
    /// tools `policy` allows are the ones `definitions` prints, and
    /// `agent --serve-script` serves its script until the process ends. A
    /// command that runs tools is [`Error::NeedsDispatcher`].
    pub fn run_static(&self, registry: &Registry, policy: &Policy) -> Result<(), Error> {
        match self {
            Command::Definitions(args) => definitions(registry, policy, args),
            Command::Report(args) => report(registry, args),
            Command::Lock(args) => write_lock(registry, &args.file),
            Command::Check(args) => check(registry, &args.file),
            Command::Agent(args) if args.serve_script.is_some() => self.serve_script(args),
            Command::Replay(_)
            | Command::Mcp(_)
            | Command::Serve(_)
            | Command::Agent(_)
            | Command::Admin(_) => Err(Error::NeedsDispatcher),
        }
    }

    /// `agent --serve-script`, on a runtime of its own: no store is opened
    /// and no state built for a command that runs no tool.
    fn serve_script(&self, args: &crate::AgentArgs) -> Result<(), Error> {
        if let Some(error) = self.missing_feature_error() {
            return Err(error);
        }
        #[cfg(feature = "agent")]
        {
            let runtime = self
                .runtime()
                .map_err(Error::io("start the async runtime"))?;
            runtime.block_on(crate::agent::agent_without_tools(args))
        }
        #[cfg(not(feature = "agent"))]
        {
            // Answered above: `missing_feature` names `agent`.
            let _ = args;
            Err(Error::MissingFeature {
                command: "agent",
                feature: "agent",
            })
        }
    }

    /// Runs any command with the application's dispatcher; its registry and
    /// its default caller's policy stand for [`run_static`](Self::run_static)'s.
    /// `program` is the application's name (the MCP server introduces itself
    /// by it). `session` is the conversation `replay` runs in, and the one
    /// every `mcp` connection runs in (`toolcall_mcp::Options::conversation`).
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
            session: Some(session),
            default_session: session,
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
            default_session,
            audit,
        } = *context;
        // Without the `mcp` and `inbox` features, no command reads these.
        let _ = (program, audit);
        if let Some(error) = self.missing_feature_error() {
            return Err(error);
        }
        if let Some(line) = self.conversation_line(session, default_session) {
            eprintln!("{line}");
        }
        match self {
            Command::Replay(args) => {
                let session = session.unwrap_or(default_session);
                replay(&dispatcher, session, args).await
            }
            Command::Admin(command) => crate::admin::admin(&dispatcher, command).await,
            #[cfg(feature = "agent")]
            Command::Agent(args) => {
                let session = session.unwrap_or(default_session);
                crate::agent::agent(&dispatcher, session, args).await
            }
            #[cfg(feature = "inbox")]
            Command::Serve(args) => crate::serve::serve(program, dispatcher, args, audit).await,
            #[cfg(feature = "mcp")]
            Command::Mcp(args) => {
                let options = match session {
                    Some(conversation) => toolcall_mcp::Options::conversation(conversation),
                    None => toolcall_mcp::Options::new(MCP_PREFIX),
                };
                let options = options
                    .name(program)
                    .wait_approval(std::time::Duration::from_secs(args.wait_approval))
                    .elicitation_approves(args.elicitation_approves)
                    .pinned(args.pin_conversation);
                match args.http {
                    None => toolcall_mcp::serve_stdio(dispatcher, options)
                        .await
                        .map_err(Error::Mcp),
                    #[cfg(feature = "http")]
                    Some(addr) => {
                        crate::http::serve(program, dispatcher, options, args, addr).await
                    }
                    // Answered above: `missing_feature` names `http`.
                    #[cfg(not(feature = "http"))]
                    Some(_) => Err(Error::MissingFeature {
                        command: "mcp --http",
                        feature: "http",
                    }),
                }
            }
            other => other.run_static(dispatcher.registry(), dispatcher.default_caller().policy()),
        }
    }

    /// The line `replay` and `mcp` print on standard error at start: the
    /// conversation they run in, given `session` (the command line's
    /// `--session-id`) and the application's `default` for `replay`, and
    /// where it came from. `None` for the other commands.
    pub fn conversation_line(&self, session: Option<&str>, default: &str) -> Option<String> {
        let line = match (self, session) {
            (Command::Agent(args), _) if args.serve_script.is_some() => return None,
            (Command::Replay(_) | Command::Agent(_), Some(session)) => {
                format!("conversation: {session} (--session-id)")
            }
            (Command::Replay(_) | Command::Agent(_), None) => {
                format!("conversation: {default} (default; --session-id names another)")
            }
            (Command::Mcp(_), Some(session)) => format!(
                "conversation: {session} (--session-id: every connection, and every process \
                 over the same store)"
            ),
            (Command::Mcp(_), None) => "conversation: per connection (no --session-id: a \
                 reconnect forgets the taint, replays and pending approvals; a client may name \
                 one in _meta \"toolcall/conversation\")"
                .to_owned(),
            _ => return None,
        };
        Some(line)
    }
}

/// The conversation `replay` runs in when the command line names none.
pub const DEFAULT_CONVERSATION: &str = "default";

/// The prefix of the conversations of `mcp`'s connections when the command
/// line names none: each connection's is `mcp/<random connection id>`.
#[cfg(feature = "mcp")]
const MCP_PREFIX: &str = "mcp";

/// What a command may need besides the dispatcher ([`Command::run_in`]).
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The application's name (the MCP server and the inbox go by it).
    pub program: &'a str,
    /// The conversation `replay` runs in, and the one every `mcp`
    /// connection runs in, when the command line names one (`--session-id`);
    /// `None` when it does not: `replay` then runs in
    /// [`DEFAULT_CONVERSATION`], and `mcp` gives each connection a
    /// conversation of its own (a reconnect forgets its taint, replays and
    /// pending approvals).
    pub session: Option<&'a str>,
    /// The conversation `replay` runs in when the command line names none:
    /// the application's explicit default ([`DEFAULT_CONVERSATION`] for
    /// [`App`](crate::App)), printed at start.
    pub default_session: &'a str,
    /// The audit log the application writes (`--audit`): the inbox's
    /// metrics page reads it.
    pub audit: Option<&'a Path>,
}
