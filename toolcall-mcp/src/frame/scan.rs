//! The scan of a frame's raw bytes: what it keeps of the members the guard
//! looks for, and the scanner that finds them with bounded state.

use std::borrow::Cow;
use std::fmt;

use serde_json::Value;

use super::{IdProblem, Outcome, error_line, read_id};
use crate::MAX_REQUEST_ID_BYTES;

/// The longest `method` the scan keeps (it only needs to recognize
/// `tools/call`).
const MAX_METHOD_BYTES: usize = 256;

/// The longest member name the scan keeps; the names it looks for are short.
const MAX_KEY_BYTES: usize = 64;

/// The members of a frame the guard looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Member {
    Id,
    Method,
    Params,
    Result,
    Error,
    /// `params.arguments`.
    Arguments,
    Other,
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Member::Id => "id",
            Member::Method => "method",
            Member::Params => "params",
            Member::Result => "result",
            Member::Error => "error",
            Member::Arguments => "params.arguments",
            Member::Other => "?",
        })
    }
}

/// Where the scan is in one object it follows (the frame itself, or its
/// `params`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Expect {
    /// A member name, or the end of the object.
    #[default]
    Key,
    /// The `:` after a name.
    Colon,
    /// The start of a member's value.
    Value,
    /// Inside a number or a literal.
    Scalar,
    /// Inside a string value.
    Text,
    /// Inside an array or object value.
    Nested,
    /// A `,` or the end of the object.
    Comma,
}

/// One object the scan follows: level 0 is the frame, level 1 its `params`.
#[derive(Debug, Default)]
struct Level {
    expect: Expect,
    /// The raw name of the current member (at most [`MAX_KEY_BYTES`]).
    key: Vec<u8>,
    key_too_long: bool,
    member: Option<Member>,
    /// Where the current member's value starts.
    start: usize,
}

/// What a scan found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// The top-level `id`, if given once, readable, and one the server
    /// answers under (no [`IdProblem`]).
    pub(super) id: Option<Value>,
    /// What is wrong with the top-level `id`, given once.
    pub(super) id_problem: Option<IdProblem>,
    /// Whether the frame has a top-level `id` member at all.
    has_id: bool,
    /// The top-level `method`, if a readable string.
    pub(crate) method: Option<String>,
    pub(super) has_method: bool,
    /// Whether the frame has a top-level `result` or `error`.
    is_response: bool,
    /// The span of `params.arguments`'s value.
    pub(super) arguments: Option<(usize, usize)>,
    /// A member the scan looks for, given twice.
    pub(super) duplicate: Option<Member>,
    /// Whether the top-level object was closed.
    complete: bool,
}

impl Scan {
    /// Whether the frame is a complete object with a top-level `method` and
    /// `id` and neither `result` nor `error`: the shape rmcp reads as a
    /// request.
    pub(super) fn is_request_shaped(&self) -> bool {
        self.complete && self.has_id && self.has_method && !self.is_response
    }

    /// The JSON-RPC error that answers this frame, or nothing if it is a
    /// notification or a response (neither is answered).
    pub(crate) fn answer(&self, code: i32, message: Cow<'_, str>) -> Outcome {
        if self.complete && !self.has_id && self.has_method {
            return Outcome::Drop("a notification that cannot be read");
        }
        if self.complete && !self.has_method && self.is_response {
            return Outcome::Drop("a response that cannot be read");
        }
        let id = match self.duplicate {
            Some(Member::Id) => Value::Null,
            _ => self.id.clone().unwrap_or(Value::Null),
        };
        Outcome::Answer(error_line(id, code, &message))
    }
}

