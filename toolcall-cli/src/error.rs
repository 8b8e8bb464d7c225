//! Why a command failed, and the process's exit code for it.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// `report --verify` found the audit's hash chain broken: the first
    /// record that was changed, removed, inserted or reordered.
    ChainBroken(toolcall_core::audit_chain::ChainBreak),
    /// `definitions --check` found the file out of date.
    Stale {
        /// How many places differ.
        count: usize,
        /// The definitions file.
        file: PathBuf,
    },
    /// The command runs tools: call [`Command::run`](crate::Command::run) with a dispatcher.
    NeedsDispatcher,
    /// The MCP server stopped with an error.
    #[cfg(feature = "mcp")]
    Mcp(toolcall_mcp::Error),
    /// The command needs a cargo feature of this crate that this build
    /// leaves out.
    MissingFeature {
        /// The command (`mcp`, `mcp --http`, `mcp --oauth-issuer`, `serve`,
        /// `agent`).
        command: &'static str,
        /// The feature (`mcp`, `http`, `oauth`, `inbox`, `agent`).
        feature: &'static str,
    },
    /// The inbox (`serve`) could not start, or stopped.
    Serve(String),
    /// The application's state could not be built from the store
    /// ([`App::from_store`](crate::App::from_store)): its own message.
    State(String),
    /// `agent`: the model server could not be used (down, an HTTP error,
    /// an answer that is not a completion).
    Model(String),
    /// `agent`: the model made no text answer within `--max-turns`
    /// requests.
    NoAnswer {
        /// The requests made.
        turns: u32,
    },
    /// The command line could not be parsed, or asked for `--help` or
    /// `--version`: clap's own message, printed by [`exit`].
    Usage(clap::Error),
}

impl Error {
    pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let action = action.into();
        move |source| Error::Io { action, source }
    }

    /// The process's exit code for this error: 1 for a breaking contract
    /// change, a stale definitions file or a broken audit chain, clap's code for [`Usage`](Error::Usage) (0 for `--help` and
    /// `--version`, 2 for a malformed command line), 3 when the model
    /// server cannot be used ([`Model`](Error::Model)), 4 when the model
    /// made no answer in time ([`NoAnswer`](Error::NoAnswer)), 2 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Breaking { .. } | Error::Stale { .. } | Error::ChainBroken(_) => 1,
            Error::Model(_) => 3,
            Error::NoAnswer { .. } => 4,
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
            Error::ChainBroken(broken) => write!(f, "the audit chain is broken: {broken}"),
            Error::NeedsDispatcher => f.write_str("this command runs tools and needs a dispatcher"),
            #[cfg(feature = "mcp")]
            Error::Mcp(error) => write!(f, "the MCP server stopped: {error}"),
            Error::MissingFeature { command, feature } => write!(
                f,
                "`{command}` is not in this build: it needs toolcall-cli's `{feature}` feature"
            ),
            Error::Serve(error) => write!(f, "the inbox: {error}"),
            Error::State(error) => write!(f, "cannot build the application's state: {error}"),
            Error::Model(error) => f.write_str(error),
            Error::NoAnswer { turns } => write!(
                f,
                "the model made no answer in {turns} request(s): it kept calling tools; \
                 raise --max-turns, or look at the transcript"
            ),
            Error::Usage(error) => write!(f, "{}", error.render()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::ChainBroken(broken) => Some(broken),
            #[cfg(feature = "mcp")]
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
            eprintln!("{}", said(program, &error));
            ExitCode::from(error.exit_code())
        }
    }
}

/// An error as standard error shows it: `program: message`, each line of
/// it as a terminal shows it safely (a name or a reason in the message,
/// typed by someone, cannot reorder or hide a part of it).
fn said(program: &str, error: &Error) -> String {
    crate::output::terminal(&format!("{program}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_shows_what_reorders_or_hides_text_as_its_escape() {
        let error = Error::Input("no caller `ana\u{202e}nib`\nand \u{1b}[31mred".to_owned());
        assert_eq!(
            said("bank", &error),
            "bank: no caller `ana\\u{202e}nib`\nand \\u{1b}[31mred"
        );
    }
}
