//! `serve`: the approval inbox.

use std::any::Any;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use toolcall_contract::report;
use toolcall_core::Dispatcher;
use toolcall_core::store::Store;

use crate::{Error, ServeArgs};

/// The inbox's options for `serve`'s arguments.
fn options(
    program: &str,
    access: toolcall_inbox::Access,
    args: &ServeArgs,
    audit: Option<&Path>,
) -> toolcall_inbox::Options {
    let mut options = toolcall_inbox::Options::new(access)
        .title(program)
        .cookie_secure(args.cookie_secure)
        .summarize(Arc::new(|records| {
            report::Report::from_records(records).to_json()
        }));
    if let Some(path) = audit {
        options = options.audit(path);
    }
    options
}

/// Who may sign in: the people of `--token-file` (its `admin` lines
/// admins), or one generated token, an admin's with `--admin`.
fn access(args: &ServeArgs) -> Result<toolcall_inbox::Access, Error> {
    let access = match &args.token_file {
        Some(path) => toolcall_inbox::Access::from_file(path, toolcall_inbox::DEFAULT_NAME),
        None => toolcall_inbox::Access::generate(toolcall_inbox::DEFAULT_NAME),
    }
    .map_err(|e| Error::Input(e.to_string()))?;
    Ok(if args.admin { access.admins() } else { access })
}

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
    let access = access(args)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Error::Serve(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Serve(e.to_string()))?
        .to_string();
    let options = options(program, access.clone(), args, audit);
    // An address is a notice, never a result: standard error.
    let mut stderr = io::stderr().lock();
    let lines = if generated {
        format!(
            "{program} inbox: {}\n(open it once to sign in; the token was generated for this run{})\n",
            toolcall_inbox::sign_in_url(&addr, &access.users()[0]),
            if args.admin {
                ", an admin's: /admin stops tools, callers or everything"
            } else {
                ""
            }
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
    stderr
        .write_all(lines.as_bytes())
        .and_then(|()| stderr.flush())
        .map_err(Error::io("write to standard error"))?;
    drop(stderr);
    if !args.listen.ip().is_loopback() {
        eprintln!(
            "{program}: the inbox listens on {addr}, beyond this machine: put a TLS proxy in front of it{}",
            if args.cookie_secure {
                ""
            } else {
                " (and pass --cookie-secure)"
            }
        );
    }
    toolcall_inbox::serve(dispatcher, options, listener)
        .await
        .map_err(|e| Error::Serve(e.to_string()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::Command;
    use crate::tests::{Cli, command};

    fn args_of(argv: &[&str]) -> ServeArgs {
        let Command::Serve(args) = command(argv) else {
            panic!("not serve");
        };
        args
    }

    fn options_of(argv: &[&str]) -> toolcall_inbox::Options {
        let args = args_of(argv);
        let access = toolcall_inbox::Access::token("ana", "0123456789abcdef0123").unwrap();
        options("shop", access, &args, None)
    }

    #[test]
    fn cookie_secure_marks_the_sign_in_cookie_secure() {
        assert!(
            !options_of(&["app", "serve"]).cookie_secure,
            "off by default"
        );
        let options = options_of(&["app", "serve", "--cookie-secure"]);
        assert!(options.cookie_secure);
        assert_eq!(options.title, "shop");
    }

    #[test]
    fn admin_makes_the_generated_token_an_admins() {
        let plain = access(&args_of(&["app", "serve"])).unwrap();
        assert!(!plain.users()[0].is_admin(), "not an admin by default");
        let admin = access(&args_of(&["app", "serve", "--admin"])).unwrap();
        assert!(admin.users()[0].is_admin());
        assert_eq!(admin.users()[0].name(), toolcall_inbox::DEFAULT_NAME);
        let with_file = Cli::try_parse_from(["app", "serve", "--admin", "--token-file", "t"]);
        assert!(with_file.is_err(), "a token file says who is an admin");
    }

    #[test]
    fn a_token_files_admin_lines_are_admins() {
        let dir = std::env::temp_dir().join(format!("toolcall-serve-admin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens");
        std::fs::write(
            &file,
            "ana 0123456789abcdef0123 admin\nbo fedcba9876543210fedc\n",
        )
        .unwrap();
        let path = file.to_str().unwrap();
        let access = access(&args_of(&["app", "serve", "--token-file", path])).unwrap();
        let admins: Vec<(&str, bool)> = access
            .users()
            .iter()
            .map(|u| (u.name(), u.is_admin()))
            .collect();
        assert_eq!(admins, [("ana", true), ("bo", false)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
