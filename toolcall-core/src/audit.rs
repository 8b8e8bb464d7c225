//! One record per call, whatever its outcome.

use std::borrow::Cow;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::args::{FieldErrors, MAX_PROBLEMS_SHOWN, show_problem};
use crate::audit_chain::{self, ChainHead};
use crate::result::Code;
use crate::tool::ToolSpec;

/// What happened in one call: who asked for what, and how it ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditRecord {
    /// The conversation.
    pub session_id: String,
    /// The caller's id.
    pub caller: String,
    /// Who authenticated behind the caller, when the host said
    /// ([`Caller::with_principal`](crate::Caller::with_principal)): an MCP
    /// server behind an authorization server records the token's issuer,
    /// subject and client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<crate::Principal>,
    /// The session's step count after this call; `None` for a call that
    /// took no step: a dry run, or one refused before its step was counted
    /// (no conversation named, the store unreachable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// The tool the model asked for (borrowed from the registry when it has
    /// a tool of that name).
    pub tool: Cow<'static, str>,
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
    /// When the call reached the dispatcher, in milliseconds since the Unix
    /// epoch (0 in records written before it was kept).
    #[serde(default)]
    pub at_ms: u64,
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
    /// Whether the call was a side effect in a session that saw untrusted
    /// output, as the caller's [`Taint`](crate::Taint) level judged it:
    /// `Some` with the arguments that carried a value read in untrusted
    /// output (`Values`), or an empty list (`Session`: any side effect
    /// after untrusted output); such a call runs only with a person's
    /// approval. `None`: not tainted, or not looked at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tainted: Option<Vec<String>>,
    /// Whether the call was a dry run ([`Call::dry_run`](crate::Call::dry_run)):
    /// nothing ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// With `INVALID_ARGUMENTS` from stage 3: the problems found in the
    /// arguments, in the order the model was told them, and at most the 20
    /// it was shown. A problem in a sensitive value keeps its path, and its
    /// text reads [`REDACTED`](crate::REDACTED): it may quote the value.
    /// Empty for any other answer, and in records written before it was
    /// kept; tools that count rejections by field read these instead of
    /// validating the arguments again with today's tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<ArgumentProblem>,
    /// The record's number in its audit file's hash chain, from 1 and
    /// across the files the chain was rotated through; set by
    /// [`JsonLinesAudit`] as it writes the record (`None` in what the
    /// dispatcher hands a sink, and in records written before the chain).
    /// See [`audit_chain`](crate::audit_chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The hex SHA-256 of the line written before this one, newline
    /// included ([`GENESIS`](crate::audit_chain::GENESIS) for the first
    /// record of a chain); set by [`JsonLinesAudit`] as it writes the
    /// record, like [`seq`](AuditRecord::seq).
    // Last, with `seq`: the sink adds both to a line already serialised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
}

/// One problem found in a call's arguments, as the audit keeps it (see
/// [`AuditRecord::problems`]): a [`FieldProblem`](crate::FieldProblem)
/// that outlives the tool's definition. Shown as the model read it,
/// `path: problem (description)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ArgumentProblem {
    /// The field, with the path inside it for a nested value
    /// (`lines[0].sku`), or the member's name for an unknown one.
    pub path: Cow<'static, str>,
    /// What is wrong, as the model was told it, or
    /// [`REDACTED`](crate::REDACTED).
    pub problem: String,
    /// The field's description when the call was made (empty for a member
    /// that is no field).
    #[serde(default, skip_serializing_if = "str::is_empty")]
    pub description: Cow<'static, str>,
}

impl ArgumentProblem {
    /// The problems `errors` showed the model, for the audit record of a
    /// call of `spec`: the first 20, each problem in a parameter that may
    /// hold a sensitive value redacted.
    pub(crate) fn all_of(spec: &ToolSpec, errors: FieldErrors) -> Vec<ArgumentProblem> {
        let redaction = spec.redaction();
        let sensitive = |path: &str| {
            !redaction.is_empty()
                && spec
                    .fields()
                    .iter()
                    .find(|field| {
                        path.strip_prefix(field.name)
                            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
                    })
                    .is_some_and(|field| redaction.covers(field.name))
        };
        errors
            .into_problems()
            .into_iter()
            .take(MAX_PROBLEMS_SHOWN)
            .map(|found| {
                let (path, problem, description) = found.into_parts();
                let problem = if sensitive(&path) {
                    crate::REDACTED.to_owned()
                } else {
                    problem
                };
                ArgumentProblem {
                    path,
                    problem,
                    description: Cow::Borrowed(description),
                }
            })
            .collect()
    }
}

