//! One record per call, whatever its outcome.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::result::Code;

/// What happened in one call: who asked for what, and how it ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditRecord {
    /// The conversation.
    pub session_id: String,
    /// The caller's id.
    pub caller: String,
    /// The session's step count after this call.
    pub step: u64,
    /// The tool the model asked for.
    pub tool: String,
    /// The arguments exactly as the model sent them (a parsed object is
    /// written back as compact JSON).
    pub arguments: String,
    /// Whether the host confirmed the call.
    pub confirmed: bool,
    /// Whether the call succeeded.
    pub ok: bool,
    /// Its code.
    pub code: Code,
    /// Whether the result was a replay.
    pub replayed: bool,
    /// Wall time spent in the dispatcher, in milliseconds.
    pub duration_ms: f64,
    /// The provider's id for this call, when the host passed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Who approved or denied, for a host's decision on a pending approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Whether the call ended with an unknown outcome (`data.in_doubt`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_doubt: bool,
    /// What the record does not keep whole: an over-long tool name, or
    /// arguments over the size limit, are kept as a head and a tail (see
    /// [`echo::cut`](crate::echo::cut)); this says the size and SHA-256 of
    /// what was there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<Cut>,
}

/// One field of an [`AuditRecord`] kept cut, and what it held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Cut {
    /// The record's field: `tool` or `arguments`.
    pub field: String,
    /// The size of the whole value, in bytes.
    pub bytes: u64,
    /// Hex SHA-256 of the whole value.
    pub sha256: String,
}

impl Cut {
    /// `value` of `field`, bounded to `max` bytes; what was cut goes to `cuts`.
    pub(crate) fn keep(field: &str, value: String, max: usize, cuts: &mut Vec<Cut>) -> String {
        if value.len() <= max {
            return value;
        }
        use sha2::Digest as _;
        cuts.push(Cut {
            field: field.to_owned(),
            bytes: value.len() as u64,
            sha256: crate::canonical::hex(&sha2::Sha256::digest(value.as_bytes())),
        });
        crate::echo::cut(&value, max).into_owned()
    }
}

/// Where audit records go. Called once per call, after the result is known.
///
/// A sink must not fail the call: an implementation that writes somewhere
/// that can fail reports the failure itself (see [`JsonLinesAudit`]).
pub trait AuditSink: Send + Sync {
    /// Keeps one record.
    fn record(&self, record: AuditRecord);
}

/// Keeps records in memory; clones share the same log.
#[derive(Clone, Debug, Default)]
pub struct MemoryAudit {
    records: Arc<Mutex<Vec<AuditRecord>>>,
}

impl MemoryAudit {
    /// An empty log.
    pub fn new() -> Self {
        MemoryAudit::default()
    }

    /// A copy of every record so far, oldest first.
    pub fn records(&self) -> Vec<AuditRecord> {
        lock(&self.records).clone()
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        lock(&self.records).len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl AuditSink for MemoryAudit {
    fn record(&self, record: AuditRecord) {
        lock(&self.records).push(record);
    }
}

/// Appends each record to a file as one line of JSON, flushed at once.
#[derive(Debug)]
pub struct JsonLinesAudit {
    file: Mutex<BufWriter<File>>,
}

impl JsonLinesAudit {
    /// Opens `path` for appending, creating it if needed.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(JsonLinesAudit {
            file: Mutex::new(BufWriter::new(file)),
        })
    }
}

impl AuditSink for JsonLinesAudit {
    fn record(&self, record: AuditRecord) {
        let mut line = match serde_json::to_vec(&record) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(%error, "audit record does not serialize");
                return;
            }
        };
        line.push(b'\n');
        let mut file = lock(&self.file);
        if let Err(error) = file.write_all(&line).and_then(|()| file.flush()) {
            tracing::error!(%error, "audit record could not be written");
        }
    }
}

/// A poisoned lock only means another thread panicked while holding it; the
/// data (a log, a counter map) is still whole.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