/// A scan of a frame's raw bytes, fed in chunks: string and escape state
/// and a nesting counter, no recursion, no copy of the frame. It follows
/// the members of the top-level object and of its `params`, and keeps the
/// `id` (up to [`MAX_REQUEST_ID_BYTES`]), the `method` and where `params.arguments`
/// is. It reads anything: on malformed JSON it still reports what it found.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    pos: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The level whose member name the current string is.
    key_of: Option<usize>,
    levels: [Level; 2],
    /// Whether the top-level value is an object (level 0 is followed).
    object: bool,
    /// Whether a top-level value was opened.
    opened: bool,
    /// Whether the top-level `params` is an open object (level 1 is followed).
    params_open: bool,
    /// How often each member was seen: id, method, params, arguments.
    counts: [u8; 4],
    id_text: Vec<u8>,
    id_too_long: bool,
    method_text: Vec<u8>,
    method_too_long: bool,
    scan: Scan,
}

impl Scanner {
    /// Scans the next bytes of the frame.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        let mut at = 0;
        while at < bytes.len() {
            let passed = self.pass_over(&bytes[at..]);
            if passed > 0 {
                at += passed;
                self.pos += passed;
                continue;
            }
            self.step(bytes[at]);
            self.pos += 1;
            at += 1;
        }
    }

    /// Takes the next bytes of `rest` that change nothing but where the
    /// scan is, or only the member name being read (which is copied): how
    /// many. [`step`](Self::step) would do the same with each of them, one
    /// at a time (the unit tests hold the two to the same scans).
    fn pass_over(&mut self, rest: &[u8]) -> usize {
        // The bytes of a kept `id` or `method`, and an escape's second
        // byte, go one at a time.
        if self.escaped || self.capturing().is_some() {
            return 0;
        }
        if self.level_at(self.depth).is_none() {
            return self.pass_unfollowed(rest);
        }
        if !self.in_string {
            return 0;
        }
        // A string at a followed level: only its end or an escape changes
        // anything.
        let plain = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
        if let Some(level) = self.key_of {
            let key = &mut self.levels[level];
            let room = MAX_KEY_BYTES.saturating_sub(key.key.len());
            key.key.extend_from_slice(&rest[..plain.min(room)]);
            key.key_too_long |= plain > room;
        }
        plain
    }

    /// [`pass_over`](Self::pass_over) inside a value no level follows
    /// (`_meta`'s, the arguments'): strings, escapes and nesting within it
    /// change nothing but where the scan is. It stops at a byte that could
    /// change more: a bracket that opens the top-level value, or one that
    /// closes back to a followed level.
    fn pass_unfollowed(&mut self, rest: &[u8]) -> usize {
        let mut at = 0;
        loop {
            if self.in_string {
                let Some(found) = memchr::memchr2(b'"', b'\\', &rest[at..]) else {
                    return rest.len();
                };
                at += found;
                if rest[at] == b'"' {
                    self.in_string = false;
                    at += 1;
                } else if at + 1 < rest.len() {
                    // An escape and the byte it escapes.
                    at += 2;
                } else {
                    self.escaped = true;
                    return rest.len();
                }
                continue;
            }
            let Some(found) = rest[at..]
                .iter()
                .position(|byte| matches!(byte, b'"' | b'{' | b'}' | b'[' | b']'))
            else {
                return rest.len();
            };
            at += found;
            match rest[at] {
                b'"' => self.in_string = true,
                b'{' | b'[' if self.depth > 0 => self.depth += 1,
                b'}' | b']' if self.depth > 0 && self.level_at(self.depth - 1).is_none() => {
                    self.depth -= 1;
                }
                _ => return at,
            }
            at += 1;
        }
    }

    /// Scans `bytes` one at a time, without [`pass_over`](Self::pass_over):
    /// what [`feed`](Self::feed) must find.
    #[cfg(test)]
    pub(crate) fn feed_bytewise(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.step(byte);
            self.pos += 1;
        }
    }

    /// What the scan found.
    pub(crate) fn finish(mut self) -> Scan {
        if self.counts[0] == 1 {
            match read_id(&self.id_text, self.id_too_long) {
                Ok(id) => self.scan.id = id,
                Err(problem) => self.scan.id_problem = Some(problem),
            }
        }
        if self.counts[1] == 1 && !self.method_too_long {
            self.scan.method = serde_json::from_slice::<String>(&self.method_text).ok();
        }
        self.scan
    }

    /// The level that follows the tokens at nesting `depth`.
    fn level_at(&self, depth: usize) -> Option<usize> {
        match depth {
            1 if self.object => Some(0),
            2 if self.params_open => Some(1),
            _ => None,
        }
    }

    /// The member of level 0 whose value is being read, if it is kept.
    fn capturing(&self) -> Option<Member> {
        let top = &self.levels[0];
        let reading = matches!(top.expect, Expect::Scalar | Expect::Text | Expect::Nested);
        match top.member {
            Some(Member::Id) if reading && self.counts[0] == 1 => Some(Member::Id),
            Some(Member::Method) if reading && self.counts[1] == 1 => Some(Member::Method),
            _ => None,
        }
    }

    /// Scans one byte of the frame.
    fn step(&mut self, byte: u8) {
        let before = self.capturing();
        let here = self.level_at(self.depth);
        if self.in_string {
            self.string_byte(byte, before, here);
            return;
        }
        // Whether this byte ended a number or literal without being part of it.
        let delimiter = match byte {
            b' ' | b'\t' | b'\n' | b'\r' => self.end_scalar(here),
            b'"' => {
                self.open_string(here);
                false
            }
            b'{' | b'[' => {
                self.open(byte, here);
                false
            }
            b'}' | b']' => self.close(here),
            b':' => {
                if let Some(level) = here
                    && self.levels[level].expect == Expect::Colon
                {
                    self.levels[level].expect = Expect::Value;
                }
                false
            }
            b',' => self.comma(here),
            _ => {
                if let Some(level) = here
                    && self.levels[level].expect == Expect::Value
                {
                    self.levels[level].expect = Expect::Scalar;
                    self.levels[level].start = self.pos;
                }
                false
            }
        };
        let after = if delimiter { None } else { self.capturing() };
        self.keep(if delimiter { None } else { before }, after, byte);
    }

    /// A byte inside a string; `before`: the member whose value was being
    /// kept before it, `here`: the level followed at this depth.
    fn string_byte(&mut self, byte: u8, before: Option<Member>, here: Option<usize>) {
        if self.escaped {
            self.escaped = false;
        } else if byte == b'\\' {
            self.escaped = true;
        } else if byte == b'"' {
            self.in_string = false;
            if let Some(level) = self.key_of.take() {
                self.end_key(level);
            } else if let Some(level) = here
                && self.levels[level].expect == Expect::Text
            {
                self.end_value(level, self.pos + 1);
            }
            self.keep(before, None, byte);
            return;
        }
        if let Some(level) = self.key_of {
            let key = &mut self.levels[level];
            if key.key.len() < MAX_KEY_BYTES {
                key.key.push(byte);
            } else {
                key.key_too_long = true;
            }
        }
        self.keep(before, self.capturing(), byte);
    }

    /// A `"` outside a string: a member name or a string value starts.
    fn open_string(&mut self, here: Option<usize>) {
        self.in_string = true;
        let Some(level) = here else {
            return;
        };
        let current = &mut self.levels[level];
        match current.expect {
            Expect::Key => {
                current.key.clear();
                current.key_too_long = false;
                self.key_of = Some(level);
            }
            Expect::Value => {
                current.expect = Expect::Text;
                current.start = self.pos;
            }
            _ => {}
        }
    }

    /// A `{` or `[`: the top-level value, or a nested one, opens.
    fn open(&mut self, byte: u8, here: Option<usize>) {
        if self.depth == 0 && !self.opened {
            self.opened = true;
            self.object = byte == b'{';
        } else if let Some(level) = here
            && self.levels[level].expect == Expect::Value
        {
            let current = &mut self.levels[level];
            current.expect = Expect::Nested;
            current.start = self.pos;
            if level == 0 && current.member == Some(Member::Params) && byte == b'{' {
                self.params_open = true;
                self.levels[1] = Level::default();
            }
        }
        self.depth += 1;
    }

    /// A `}` or `]`: the value open at this depth closes. Whether it ended
    /// a number or literal.
    fn close(&mut self, here: Option<usize>) -> bool {
        let delimiter = self.end_scalar(here);
        if self.depth == 2 && self.params_open {
            self.params_open = false;
        }
        if self.depth == 1 && self.object {
            self.scan.complete = true;
        }
        self.depth = self.depth.saturating_sub(1);
        if let Some(level) = self.level_at(self.depth)
            && self.levels[level].expect == Expect::Nested
        {
            self.end_value(level, self.pos + 1);
        }
        delimiter
    }

    /// A `,`: the next member of the level followed here. Whether it ended
    /// a number or literal.
    fn comma(&mut self, here: Option<usize>) -> bool {
        let delimiter = self.end_scalar(here);
        if let Some(level) = here
            && self.levels[level].expect == Expect::Comma
        {
            self.levels[level].expect = Expect::Key;
        }
        delimiter
    }

    /// Ends the number or literal being read at `here`, if one is: whether
    /// one was.
    fn end_scalar(&mut self, here: Option<usize>) -> bool {
        match here {
            Some(level) if self.levels[level].expect == Expect::Scalar => {
                self.end_value(level, self.pos);
                true
            }
            _ => false,
        }
    }

    /// Keeps `byte` if it belongs to the value of the `id` or `method`.
    fn keep(&mut self, before: Option<Member>, after: Option<Member>, byte: u8) {
        let (text, too_long, limit) = match before.or(after) {
            Some(Member::Id) => (
                &mut self.id_text,
                &mut self.id_too_long,
                MAX_REQUEST_ID_BYTES,
            ),
            Some(Member::Method) => (
                &mut self.method_text,
                &mut self.method_too_long,
                MAX_METHOD_BYTES,
            ),
            _ => return,
        };
        if text.len() < limit {
            text.push(byte);
        } else {
            *too_long = true;
        }
    }

    /// A member name of `level` ended: which member is it?
    fn end_key(&mut self, level: usize) {
        let current = &mut self.levels[level];
        current.expect = Expect::Colon;
        let name: Option<Cow<'_, [u8]>> = if current.key_too_long {
            None
        } else if current.key.contains(&b'\\') {
            let mut quoted = Vec::with_capacity(current.key.len() + 2);
            quoted.push(b'"');
            quoted.extend_from_slice(&current.key);
            quoted.push(b'"');
            serde_json::from_slice::<String>(&quoted)
                .ok()
                .map(|name| Cow::Owned(name.into_bytes()))
        } else {
            Some(Cow::Borrowed(&current.key[..]))
        };
        let member = match (level, name.as_deref()) {
            (0, Some(b"id")) => Member::Id,
            (0, Some(b"method")) => Member::Method,
            (0, Some(b"params")) => Member::Params,
            (0, Some(b"result")) => Member::Result,
            (0, Some(b"error")) => Member::Error,
            (1, Some(b"arguments")) => Member::Arguments,
            _ => Member::Other,
        };
        current.member = Some(member);
        let count = match member {
            Member::Id => {
                self.scan.has_id = true;
                Some(0)
            }
            Member::Method => {
                self.scan.has_method = true;
                Some(1)
            }
            Member::Params => Some(2),
            Member::Arguments => Some(3),
            Member::Result | Member::Error => {
                self.scan.is_response = true;
                None
            }
            Member::Other => None,
        };
        if let Some(index) = count {
            self.counts[index] = self.counts[index].saturating_add(1);
            if self.counts[index] == 2 && self.scan.duplicate.is_none() {
                self.scan.duplicate = Some(member);
            }
        }
    }

    /// The value of the current member of `level` ended at `end`.
    fn end_value(&mut self, level: usize, end: usize) {
        let current = &mut self.levels[level];
        current.expect = Expect::Comma;
        if current.member == Some(Member::Arguments) && self.counts[3] == 1 {
            self.scan.arguments = Some((current.start, end));
        }
    }
}
