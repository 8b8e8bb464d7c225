//! The audit log's hash chain, and its verifier.
//!
//! [`JsonLinesAudit`](crate::JsonLinesAudit) numbers each record it writes
//! ([`AuditRecord::seq`](crate::AuditRecord::seq): 1, 2, 3, ... along the
//! chain, across the files it was rotated through) and has it name the
//! line written before it ([`AuditRecord::prev`](crate::AuditRecord::prev):
//! the hex SHA-256 of that line's exact bytes, its newline included, so
//! `sed -n 7p audit.jsonl | sha256sum` prints what line 8 names). The first
//! record of a chain names [`GENESIS`]; the first record of a file opened
//! to continue a chain ([`JsonLinesAudit::open_after`](crate::JsonLinesAudit::open_after))
//! names the last line of the file before.
//!
//! [`verify_chain`] reads one file, or several in the order they were
//! written, and names the first record that was changed, removed, inserted
//! or reordered ([`ChainBreak`]):
//!
//! ```no_run
//! use toolcall_core::audit_chain::verify_chain;
//!
//! match verify_chain(&["audit.1.jsonl", "audit.jsonl"]) {
//!     Ok(report) => println!("{report}"),
//!     Err(broken) => eprintln!("{broken}"), // names the file and the line
//! }
//! ```
//!
//! What the chain does not prove: the records are hashed, not signed, so
//! whoever can write the file can append records that link, or rewrite the
//! whole file consistently; and removing the last records of the last file
//! leaves a shorter chain that still holds. Only a copy of the last hash
//! kept elsewhere ([`JsonLinesAudit::head`](crate::JsonLinesAudit::head),
//! [`last_head`]), shipped to another system as the log grows, catches
//! those: the chain must still reach it.
//!
//! The chain is one writer's: the sink's lock keeps it whole across the
//! threads of one process, but two processes appending to one file each
//! continue their own idea of the last line, and break it. Give each
//! process its own file.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::AuditRecord;

/// What the first record of a chain names as the line before it: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The last record of a chain: its number and the hash of its line, what
/// the next record names. [`ChainHead::genesis`] before the first.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainHead {
    /// The record's number ([`AuditRecord::seq`](crate::AuditRecord::seq));
    /// 0 before the first.
    pub seq: u64,
    /// The hex SHA-256 of its line, newline included; [`GENESIS`] before
    /// the first.
    pub hash: String,
}

impl ChainHead {
    /// Before the first record: number 0, hash [`GENESIS`].
    pub fn genesis() -> ChainHead {
        ChainHead {
            seq: 0,
            hash: GENESIS.to_owned(),
        }
    }

    /// The record numbered `seq` whose line hashes to `hash` (hex SHA-256).
    pub fn new(seq: u64, hash: impl Into<String>) -> ChainHead {
        ChainHead {
            seq,
            hash: hash.into(),
        }
    }
}

impl fmt::Display for ChainHead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record {}, hash {}", self.seq, self.hash)
    }
}

/// The hex SHA-256 of `line`'s bytes: what the record after it names.
pub(crate) fn line_hash(line: &[u8]) -> String {
    crate::hex::hex(&Sha256::digest(line))
}

/// Whether `text` is a hash as a record names one: 64 lowercase hex digits.
pub fn is_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A chain that holds: what [`verify_chain`] read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainReport {
    /// The files read.
    pub files: usize,
    /// The chained records read.
    pub records: u64,
    /// The lines at the start of the first file written before the chain
    /// (by a sink that did not chain, before an upgrade): the chain starts
    /// from the last of them, and covers none of them.
    pub unchained: u64,
    /// The number of the first chained record.
    pub first_seq: u64,
    /// The last record: keep its hash elsewhere, and check the next
    /// verification reaches it.
    pub last: ChainHead,
}

impl fmt::Display for ChainReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the chain holds: {} record(s), {} to {}, in {} file(s); last hash {}",
            self.records, self.first_seq, self.last.seq, self.files, self.last.hash
        )?;
        if self.unchained > 0 {
            write!(
                f,
                "; the first {} line(s) of the first file precede the chain and are not covered",
                self.unchained
            )?;
        }
        Ok(())
    }
}

