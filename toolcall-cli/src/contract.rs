//! `report`, `lock` and `check`: what the audit log and the tools' contract
//! say.

use std::io::{self, Write};
use std::path::Path;

use toolcall_contract::{lock, rejected, report};
use toolcall_core::Registry;

use crate::output::{open_input, pretty, write_output};
use crate::{Error, ReportArgs};

pub(crate) fn report(registry: &Registry, args: &ReportArgs) -> Result<(), Error> {
    let input = open_input(Some(&args.audit_log))?;
    let records = report::read_audit(input)
        .map_err(|e| Error::Input(format!("{}: {e}", args.audit_log.display())))?;
    let report = report::Report::from_records(&records);
    let fields = rejected::by_field(&records, registry);
    let text = if args.json {
        let mut json = report.to_json();
        json["invalid_arguments_by_field"] = rejected::to_json(&fields);
        pretty(&json)
    } else {
        let table = rejected::FieldTable(&fields).to_string();
        if table.is_empty() {
            report.to_string()
        } else {
            format!("{report}\n{table}")
        }
    };
    if let Some(path) = &args.rejected_calls {
        let found = rejected::regression_calls(&records, registry);
        write_output(Some(path), &found.to_jsonl())?;
        eprintln!(
            "wrote {} rejected call(s) to {}",
            found.calls.len(),
            path.display()
        );
        for (reason, count) in &found.left_out {
            eprintln!("left out {count} rejected call(s): {reason}");
        }
    }
    write_output(None, &text)
}

pub(crate) fn write_lock(registry: &Registry, file: &Path) -> Result<(), Error> {
    let lock = lock::Lockfile::from_registry(registry);
    write_output(Some(file), &lock.to_json_pretty())?;
    eprintln!(
        "wrote the contract of {} tool(s) to {}",
        registry.len(),
        file.display()
    );
    Ok(())
}

pub(crate) fn check(registry: &Registry, file: &Path) -> Result<(), Error> {
    let text = std::fs::read_to_string(file).map_err(|source| Error::Io {
        action: format!("read {} (run `lock` to write it)", file.display()),
        source,
    })?;
    let locked = lock::Lockfile::parse(&text)
        .map_err(|e| Error::Input(format!("{}: {e}", file.display())))?;
    let current = lock::Lockfile::from_registry(registry);
    let changes = lock::check(&locked, &current);
    let mut stdout = io::stdout().lock();
    let mut breaking = 0;
    for change in &changes {
        if change.is_breaking() {
            breaking += 1;
        }
        writeln!(stdout, "{}: {change}", change.severity())
            .map_err(Error::io("write to standard output"))?;
    }
    if breaking > 0 {
        return Err(Error::Breaking {
            count: breaking,
            file: file.to_owned(),
        });
    }
    if changes.is_empty() {
        writeln!(stdout, "the tools match {}", file.display())
            .map_err(Error::io("write to standard output"))?;
    }
    Ok(())
}