impl fmt::Display for ArgumentProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        show_problem(f, &self.path, &self.problem, &self.description)
    }
}

/// One field of an [`AuditRecord`] kept cut, and what it held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Cut {
    /// The record's field (`tool`, `arguments`), or `result` for a result
    /// cut to the output budget.
    pub field: String,
    /// The size of the whole value, in bytes.
    pub bytes: u64,
    /// Hex SHA-256 of the whole value.
    pub sha256: String,
}

impl Cut {
    /// What `value`, the whole of `field`, was: its size and SHA-256.
    pub(crate) fn of(field: &str, value: &str) -> Cut {
        use sha2::Digest as _;
        Cut {
            field: field.to_owned(),
            bytes: value.len() as u64,
            sha256: crate::hex::hex(&sha2::Sha256::digest(value.as_bytes())),
        }
    }

    /// `value` of `field`, bounded to `max` bytes; what was cut goes to `cuts`.
    pub(crate) fn keep(field: &str, value: String, max: usize, cuts: &mut Vec<Cut>) -> String {
        if value.len() <= max {
            return value;
        }
        use sha2::Digest as _;
        cuts.push(Cut {
            field: field.to_owned(),
            bytes: value.len() as u64,
            sha256: crate::hex::hex(&sha2::Sha256::digest(value.as_bytes())),
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

/// Keeps the latest records in memory; clones share the same log.
///
/// To read what a dispatcher did, keep one clone and give it the other
/// ([`DispatcherBuilder::audit`](crate::DispatcherBuilder::audit)); then
/// [`records`](MemoryAudit::records) returns them, oldest first:
///
/// ```
/// use toolcall_core::{AuditSink, Code, MemoryAudit};
///
/// let audit = MemoryAudit::new();
/// let given = audit.clone(); // what `.audit(...)` would take
/// # let record: toolcall_core::AuditRecord = serde_json::from_value(serde_json::json!({
/// #     "session_id": "chat-7", "caller": "default", "tool": "get_balance",
/// #     "arguments": "{}", "confirmed": false, "ok": true, "code": "OK",
/// #     "replayed": false, "duration_ms": 0.1
/// # })).unwrap();
/// given.record(record); // as the dispatcher does after each call
/// let records = audit.records();
/// assert_eq!(records.len(), 1);
/// assert_eq!((records[0].tool.as_ref(), &records[0].code), ("get_balance", &Code::Ok));
/// ```
///
/// Bounded: it keeps the last [`MemoryAudit::DEFAULT_CAPACITY`] records (or
/// the capacity given), dropping the oldest, and counts what it dropped, so
/// that a long-lived process does not grow with its traffic. For a durable
/// log, use [`JsonLinesAudit`] or the `tracing` events every call emits.
#[derive(Clone, Debug)]
pub struct MemoryAudit {
    log: Arc<Mutex<Ring>>,
}

/// The latest records: `records` grows to `capacity`, then each new record
/// takes the place of the oldest, at `next`, dropped where it lies (a
/// record is a few hundred bytes, not moved out first to be dropped).
#[derive(Debug)]
struct Ring {
    records: Vec<AuditRecord>,
    next: usize,
    capacity: usize,
    dropped: u64,
}

impl Ring {
    fn push(&mut self, record: AuditRecord) {
        if self.records.len() < self.capacity {
            self.records.push(record);
            return;
        }
        self.records[self.next] = record;
        self.next = (self.next + 1) % self.capacity;
        self.dropped += 1;
    }

    /// Oldest first.
    fn iter(&self) -> impl Iterator<Item = &AuditRecord> {
        let (newer, older) = self.records.split_at(self.next);
        older.iter().chain(newer)
    }
}

impl Default for MemoryAudit {
    fn default() -> Self {
        MemoryAudit::with_capacity(MemoryAudit::DEFAULT_CAPACITY)
    }
}

impl MemoryAudit {
    /// How many records [`MemoryAudit::new`] keeps: 10,000.
    pub const DEFAULT_CAPACITY: usize = 10_000;

    /// An empty log that keeps the last 10,000 records.
    pub fn new() -> Self {
        MemoryAudit::default()
    }

    /// An empty log that keeps the last `capacity` records (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        MemoryAudit {
            log: Arc::new(Mutex::new(Ring {
                records: Vec::with_capacity(capacity.min(1024)),
                next: 0,
                capacity,
                dropped: 0,
            })),
        }
    }

    /// A copy of the records kept, oldest first: one per call the
    /// dispatcher given this log (or a clone of it) answered.
    pub fn records(&self) -> Vec<AuditRecord> {
        lock(&self.log).iter().cloned().collect()
    }

    /// How many records are kept.
    pub fn len(&self) -> usize {
        lock(&self.log).records.len()
    }

    /// Whether none are kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many of the oldest records were dropped to stay within capacity.
    pub fn dropped(&self) -> u64 {
        lock(&self.log).dropped
    }
}

impl AuditSink for MemoryAudit {
    fn record(&self, record: AuditRecord) {
        lock(&self.log).push(record);
    }
}

/// Appends each record to a file as one line of JSON, flushed at once,
/// each one chained to the line before it by hash: a record that is later
/// changed, removed, inserted or reordered is found by
/// [`verify_chain`](crate::audit_chain::verify_chain) (and `report
/// --verify` on the command line).
///
/// Each record gets its number in the chain ([`AuditRecord::seq`]) and the
/// hex SHA-256 of the line before it ([`AuditRecord::prev`]): the first
/// record of a new file names [`GENESIS`](crate::audit_chain::GENESIS),
/// [`open`](JsonLinesAudit::open) on a file with lines continues from its
/// last one, and [`open_after`](JsonLinesAudit::open_after) starts a new
/// file where another one left off (rotation). Writing a record costs one
/// SHA-256 of the line it writes.
///
/// One writer per file: the sink's lock keeps the chain whole across the
/// threads of a process, but two processes (or two sinks) appending to one
/// file break it, each naming its own last line. Give each process its own
/// file. What the chain does not prove (a removed tail, a file rewritten
/// whole) is in [`audit_chain`](crate::audit_chain).
#[derive(Debug)]
pub struct JsonLinesAudit {
    file: Mutex<Chained>,
}

/// The file and the chain's head: changed together, under one lock, so
/// that the records of concurrent calls are chained in the order written.
#[derive(Debug)]
struct Chained {
    file: BufWriter<File>,
    head: ChainHead,
}

impl JsonLinesAudit {
    /// Opens `path` for appending, creating it if needed. A new or empty
    /// file starts a chain ([`GENESIS`](crate::audit_chain::GENESIS)); a
    /// file with lines continues from its last one (reading only that
    /// line), whatever chain it belongs to.
    ///
    /// An error ([`io::ErrorKind::InvalidData`]) when the file's last line
    /// is cut short (no newline at its end: a crash while writing) or is
    /// not a record: appending to it would hide it. Move the file aside
    /// and continue in a new one ([`open_after`](JsonLinesAudit::open_after)
    /// with the [`last_head`](crate::audit_chain::last_head) of its last
    /// whole record, or the head the operator kept).
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        JsonLinesAudit::open_from(path.as_ref(), None)
    }

    /// Opens `path` to continue the chain whose last record was `after`
    /// (the head of the file before, [`JsonLinesAudit::head`] or
    /// [`last_head`](crate::audit_chain::last_head)): its first record is
    /// numbered `after.seq + 1` and names `after.hash`. When the file has
    /// lines already (the process restarted), it continues from its last
    /// one, as [`open`](JsonLinesAudit::open) does, once its first line is
    /// checked to name `after.hash`: an error otherwise
    /// ([`io::ErrorKind::InvalidData`]), as for a file that belongs to
    /// another chain. An empty file keeps no trace of `after`: reopen a
    /// rotated file with `open_after` too, lest [`open`](JsonLinesAudit::open)
    /// start it a new chain before its first record.
    pub fn open_after(path: impl AsRef<Path>, after: &ChainHead) -> io::Result<Self> {
        JsonLinesAudit::open_from(path.as_ref(), Some(after))
    }

    fn open_from(path: &Path, after: Option<&ChainHead>) -> io::Result<Self> {
        let named =
            |error: io::Error| io::Error::new(error.kind(), format!("{}: {error}", path.display()));
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)?;
        let head = match audit_chain::last_head_of(&mut file).map_err(named)? {
            None => after.cloned().unwrap_or_else(ChainHead::genesis),
            Some(head) => {
                if let Some(after) = after {
                    let first = audit_chain::first_prev(&mut file).map_err(named)?;
                    if first.flatten().as_deref() != Some(after.hash.as_str()) {
                        return Err(named(audit_chain::invalid(format!(
                            "its first record does not continue the chain at {after}"
                        ))));
                    }
                }
                head
            }
        };
        Ok(JsonLinesAudit {
            file: Mutex::new(Chained {
                file: BufWriter::new(file),
                head,
            }),
        })
    }