/// The first place where a chain does not hold: the file, the line (from
/// 1; 0 when the file as a whole is at fault), and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainBreak {
    /// The file, as it was named.
    pub file: PathBuf,
    /// The line, from 1; 0 for the file as a whole (unreadable, empty).
    pub line: u64,
    /// What is wrong there.
    pub problem: Problem,
}

/// What is wrong with the record a [`ChainBreak`] names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// The file could not be read: the error.
    Unreadable(String),
    /// The file holds no line.
    EmptyFile,
    /// The line does not end with a newline: a record cut short.
    Unterminated,
    /// The line is not an audit record (not JSON, a field missing or of
    /// the wrong type): the parser's message.
    NotARecord(String),
    /// The record has no `seq` or no `prev`: it was not written by the
    /// chaining sink (inserted), or was edited.
    Unchained,
    /// This record was changed: the record after it names `expected`, its
    /// line hashes to `found`.
    Changed {
        /// What the next record names.
        expected: String,
        /// What this line hashes to.
        found: String,
    },
    /// The record does not name the line before it, and the record after
    /// it does not say which of the two was changed (it is the last, or
    /// names neither): this record or the line before it was changed.
    PrevMismatch {
        /// What the line before hashes to.
        expected: String,
        /// What this record names.
        found: String,
    },
    /// The first record names another start than the chain's ([`GENESIS`],
    /// or the hash it was to continue).
    WrongStart {
        /// The start.
        expected: String,
        /// What the record names.
        found: String,
    },
    /// Records `from` to `to` (their numbers) are missing before this one.
    Removed {
        /// The first missing number.
        from: u64,
        /// The last missing number.
        to: u64,
    },
    /// This line holds record `found` where record `expected` was due;
    /// record `expected` comes later, at `file`:`line`.
    Reordered {
        /// The number due here.
        expected: u64,
        /// The number found here.
        found: u64,
        /// Where record `expected` is.
        file: PathBuf,
        /// Its line.
        line: u64,
    },
    /// This record is not one of the chain: a copy of the record before
    /// it, or a record placed where another one (with the same number)
    /// belongs.
    Inserted {
        /// The number it claims.
        seq: u64,
    },
    /// This record came earlier in the chain: its number is `found`,
    /// record `expected` was due.
    OutOfPlace {
        /// The number due here.
        expected: u64,
        /// The number found.
        found: u64,
    },
    /// The record names the line before it, but its number was changed.
    Renumbered {
        /// The number due here.
        expected: u64,
        /// The number found.
        found: u64,
    },
}

impl fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.problem)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.problem)
        }
    }
}

impl std::error::Error for ChainBreak {}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Unreadable(error) => write!(f, "cannot be read: {error}"),
            Problem::EmptyFile => f.write_str("the file is empty: no record to verify"),
            Problem::Unterminated => {
                f.write_str("the line ends without a newline: a record cut short")
            }
            Problem::NotARecord(error) => write!(f, "not an audit record: {error}"),
            Problem::Unchained => f.write_str(
                "the record has no `seq` or no `prev`: it was inserted or edited \
                 (the chaining sink writes both)",
            ),
            Problem::Changed { expected, found } => write!(
                f,
                "the record was changed: the record after it names {expected}, \
                 this line hashes to {found}"
            ),
            Problem::PrevMismatch { expected, found } => write!(
                f,
                "the record names {found} as the line before it, which hashes to \
                 {expected}: this record or the line before it was changed"
            ),
            Problem::WrongStart { expected, found } => write!(
                f,
                "the first record names {found} as the line before it, \
                 the chain starts at {expected}"
            ),
            Problem::Removed { from, to } if from == to => {
                write!(f, "record {from} is missing before this one: removed")
            }
            Problem::Removed { from, to } => {
                write!(
                    f,
                    "records {from} to {to} are missing before this one: removed"
                )
            }
            Problem::Reordered {
                expected,
                found,
                file,
                line,
            } => write!(
                f,
                "record {found} is here where record {expected} was due, \
                 which is at {}:{line}: reordered",
                file.display()
            ),
            Problem::Inserted { seq } => write!(
                f,
                "the record is not one of the chain: inserted where record {seq} belongs"
            ),
            Problem::OutOfPlace { expected, found } => write!(
                f,
                "record {found} is here where record {expected} was due: \
                 inserted, or moved from earlier"
            ),
            Problem::Renumbered { expected, found } => write!(
                f,
                "the record is numbered {found} where {expected} was due: its number was changed"
            ),
        }
    }
}

