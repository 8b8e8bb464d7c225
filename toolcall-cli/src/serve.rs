//! `serve`: the approval inbox.

use std::any::Any;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use toolcall_contract::report;
use toolcall_core::{Dispatcher, Store};

use crate::{Error, ServeArgs};

/// `serve`: the approval inbox over the dispatcher's store, until the
/// process ends.
pub(crate) async fn serve<S, St>(
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
