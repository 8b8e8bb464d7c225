//! `report`, `lock` and `check`: what the audit log and the tools' contract
//! say.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use toolcall_contract::{lock, rejected, report};
use toolcall_core::{Registry, audit_chain};

use crate::output::{json_text, open_input, pretty, terminal, write_output};
use crate::{Error, ReportArgs};

pub(crate) fn report(registry: &Registry, args: &ReportArgs) -> Result<(), Error> {
    let text = if args.verify {
        verify(args)?
    } else {
        report_text(registry, args)?
    };
    write_output(None, &text)
}

/// What `report --verify` prints when the chain holds: one line. A chain
/// that does not hold is [`Error::ChainBroken`], exit code 1.
fn verify(args: &ReportArgs) -> Result<String, Error> {
    let files: Vec<&Path> = std::iter::once(args.audit_log.as_path())
        .chain(args.more.iter().map(PathBuf::as_path))
        .collect();
    if files.iter().any(|file| file.as_os_str() == "-") {
        // The verifier takes files by name: past a break it reads on to
        // tell a removal from a reordering, and names the file.
        return Err(Error::Input(
            "report --verify reads files, not standard input".to_owned(),
        ));
    }
    let report = match &args.after {
        None => audit_chain::verify_chain(&files),
        Some(hash) => {
            let hash = hash.to_ascii_lowercase();
            if !audit_chain::is_hash(&hash) {
                return Err(Error::Input(format!(
                    "--after {hash}: not a hash (64 hex digits, what a record's `prev` names)"
                )));
            }
            audit_chain::verify_chain_after(&hash, &files)
        }
    };
    let report = report.map_err(Error::ChainBroken)?;
    Ok(terminal(&format!("{report}\n")))
}

/// What `report` prints: its tables, each line as a terminal shows it
/// safely, or its JSON with what reorders or hides text written as JSON's
/// escapes ([`terminal`], [`json_text`]): a tool, a field or a problem
/// the model made up cannot reorder or hide a part of a row. It writes the
/// rejected calls' file, when asked, on the way.
fn report_text(registry: &Registry, args: &ReportArgs) -> Result<String, Error> {
    let input = open_input(Some(&args.audit_log))?;
    let records = report::read_audit(input)
        .map_err(|e| Error::Input(format!("{}: {e}", args.audit_log.display())))?;
    let report = report::Report::from_records(&records);
    let fields = rejected::by_field(&records, registry);
    let text = if args.json {
        let mut json = report.to_json();
        json["invalid_arguments_by_field"] = rejected::to_json(&fields);
        json_text(&pretty(&json))
    } else {
        let table = rejected::FieldTable(&fields).to_string();
        terminal(&if table.is_empty() {
            report.to_string()
        } else {
            format!("{report}\n{table}")
        })
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
    Ok(text)
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::Value;
    use toolcall::{Call, Dispatcher, JsonLinesAudit, tools};

    use super::*;
    use crate::tests::pay;

    #[test]
    fn the_report_shows_what_reorders_or_hides_text_as_its_escape() {
        let dir = std::env::temp_dir().join(format!("toolcall-cli-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let audit = dir.join("audit.jsonl");
        let _ = std::fs::remove_file(&audit);
        let dispatcher = Dispatcher::builder(tools![pay].unwrap(), Arc::new(()))
            .audit(JsonLinesAudit::open(&audit).unwrap())
            .build()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for (tool, arguments) in [
            ("pay", r#"{"to": "acme", "amo\u202eunt": 1}"#),
            ("pa\u{200b}y", r#"{"to": "acme"}"#),
        ] {
            runtime.block_on(dispatcher.execute(Call::new(tool, arguments).session("s")));
        }
        drop(dispatcher);
        for json in [false, true] {
            let args = ReportArgs {
                audit_log: audit.clone(),
                more: Vec::new(),
                verify: false,
                after: None,
                json,
                rejected_calls: None,
            };
            let text = report_text(&tools![pay].unwrap(), &args).unwrap();
            for raw in ['\u{202e}', '\u{200b}'] {
                assert!(!text.contains(raw), "{raw:?} raw: {text}");
            }
            if json {
                assert!(text.contains("amo\\u202eunt"), "{text}");
                serde_json::from_str::<Value>(&text).unwrap();
            } else {
                assert!(text.contains("amo\\u{202e}unt"), "{text}");
                assert!(text.contains("pa\\u{200b}y"), "{text}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