/// Verifies the chain over `files`, read in order, from [`GENESIS`]: the
/// first record of the first file starts it (after any lines written
/// before the chain, [`ChainReport::unchained`]), and each later file
/// continues it from the last line of the file before.
///
/// The first record that does not hold is the error: a changed, removed,
/// inserted or reordered record, a line that is not an audit record, an
/// empty or unreadable file. See the [module](self) for what a chain that
/// holds does not prove.
pub fn verify_chain<P: AsRef<Path>>(files: &[P]) -> Result<ChainReport, ChainBreak> {
    verify(files, None)
}

/// Verifies the chain over `files`, read in order, continuing a chain
/// whose last line hashed to `after` (a file before them that is gone, or
/// kept elsewhere): the first record must name it. Its number is taken as
/// the first record gives it.
pub fn verify_chain_after<P: AsRef<Path>>(
    after: &str,
    files: &[P],
) -> Result<ChainReport, ChainBreak> {
    verify(files, Some(after))
}

/// The last record of the file at `path`, as a sink continuing it starts
/// from: `None` when it has no line. An error when its last line is cut
/// short (no newline at its end) or is not a JSON object.
///
/// Only the last line is read (a line written before the chain, with no
/// number, has the whole file read to count the lines).
pub fn last_head(path: impl AsRef<Path>) -> io::Result<Option<ChainHead>> {
    let mut file = File::open(path)?;
    last_head_of(&mut file)
}

/// [`last_head`] of an open file (read from its end).
pub(crate) fn last_head_of(file: &mut File) -> io::Result<Option<ChainHead>> {
    let Some(line) = last_line(file)? else {
        return Ok(None);
    };
    let links: Links = serde_json::from_slice(&line).map_err(|error| {
        invalid(format!(
            "its last line is not an audit record ({error}): \
             move the file aside and continue the chain in a new one"
        ))
    })?;
    let seq = match links.seq {
        Some(seq) => seq,
        // Records written before the chain: each one counts.
        None => count_lines(file)?,
    };
    Ok(Some(ChainHead::new(seq, line_hash(&line))))
}

/// The `prev` the first line of `file` names, when it has a line.
pub(crate) fn first_prev(file: &mut File) -> io::Result<Option<Option<String>>> {
    file.seek(SeekFrom::Start(0))?;
    let mut line = Vec::new();
    BufReader::new(&mut *file).read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        serde_json::from_slice::<Links>(&line)
            .ok()
            .and_then(|links| links.prev),
    ))
}

pub(crate) fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// The last line of `file`, newline included: read backwards from its end,
/// so that opening a long log does not read all of it.
fn last_line(file: &mut File) -> io::Result<Option<Vec<u8>>> {
    const CHUNK: u64 = 8 * 1024;
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] != b'\n' {
        return Err(invalid(
            "its last line ends without a newline: a record cut short (a crash while \
             writing?); move the file aside and continue the chain in a new one"
                .to_owned(),
        ));
    }
    // The bytes after the last newline but one, read a chunk at a time.
    let mut tail: Vec<u8> = Vec::new();
    let mut end = len - 1;
    loop {
        let start = end.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; (end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)?;
        if let Some(newline) = chunk.iter().rposition(|&b| b == b'\n') {
            chunk.drain(..=newline);
            chunk.extend_from_slice(&tail);
            tail = chunk;
            break;
        }
        chunk.extend_from_slice(&tail);
        tail = chunk;
        if start == 0 {
            break;
        }
        end = start;
    }
    tail.push(b'\n');
    Ok(Some(tail))
}

fn count_lines(file: &mut File) -> io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut reader = BufReader::new(file);
    let mut count = 0u64;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(count);
        }
        count += buffer.iter().filter(|&&b| b == b'\n').count() as u64;
        let used = buffer.len();
        reader.consume(used);
    }
}

/// The two fields of a record the chain reads, leniently: the rest of the
/// line is not looked at.
#[derive(Deserialize)]
struct Links {
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    prev: Option<String>,
}

/// Where a line is: the file's index, the line from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct At {
    file: usize,
    line: u64,
}

/// A line read, newline included (when it has one).
struct Line {
    at: At,
    bytes: Vec<u8>,
}

