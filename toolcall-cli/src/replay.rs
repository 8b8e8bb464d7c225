//! `replay`: a file of model calls run through the pipeline, one
//! conversation.

use std::any::Any;
use std::borrow::Cow;
use std::io::{self, BufRead, BufWriter, Write};

use serde::Deserialize;
use serde_json::value::RawValue;
use toolcall_core::store::Store;
use toolcall_core::{Arguments, Call, Dispatcher};

use crate::output::{json_text, open_input};
use crate::{Error, ReplayArgs};

/// One line of a replay file. Its members are read once each: a line with
/// a member twice (`"tool"`, `"arguments"`, ...) is not a replay call.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayLine<'a> {
    pub(crate) tool: String,
    /// The arguments' own text, as the line has it: the pipeline parses it
    /// (see [`replay_arguments`]).
    #[serde(default, borrow, deserialize_with = "present")]
    pub(crate) arguments: Option<&'a RawValue>,
    #[serde(default)]
    pub(crate) confirmed: bool,
    #[serde(default)]
    pub(crate) call_id: Option<String>,
    /// A question id from an earlier `CONFIRMATION_REQUIRED` answer:
    /// the call brings the approval a person gave (in the inbox).
    #[serde(default)]
    pub(crate) approval: Option<String>,
    /// A dry run: every stage up to execution, nothing run, no step used
    /// (`DRY_RUN` where the call would run).
    #[serde(default)]
    pub(crate) dry_run: bool,
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

pub(crate) async fn replay<S, St>(
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
            && let Some(id) = result.question_id.clone()
        {
            // Wait for the person's decision (woken by the store where it
            // can), then answer what came of the call, as the model's next
            // call with the question's id would be answered.
            let until = toolcall_core::store::now_ms()
                .saturating_add(args.wait_approval.saturating_mul(1000));
            result = dispatcher.wait_for_decision(request, &id, until).await;
        }
        writeln!(stdout, "{}", json_text(&result.to_model_text()))
            .and_then(|()| stdout.flush())
            .map_err(Error::io("write to standard output"))?;
    }
    Ok(())
}
