//! `admin`: the operators' controls in the store (see
//! [`toolcall_core::controls`]): stops, the policy file, the history.

use std::any::Any;
use std::path::Path;

use toolcall_core::Dispatcher;
use toolcall_core::controls::{self, ChangeError, Controls, Target};
use toolcall_core::store::Store;

use crate::Error;
use crate::args::{AdminCommand, PolicyCommand, StopArgs};

/// Runs one `admin` subcommand against the dispatcher's store, printing
/// what it did on standard output.
pub(crate) async fn admin<S, St>(
    dispatcher: &Dispatcher<S, St>,
    command: &AdminCommand,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    let store = dispatcher.store();
    match command {
        AdminCommand::Disable(args) => {
            let target = target(dispatcher, args)?;
            let Some(reason) = args.reason.as_deref() else {
                return Err(Error::Input(
                    "disable needs --reason: the model and the people on duty are told it"
                        .to_owned(),
                ));
            };
            let version = controls::stop(store, target.clone(), reason, &by(&args.by))
                .await
                .map_err(changed)?;
            println!("stopped {target} (controls version {version}): {reason}");
        }
        AdminCommand::Enable(args) => {
            let target = target(dispatcher, args)?;
            let version = controls::resume(store, target.clone(), &by(&args.by))
                .await
                .map_err(changed)?;
            println!("enabled {target} (controls version {version})");
        }
        AdminCommand::Policy(PolicyCommand::Check { file }) => {
            let policy = read_policy(file)?;
            let errors = controls::check(&policy, dispatcher.registry(), &dispatcher.callers());
            if !errors.is_empty() {
                return Err(changed(ChangeError::Invalid(errors)));
            }
            println!("{}: the policy checks", file.display());
        }
        AdminCommand::Policy(PolicyCommand::Load { file, by: who }) => {
            let policy = read_policy(file)?;
            let from = file.display().to_string();
            let version = controls::load_policy(
                store,
                dispatcher.registry(),
                &dispatcher.callers(),
                &policy,
                &by(who),
                &from,
            )
            .await
            .map_err(changed)?;
            println!("{from}: loaded as controls version {version}");
        }
        AdminCommand::Policy(PolicyCommand::Show) => {
            let (version, controls) = controls::read(store).await.map_err(changed)?;
            let text = toml::to_string_pretty(&controls)
                .map_err(|error| Error::Input(format!("the controls as TOML: {error}")))?;
            println!("# controls version {version}\n{text}");
        }
        AdminCommand::History { limit } => {
            let changes = store
                .controls_history(*limit)
                .await
                .map_err(|error| changed(ChangeError::Store(error)))?;
            if changes.is_empty() {
                println!("no change of the controls yet");
            }
            for change in changes {
                println!(
                    "{}\t{}\t{}\t{}",
                    change.version,
                    rfc3339(change.at_ms),
                    change.by,
                    change.summary
                );
            }
        }
    }
    Ok(())
}

/// What `args` name, checked against the tools and callers (the closest
/// real name when it is none).
fn target<S, St>(dispatcher: &Dispatcher<S, St>, args: &StopArgs) -> Result<Target, Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    if args.all {
        return Ok(Target::Everything);
    }
    if let Some(id) = &args.caller {
        if dispatcher.caller(id).is_none() {
            let known: Vec<&str> = dispatcher.callers().iter().map(|c| c.id()).collect();
            return Err(Error::Input(format!(
                "no caller `{id}`: the callers are {}",
                known.join(", ")
            )));
        }
        return Ok(Target::Caller(id.clone()));
    }
    let tool = args.tool.as_deref().unwrap_or_default();
    if dispatcher.registry().get(tool).is_none() {
        let known: Vec<&str> = dispatcher.registry().iter().map(|t| t.name()).collect();
        return Err(Error::Input(format!(
            "no tool `{tool}`: the tools are {}",
            known.join(", ")
        )));
    }
    Ok(Target::Tool(tool.to_owned()))
}

/// Who makes a change: `--by`, `$USER`, or `operator`.
fn by(given: &Option<String>) -> String {
    given
        .clone()
        .or_else(|| std::env::var("USER").ok().filter(|user| !user.is_empty()))
        .unwrap_or_else(|| "operator".to_owned())
}

/// A policy file, read as TOML into the controls (its unknown keys are
/// errors naming them; stops are not a policy file's).
fn read_policy(file: &Path) -> Result<Controls, Error> {
    let text =
        std::fs::read_to_string(file).map_err(Error::io(format!("read {}", file.display())))?;
    let policy: Controls = toml::from_str(&text)
        .map_err(|error| Error::Input(format!("{}: {error}", file.display())))?;
    if !policy.stops.is_empty() {
        return Err(Error::Input(format!(
            "{}: `stops` are not a policy file's: use `admin disable` and `admin enable`",
            file.display()
        )));
    }
    Ok(policy)
}

fn changed(error: ChangeError) -> Error {
    Error::Input(error.to_string())
}

/// `ms` since the Unix epoch in RFC 3339 (UTC).
fn rfc3339(ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|at| {
            at.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{ms} ms"))
}