/// The lines of the files in order, each file's read as it comes.
struct Lines<'a, P> {
    files: &'a [P],
    next_file: usize,
    reader: Option<(usize, BufReader<File>, u64)>,
}

impl<P: AsRef<Path>> Lines<'_, P> {
    fn path(&self, file: usize) -> PathBuf {
        self.files[file].as_ref().to_path_buf()
    }

    fn fault(&self, at: At, problem: Problem) -> ChainBreak {
        ChainBreak {
            file: self.path(at.file),
            line: at.line,
            problem,
        }
    }

    fn next_line(&mut self) -> Option<Result<Line, ChainBreak>> {
        loop {
            if self.reader.is_none() {
                let file = self.next_file;
                if file >= self.files.len() {
                    return None;
                }
                self.next_file += 1;
                match File::open(self.files[file].as_ref()) {
                    Ok(opened) => self.reader = Some((file, BufReader::new(opened), 0)),
                    Err(error) => {
                        let at = At { file, line: 0 };
                        return Some(Err(self.fault(at, Problem::Unreadable(error.to_string()))));
                    }
                }
            }
            let (file, reader, read) = self.reader.as_mut()?;
            let (file, line) = (*file, *read + 1);
            let mut bytes = Vec::new();
            match reader.read_until(b'\n', &mut bytes) {
                Ok(0) => {
                    self.reader = None;
                    if line == 1 {
                        let at = At { file, line: 0 };
                        return Some(Err(self.fault(at, Problem::EmptyFile)));
                    }
                }
                Ok(_) => {
                    *read = line;
                    return Some(Ok(Line {
                        at: At { file, line },
                        bytes,
                    }));
                }
                Err(error) => {
                    self.reader = None;
                    let at = At { file, line };
                    return Some(Err(self.fault(at, Problem::Unreadable(error.to_string()))));
                }
            }
        }
    }

    /// The links of the next line, when there is one and it has them.
    fn peek_links(&mut self) -> Option<Links> {
        let line = self.next_line()?.ok()?;
        serde_json::from_slice(&line.bytes).ok()
    }

    /// Where the record numbered `seq` is, among the lines left.
    fn find_seq(&mut self, seq: u64) -> Option<At> {
        while let Some(line) = self.next_line() {
            let Ok(line) = line else { continue };
            let links: Option<Links> = serde_json::from_slice(&line.bytes).ok();
            if links.and_then(|links| links.seq) == Some(seq) {
                return Some(line.at);
            }
        }
        None
    }
}

/// The line before the one being read, as the chain knows it.
struct Before {
    at: At,
    hash: String,
}

fn verify<P: AsRef<Path>>(files: &[P], after: Option<&str>) -> Result<ChainReport, ChainBreak> {
    let mut lines = Lines {
        files,
        next_file: 0,
        reader: None,
    };
    if files.is_empty() {
        return Err(ChainBreak {
            file: PathBuf::new(),
            line: 0,
            problem: Problem::Unreadable("no file to verify".to_owned()),
        });
    }
    // The start: what the first chained record names, and its number.
    let start = after.unwrap_or(GENESIS).to_owned();
    let mut expected_seq: Option<u64> = after.is_none().then_some(1);
    // The line before (None: the start), and the one before that.
    let mut before: Option<Before> = None;
    let mut before_that: Option<String> = None;
    let mut unchained = 0u64;
    let mut records = 0u64;
    let mut first_seq = 0u64;
    let mut last = ChainHead::new(0, start.clone());
    while let Some(line) = lines.next_line() {
        let line = line?;
        let at = line.at;
        if line.bytes.last() != Some(&b'\n') {
            return Err(lines.fault(at, Problem::Unterminated));
        }
        let text = &line.bytes[..line.bytes.len() - 1];
        if text.iter().all(u8::is_ascii_whitespace) {
            let problem = Problem::NotARecord("an empty line".to_owned());
            return Err(lines.fault(at, problem));
        }
        let record: AuditRecord = serde_json::from_slice(text)
            .map_err(|error| lines.fault(at, Problem::NotARecord(error.to_string())))?;
        let hash = line_hash(&line.bytes);
        let (seq, prev) = match (record.seq, record.prev) {
            (Some(seq), Some(prev)) => (seq, prev),
            (None, None) if after.is_none() && at.file == 0 && records == 0 => {
                // Written before the chain: the chain starts from it.
                unchained += 1;
                expected_seq = Some(unchained + 1);
                before_that = before.map(|b| b.hash);
                before = Some(Before { at, hash });
                continue;
            }
            _ => return Err(lines.fault(at, Problem::Unchained)),
        };
        if records == 0 && unchained > 0 && prev == start && seq == 1 {
            // A chain from the start, behind lines that claim to precede it.
            let first = At { file: 0, line: 1 };
            return Err(lines.fault(first, Problem::Unchained));
        }
        let named = before.as_ref().map_or(start.as_str(), |b| b.hash.as_str());
        let due = expected_seq.unwrap_or(seq);
        if seq != due || prev != named {
            let named = named.to_owned();
            let unlinked = UnlinkedRecord {
                at,
                seq,
                prev,
                hash,
            };
            return Err(diagnose(
                &mut lines,
                unlinked,
                due,
                named,
                before,
                before_that,
            ));
        }
        let Some(next_seq) = seq.checked_add(1) else {
            let problem = Problem::NotARecord(format!("its `seq` is {seq}: no record can follow"));
            return Err(lines.fault(at, problem));
        };
        if records == 0 {
            first_seq = seq;
        }
        records += 1;
        expected_seq = Some(next_seq);
        last = ChainHead::new(seq, hash.clone());
        before_that = before.map(|b| b.hash);
        before = Some(Before { at, hash });
    }
    if records == 0 {
        // Only lines written before the chain: nothing is covered.
        return Err(lines.fault(At { file: 0, line: 1 }, Problem::Unchained));
    }
    Ok(ChainReport {
        files: files.len(),
        records,
        unchained,
        first_seq,
        last,
    })
}