    /// The chain's last record so far: what the next record will name, and
    /// what a file opened after this one continues from
    /// ([`open_after`](JsonLinesAudit::open_after)). Ship its hash to
    /// another system now and then: that copy is what catches records
    /// removed from the end, or a file rewritten whole.
    pub fn head(&self) -> ChainHead {
        lock(&self.file).head.clone()
    }
}

impl AuditSink for JsonLinesAudit {
    fn record(&self, mut record: AuditRecord) {
        // The sink numbers and links; what came in with the record would
        // be written twice.
        record.seq = None;
        record.prev = None;
        // Serialised outside the lock; the chain's two fields, last in the
        // record, are added under it.
        let mut line = match serde_json::to_vec(&record) {
            Ok(line) if line.last() == Some(&b'}') => line,
            Ok(_) => {
                tracing::error!("audit record does not serialize to an object");
                return;
            }
            Err(error) => {
                tracing::error!(%error, "audit record does not serialize");
                return;
            }
        };
        line.pop();
        let mut chained = lock(&self.file);
        // Saturating: a last line opened with the largest number is the
        // verifier's to report, not a panic in the middle of a call.
        let seq = chained.head.seq.saturating_add(1);
        let links = format!(",\"seq\":{seq},\"prev\":\"{}\"}}\n", chained.head.hash);
        line.extend_from_slice(links.as_bytes());
        // The head moves on even when the write fails: the record was due
        // here, and a verifier then says it is missing, which it is.
        chained.head = ChainHead::new(seq, audit_chain::line_hash(&line));
        let file = &mut chained.file;
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

#[cfg(test)]
mod ring_tests {
    use super::*;

    fn record(step: u64) -> AuditRecord {
        AuditRecord {
            session_id: "s".into(),
            caller: "c".into(),
            principal: None,
            step: Some(step),
            tool: "t".into(),
            arguments: "{}".into(),
            confirmed: false,
            ok: true,
            code: Code::Ok,
            replayed: false,
            duration_ms: 0.0,
            at_ms: 0,
            call_id: None,
            approved_by: None,
            in_doubt: false,
            cut: Vec::new(),
            tainted: None,
            dry_run: false,
            problems: Vec::new(),
            seq: None,
            prev: None,
        }
    }

    #[test]
    fn the_memory_log_keeps_the_latest_records_and_counts_the_rest() {
        let audit = MemoryAudit::with_capacity(3);
        for step in 1..=10u64 {
            audit.record(record(step));
            let kept: Vec<u64> = audit.records().iter().filter_map(|r| r.step).collect();
            let latest: Vec<u64> = (step.saturating_sub(2).max(1)..=step).collect();
            assert_eq!(kept, latest, "oldest first, after {step} records");
            assert_eq!(audit.len(), latest.len());
            assert_eq!(audit.dropped(), step - latest.len() as u64);
        }
        assert_eq!(MemoryAudit::new().len(), 0);
        let one = MemoryAudit::with_capacity(0);
        one.record(record(1));
        one.record(record(2));
        assert_eq!(one.records()[0].step, Some(2), "a capacity of 0 keeps one");
    }
}
