//! `admin`: the operators' controls in the store (see
//! [`toolcall_core::controls`]): stops, the policy file, the history.

use std::any::Any;
use std::io::{self, Write as _};
use std::path::Path;

use toolcall_core::Dispatcher;
use toolcall_core::controls::{self, ChangeError, Controls, Target};
use toolcall_core::store::Store;

use crate::Error;
use crate::args::{AdminCommand, PolicyCommand, StopArgs};
use crate::output::{line, terminal};

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
    let lines = lines(dispatcher, command).await?;
    let mut stdout = io::stdout().lock();
    for line in lines {
        writeln!(stdout, "{line}").map_err(Error::io("write to standard output"))?;
    }
    stdout
        .flush()
        .map_err(Error::io("write to standard output"))
}

/// What [`admin`] does, and the lines it prints, each as a terminal shows
/// it safely ([`line`], [`terminal`]): a name or a reason someone typed
/// cannot reorder or hide a part of it, nor forge a line.
async fn lines<S, St>(
    dispatcher: &Dispatcher<S, St>,
    command: &AdminCommand,
) -> Result<Vec<String>, Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    let store = dispatcher.store();
    let mut out = Vec::new();
    match command {
        AdminCommand::Disable(args) => {
            let target = target(dispatcher, args, false).await?;
            let Some(reason) = args.reason.as_deref() else {
                return Err(Error::Input(
                    "disable needs --reason: the model and the people on duty are told it"
                        .to_owned(),
                ));
            };
            let version = controls::stop(store, target.clone(), reason, &by(&args.by))
                .await
                .map_err(changed)?;
            out.push(line(&format!(
                "stopped {target} (controls version {version}): {reason}"
            )));
        }
        AdminCommand::Enable(args) => {
            let target = target(dispatcher, args, true).await?;
            let version = controls::resume(store, target.clone(), &by(&args.by))
                .await
                .map_err(changed)?;
            out.push(line(&format!(
                "enabled {target} (controls version {version})"
            )));
        }
        AdminCommand::Policy(PolicyCommand::Check { file }) => {
            let policy = read_policy(file)?;
            let errors = controls::check(&policy, dispatcher.registry(), &dispatcher.callers());
            if !errors.is_empty() {
                return Err(changed(ChangeError::Invalid(errors)));
            }
            out.push(line(&format!("{}: the policy checks", file.display())));
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
            out.push(line(&format!(
                "{from}: loaded as controls version {version}"
            )));
        }
        AdminCommand::Policy(PolicyCommand::Show) => {
            let (version, controls) = controls::read(store).await.map_err(changed)?;
            let text = toml::to_string_pretty(&controls)
                .map_err(|error| Error::Input(format!("the controls as TOML: {error}")))?;
            out.push(terminal(&format!("# controls version {version}\n{text}")));
        }
        AdminCommand::History { limit } => {
            let changes = store
                .controls_history(*limit)
                .await
                .map_err(|error| changed(ChangeError::Store(error)))?;
            if changes.is_empty() {
                out.push("no change of the controls yet".to_owned());
            }
            for change in changes {
                // One line a change, its fields apart: a tab typed in a
                // name or a reason is shown as `\t`, not as a column.
                out.push(
                    [
                        change.version.to_string(),
                        rfc3339(change.at_ms),
                        line(&change.by),
                        line(&change.summary),
                    ]
                    .join("\t"),
                );
            }
        }
    }
    Ok(out)
}

/// What `args` name, checked against the tools and callers (the closest
/// real name when it is none). An enable of what is stopped is taken
/// whatever its name: the stop may be of a tool an older version had.
async fn target<S, St>(
    dispatcher: &Dispatcher<S, St>,
    args: &StopArgs,
    enabling: bool,
) -> Result<Target, Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    let target = if args.all {
        Target::Everything
    } else if let Some(id) = &args.caller {
        Target::Caller(id.clone())
    } else {
        Target::Tool(args.tool.clone().unwrap_or_default())
    };
    let Some(unknown) =
        controls::unknown_target(&target, dispatcher.registry(), &dispatcher.callers())
    else {
        return Ok(target);
    };
    if enabling {
        let (_, current) = controls::read(dispatcher.store()).await.map_err(changed)?;
        if current.stops.iter().any(|stop| stop.target == target) {
            return Ok(target);
        }
    }
    Err(Error::Input(unknown.problem))
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use toolcall::{Policy, tools};

    use super::*;
    use crate::tests::pay;
    use toolcall_core::Caller;

    fn stop(tool: Option<&str>, caller: Option<&str>, reason: &str, by: &str) -> StopArgs {
        StopArgs {
            tool: tool.map(str::to_owned),
            caller: caller.map(str::to_owned),
            all: false,
            reason: Some(reason.to_owned()),
            by: Some(by.to_owned()),
        }
    }

    #[test]
    fn admin_names_the_closest_real_name_and_shows_typed_text_escaped() {
        let dispatcher = Dispatcher::builder(tools![pay].unwrap(), Arc::new(()))
            .callers([Caller::new("support", Policy::new().allow(["pay"]))])
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let run = |command: AdminCommand| runtime.block_on(lines(&dispatcher, &command));
        for (args, said) in [
            (
                stop(None, Some("suport"), "x", "ana"),
                "no caller `suport` (did you mean `support`?); the callers are default, support",
            ),
            (
                stop(Some("pya"), None, "x", "ana"),
                "no tool `pya`; the tools are pay",
            ),
            (
                stop(Some("pai"), None, "x", "ana"),
                "no tool `pai` (did you mean `pay`?); the tools are pay",
            ),
        ] {
            match run(AdminCommand::Disable(args)) {
                Err(Error::Input(message)) => assert_eq!(message, said),
                other => panic!("{other:?}"),
            }
        }
        let stopped = run(AdminCommand::Disable(stop(
            Some("pay"),
            None,
            "fraud\u{202e}wave\t\u{7}",
            "ana\u{200b}",
        )))
        .unwrap();
        assert_eq!(
            stopped,
            ["stopped tool pay (controls version 1): fraud\\u{202e}wave\\t\\u{7}"]
        );
        let history = run(AdminCommand::History { limit: 10 }).unwrap();
        let fields: Vec<&str> = history[0].split('\t').collect();
        assert_eq!(fields.len(), 4, "{history:?}");
        assert_eq!(fields[2], "ana\\u{200b}");
        assert_eq!(fields[3], "stopped tool pay: fraud\\u{202e}wave\\t\\u{7}");
        let shown = run(AdminCommand::Policy(PolicyCommand::Show)).unwrap();
        assert!(!shown[0].contains('\u{202e}'), "{shown:?}");

        // A stop of a tool this version no longer has can be lifted.
        runtime
            .block_on(controls::stop(
                dispatcher.store(),
                Target::Tool("gone".into()),
                "old",
                "ops",
            ))
            .unwrap();
        let enabled = run(AdminCommand::Enable(stop(Some("gone"), None, "", "ana"))).unwrap();
        assert_eq!(enabled, ["enabled tool gone (controls version 3)"]);
    }
}
