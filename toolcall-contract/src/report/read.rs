//! Reading an audit log.

use std::fmt;
use std::io::{self, BufRead};

use toolcall_core::AuditRecord;

/// Why an audit log could not be read. Lines are numbered from 1, counting
/// blank ones.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The input could not be read.
    Io {
        /// The line being read.
        line: usize,
        /// The cause.
        source: io::Error,
    },
    /// A line is not an audit record.
    Record {
        /// The line.
        line: usize,
        /// What is wrong with it.
        source: serde_json::Error,
    },
}

impl ReadError {
    /// The line the error is on, from 1.
    pub fn line(&self) -> usize {
        match self {
            ReadError::Io { line, .. } | ReadError::Record { line, .. } => *line,
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { line, source } => write!(f, "line {line}: cannot read: {source}"),
            ReadError::Record { line, source } => {
                write!(f, "line {line}: not an audit record: {source}")
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            ReadError::Record { source, .. } => Some(source),
        }
    }
}

/// Reads an audit log, one JSON record a line, as
/// [`JsonLinesAudit`](toolcall_core::JsonLinesAudit) writes it. Lines that
/// hold only white space are skipped; the first line that is not a record
/// stops the reading with an error naming it.
pub fn read_audit(reader: impl BufRead) -> Result<Vec<AuditRecord>, ReadError> {
    let mut records = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let number = index + 1;
        let line = line.map_err(|source| ReadError::Io {
            line: number,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(&line).map_err(|source| ReadError::Record {
            line: number,
            source,
        })?;
        records.push(record);
    }
    Ok(records)
}
