//! `definitions`: the tool definitions in a provider's format, written or
//! compared with a committed file.

use std::io::{self, Write};
use std::path::Path;

use serde_json::Value;
use toolcall_contract::diff;
use toolcall_core::{Policy, Registry};

use crate::output::{pretty, write_output};
use crate::{DefinitionsArgs, Error};

pub(crate) fn definitions(
    registry: &Registry,
    policy: &Policy,
    args: &DefinitionsArgs,
) -> Result<(), Error> {
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