/// The record where the chain stopped holding: it does not follow the
/// line before it.
struct UnlinkedRecord {
    at: At,
    seq: u64,
    prev: String,
    hash: String,
}

/// Which record is the first bad one, from the record that does not follow
/// the line before it (numbered `due`, naming `named`), the lines before
/// it and those after. The number tells a removal or a reordering from an
/// edit: an edited line keeps its number, and only the record after it
/// stops naming it.
fn diagnose<P: AsRef<Path>>(
    lines: &mut Lines<'_, P>,
    unlinked: UnlinkedRecord,
    due: u64,
    named: String,
    before: Option<Before>,
    before_that: Option<String>,
) -> ChainBreak {
    let UnlinkedRecord {
        at,
        seq,
        prev,
        hash,
    } = unlinked;
    if seq == due {
        // The number is right, the link is not.
        let Some(before) = before else {
            let problem = Problem::WrongStart {
                expected: named,
                found: prev,
            };
            return lines.fault(at, problem);
        };
        let next = lines.peek_links().and_then(|links| links.prev);
        return match next {
            // The next record names this one: the line before was changed.
            Some(next) if next == hash => lines.fault(
                before.at,
                Problem::Changed {
                    expected: prev,
                    found: named,
                },
            ),
            // The next record names the line before: this one was put in.
            Some(next) if next == named => lines.fault(at, Problem::Inserted { seq }),
            _ => lines.fault(
                at,
                Problem::PrevMismatch {
                    expected: named,
                    found: prev,
                },
            ),
        };
    }
    if prev == named {
        let problem = Problem::Renumbered {
            expected: due,
            found: seq,
        };
        return lines.fault(at, problem);
    }
    if seq > due {
        let problem = match lines.find_seq(due) {
            Some(there) => Problem::Reordered {
                expected: due,
                found: seq,
                file: lines.path(there.file),
                line: there.line,
            },
            None => Problem::Removed {
                from: due,
                to: seq - 1,
            },
        };
        return lines.fault(at, problem);
    }
    // A number that came already.
    if hash == named {
        // A copy of the line before.
        return lines.fault(at, Problem::Inserted { seq });
    }
    if let Some(before) = before
        && seq + 1 == due
        && before_that.as_deref() == Some(prev.as_str())
    {
        // This record and the one before both follow the line before that:
        // the one the next record names is the chain's.
        let next = lines.peek_links().and_then(|links| links.prev);
        let inserted = if next.as_deref() == Some(hash.as_str()) {
            before.at
        } else {
            at
        };
        return lines.fault(inserted, Problem::Inserted { seq });
    }
    let problem = Problem::OutOfPlace {
        expected: due,
        found: seq,
    };
    lines.fault(at, problem)
}
