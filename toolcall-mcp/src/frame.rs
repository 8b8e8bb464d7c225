//! One newline-delimited JSON-RPC frame, before rmcp sees it: a scan of its
//! raw bytes that needs no recursion and keeps bounded state (so that it
//! also reads a frame too large or too deep to parse), and what the guard
//! does with the frame: hand it to rmcp, answer it itself, or drop it.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, JsonRpcRequest,
};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};
use toolcall_core::__private::echo::{MAX_VALUE_ECHO, cut};

use crate::MAX_REQUEST_ID_BYTES;

/// JSON-RPC's code for a message that is not JSON.
pub(crate) const PARSE_ERROR: i32 = -32700;
/// JSON-RPC's code for JSON that is not a valid request.
pub(crate) const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC's code for a known method whose `params` do not fit it.
pub(crate) const INVALID_PARAMS: i32 = -32602;

/// The longest `method` the scan keeps (it only needs to recognize
/// `tools/call`).
const MAX_METHOD_BYTES: usize = 256;

/// The longest member name the scan keeps; the names it looks for are short.
const MAX_KEY_BYTES: usize = 64;

/// The raw text of a `tools/call`'s `arguments`, exactly as the client sent
/// it, attached by the guard to the request's extensions (which no client
/// can set). `None`: the call had no arguments (or `null`).
#[derive(Clone, Debug)]
pub(crate) struct RawArguments(pub(crate) Option<String>);

/// What the guard does with one frame.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A message for rmcp.
    Message(Box<ClientJsonRpcMessage>),
    /// A line to write back: the JSON-RPC error that answers the frame.
    Answer(Vec<u8>),
    /// Nothing to answer: blank, a notification or a response rmcp cannot
    /// read (answering a response could start an error storm).
    Drop(&'static str),
}

/// Reads one frame (a line without its `\n`).
pub(crate) fn read(line: &[u8]) -> Outcome {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Outcome::Drop("a blank line");
    }
    let mut scanner = Scanner::default();
    scanner.feed(line);
    let scan = scanner.finish();

    let Ok(text) = std::str::from_utf8(line) else {
        return scan.answer(
            PARSE_ERROR,
            "Parse error: the message is not valid UTF-8".into(),
        );
    };
    if let Some(member) = scan.duplicate {
        return scan.answer(
            INVALID_REQUEST,
            format!("Invalid request: the member `{member}` appears twice").into(),
        );
    }

    // A `tools/call`'s arguments go to the pipeline as the client wrote
    // them: rmcp sees `{}` in their place, so that neither its parser nor
    // its map decides what they say (duplicate members, numbers out of
    // range, nesting) and the pipeline's limits measure what was sent.
    let is_call = scan.method.as_deref() == Some("tools/call");
    let replaced = scan
        .arguments
        .filter(|_| is_call)
        .and_then(|span| Replaced::new(text, span));
    let text = replaced.as_ref().map_or(text, |replaced| &replaced.text);

    if let Some(refusal) = refusal(text, &scan) {
        return refusal;
    }
    match serde_json::from_str::<ClientJsonRpcMessage>(text) {
        Ok(mut message) => {
            attach_arguments(&mut message, replaced.map(|replaced| replaced.arguments));
            misread_call(&message).unwrap_or_else(|| Outcome::Message(Box::new(message)))
        }
        Err(error) => unread(&scan, text, is_call, &error),
    }
}

/// A `tools/call`'s frame with `{}` in place of its arguments, and the
/// arguments as sent.
struct Replaced<'a> {
    /// The frame, `{}` in place of the arguments.
    text: String,
    /// The arguments' text; `None` for `null`.
    arguments: Option<&'a str>,
}

impl<'a> Replaced<'a> {
    /// `text` with `{}` in place of its bytes `start..end`, if they are on
    /// character boundaries.
    fn new(text: &'a str, (start, end): (usize, usize)) -> Option<Self> {
        let (before, arguments, after) =
            (text.get(..start)?, text.get(start..end)?, text.get(end..)?);
        let mut replaced = String::with_capacity(before.len() + 2 + after.len());
        replaced.push_str(before);
        replaced.push_str("{}");
        replaced.push_str(after);
        Some(Replaced {
            text: replaced,
            arguments: Some(arguments).filter(|raw| *raw != "null"),
        })
    }
}

/// The answer to a frame refused before rmcp reads it, if it is: a member
/// name twice in one object, text that is not JSON, or a request whose id
/// no answer could repeat as sent.
fn refusal(text: &str, scan: &Scan) -> Option<Outcome> {
    if let Err(error) = no_duplicates(text) {
        return Some(match error.classify() {
            serde_json::error::Category::Data => scan.answer(
                INVALID_REQUEST,
                "Invalid request: a member name appears twice in one object".into(),
            ),
            _ => scan.answer(
                PARSE_ERROR,
                format!("Parse error: {}", bounded(&error.to_string())).into(),
            ),
        });
    }
    // A request whose id no answer could repeat as sent: refused before
    // rmcp reads it (it would answer under a copy of any length, or under
    // another number), with `id: null`. A response is rmcp's to match.
    if scan.has_method
        && let Some(problem) = scan.id_problem
    {
        return Some(scan.answer(INVALID_REQUEST, problem.message().into()));
    }
    None
}

/// Attaches to a `tools/call` the arguments it was sent with
/// ([`RawArguments`]): `replaced` is `Some` when the frame's arguments were
/// replaced by `{}` (`Some(None)` for `null`).
fn attach_arguments(message: &mut ClientJsonRpcMessage, replaced: Option<Option<&str>>) {
    let JsonRpcMessage::Request(JsonRpcRequest {
        request: ClientRequest::CallToolRequest(call),
        ..
    }) = message
    else {
        return;
    };
    match replaced {
        Some(raw) => {
            call.extensions.insert(RawArguments(raw.map(str::to_owned)));
        }
        // No arguments, as rmcp read it too.
        None if call.params.arguments.is_none() => {
            call.extensions.insert(RawArguments(None));
        }
        // The scan and rmcp disagree (it should not happen): the server
        // falls back to rmcp's map.
        None => tracing::warn!("could not find the raw arguments of a tools/call"),
    }
}

/// rmcp reads a known method whose params do not fit it as a custom
/// request, which the server would answer "method not found": a
/// `tools/call` is answered with what is wrong instead.
fn misread_call(message: &ClientJsonRpcMessage) -> Option<Outcome> {
    let JsonRpcMessage::Request(JsonRpcRequest {
        id,
        request: ClientRequest::CustomRequest(custom),
        ..
    }) = message
    else {
        return None;
    };
    if custom.method != "tools/call" {
        return None;
    }
    let problem = call_params_problem(custom.params.as_ref()).unwrap_or_else(|| {
        "Invalid params: the `params` of tools/call could not be read".to_owned()
    });
    Some(Outcome::Answer(error_line(
        id.clone().into_json_value(),
        INVALID_PARAMS,
        &problem,
    )))
}

/// The answer to a frame rmcp could not read as a message (`error`).
fn unread(scan: &Scan, text: &str, is_call: bool, error: &serde_json::Error) -> Outcome {
    // rmcp reads no request at all from a `tools/call` whose params are
    // neither an object nor null, or hold a `_meta` that is not an object:
    // if the params are what is wrong, say so.
    if is_call
        && let Ok(Value::Object(frame)) = serde_json::from_str::<Value>(text)
        && frame.get("jsonrpc") == Some(&json!("2.0"))
        && let Some(params) = frame.get("params").filter(|params| !params.is_null())
        && let Some(problem) = call_params_problem(Some(params))
    {
        return scan.answer(INVALID_PARAMS, problem.into());
    }
    scan.answer(
        INVALID_REQUEST,
        format!("Invalid request: {}", bounded(&error.to_string())).into(),
    )
}

/// The answer to a frame over the length limit, from the scan of its bytes.
pub(crate) fn oversized(scan: &Scan, size: u64, limit: usize) -> Outcome {
    scan.answer(
        INVALID_REQUEST,
        format!(
            "Invalid request: the message is {size} bytes, over the limit of {limit}; \
             it was not read"
        )
        .into(),
    )
}

/// What is wrong with the `params` of a `tools/call`, if anything: the
/// message of a `-32602` answer. It names the member, and quotes nothing the
/// client sent beyond a cut excerpt of serde's message.
fn call_params_problem(params: Option<&Value>) -> Option<String> {
    match params {
        None => Some(NO_PARAMS.to_owned()),
        Some(params) => call_params_problem_text(params).err(),
    }
}

/// The problem of a `tools/call` without `params`.
const NO_PARAMS: &str = "Invalid params: tools/call needs `params`, an object with the `name` \
                         of the tool to call (and its `arguments`)";

fn call_params_problem_text(params: &Value) -> Result<(), String> {
    let params = match params {
        Value::Null => return Err(NO_PARAMS.to_owned()),
        Value::Object(params) => params,
        other => {
            return Err(format!(
                "Invalid params: the `params` of tools/call must be an object, not {}",
                kind(other)
            ));
        }
    };
    match params.get("name") {
        None | Some(Value::Null) => {
            return Err(
                "Invalid params: tools/call needs `params.name`, the name of the tool to call"
                    .to_owned(),
            );
        }
        Some(Value::String(_)) => {}
        Some(other) => {
            return Err(format!(
                "Invalid params: `params.name` (the name of the tool to call) must be a \
                 string, not {}",
                kind(other)
            ));
        }
    }
    if let Some(meta) = params.get("_meta").filter(|meta| !meta.is_object()) {
        return Err(format!(
            "Invalid params: `params._meta` must be an object, not {}",
            kind(meta)
        ));
    }
    serde_json::from_value::<CallToolRequestParams>(Value::Object(params.clone()))
        .map(drop)
        .map_err(|error| {
            format!(
                "Invalid params: the `params` of tools/call do not fit it: {}",
                bounded(&error.to_string())
            )
        })
}

/// What kind of JSON value `value` is, with its article.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What makes a request's `id` one the server does not answer under (see
/// [`MAX_REQUEST_ID_BYTES`] and the crate docs on request ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdProblem {
    /// Longer than [`MAX_REQUEST_ID_BYTES`] as written.
    TooLong,
    /// A number that is not an integer within 64 bits written as digits
    /// (`1.5`, `1.0`, `1e2`, `-0`, `2^63`): it cannot come back as written.
    NotAnInteger,
    /// `null`, a boolean, an array or an object.
    NotAnId,
}

impl IdProblem {
    fn message(self) -> String {
        match self {
            IdProblem::TooLong => format!(
                "Invalid request: the id is longer than {MAX_REQUEST_ID_BYTES} bytes; an id \
                 must be a string or an integer of at most {MAX_REQUEST_ID_BYTES} bytes as \
                 written (it is not repeated here)"
            ),
            IdProblem::NotAnInteger => "Invalid request: a numeric id must be an integer that \
                 fits a 64-bit signed integer (-9223372036854775808 to 9223372036854775807), \
                 written as plain digits (no fraction, exponent or -0), so that the answer \
                 carries it exactly as sent; other ids must be strings"
                .to_owned(),
            IdProblem::NotAnId => {
                "Invalid request: the id must be a string or an integer".to_owned()
            }
        }
    }
}

/// Reads the raw text of an `id` (at most [`MAX_REQUEST_ID_BYTES`] of it;
/// `too_long` if there was more): the id to answer under, or what is wrong
/// with it. `Ok(None)`: the text is no JSON value (the frame is unreadable
/// anyway).
fn read_id(text: &[u8], too_long: bool) -> Result<Option<Value>, IdProblem> {
    if too_long {
        return Err(IdProblem::TooLong);
    }
    let Ok(id) = serde_json::from_slice::<Value>(text) else {
        return Ok(None);
    };
    match id {
        Value::String(_) => Ok(Some(id)),
        Value::Number(_) => std::str::from_utf8(text)
            .ok()
            .and_then(|text| {
                text.parse::<i64>()
                    .ok()
                    .filter(|number| number.to_string() == text)
            })
            .map(|number| Some(Value::from(number)))
            .ok_or(IdProblem::NotAnInteger),
        _ => Err(IdProblem::NotAnId),
    }
}

/// A parser's message, which may quote the input, cut to the pipeline's
/// bound on what it repeats of an input.
fn bounded(text: &str) -> Cow<'_, str> {
    cut(text, MAX_VALUE_ECHO)
}

/// A JSON-RPC error line.
pub(crate) fn error_line(id: Value, code: i32, message: &str) -> Vec<u8> {
    let answer = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    });
    serde_json::to_vec(&answer).expect("a JSON value always serializes")
}

// ------------------------------------------------------------ duplicates

/// Whether `text` is one JSON value with no member name twice in one
/// object. Errors of the `Data` category are duplicates; any other is the
/// text's syntax (including serde_json's limits: nesting over 128, a number
/// out of range).
pub(crate) fn no_duplicates(text: &str) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    NoDuplicates.deserialize(&mut deserializer)?;
    deserializer.end()
}

/// Walks a JSON value and refuses a member name given twice in one object.
struct NoDuplicates;

impl<'de> DeserializeSeed<'de> for NoDuplicates {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoDuplicates {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NoDuplicates)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = Names::default();
        while let Some(Name(name)) = map.next_key()? {
            if !seen.insert(name) {
                return Err(de::Error::custom("a member name appears twice"));
            }
            map.next_value_seed(NoDuplicates)?;
        }
        Ok(())
    }
}

/// A member name: borrowed from the text, unless it holds an escape.
struct Name<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(NameVisitor)
    }
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = Name<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Borrowed(name)))
    }

    fn visit_str<E>(self, name: &str) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Owned(name.to_owned())))
    }
}

/// How many member names of one object [`Names`] keeps in a list, compared
/// one by one, before it hashes them.
const FEW_NAMES: usize = 8;

/// The member names of one object seen so far: the first few in a list
/// (an object of a frame has a few members, and comparing them costs less
/// than hashing them), the rest in a set, so that an object of many members
/// costs no more than a set.
struct Names<'de> {
    few: [Cow<'de, str>; FEW_NAMES],
    len: usize,
    many: HashSet<Cow<'de, str>>,
}

impl Default for Names<'_> {
    fn default() -> Self {
        Names {
            few: std::array::from_fn(|_| Cow::Borrowed("")),
            len: 0,
            many: HashSet::new(),
        }
    }
}

impl<'de> Names<'de> {
    /// Adds `name`: `false` if it was seen already.
    fn insert(&mut self, name: Cow<'de, str>) -> bool {
        if self.few[..self.len].contains(&name) {
            return false;
        }
        if self.len < FEW_NAMES {
            self.few[self.len] = name;
            self.len += 1;
            return true;
        }
        self.many.insert(name)
    }
}

// ------------------------------------------------------------ the scan

/// The members of a frame the guard looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Member {
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
    id: Option<Value>,
    /// What is wrong with the top-level `id`, given once.
    id_problem: Option<IdProblem>,
    /// Whether the frame has a top-level `id` member at all.
    has_id: bool,
    /// The top-level `method`, if a readable string.
    pub(crate) method: Option<String>,
    has_method: bool,
    /// Whether the frame has a top-level `result` or `error`.
    is_response: bool,
    /// The span of `params.arguments`'s value.
    arguments: Option<(usize, usize)>,
    /// A member the scan looks for, given twice.
    duplicate: Option<Member>,
    /// Whether the top-level object was closed.
    complete: bool,
}

impl Scan {
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
        while let Some(&byte) = bytes.get(at) {
            // Inside a string that is neither a member name nor a kept
            // value, only its end or an escape changes anything: the bytes
            // up to the next `"` or `\` are passed over at once.
            if self.in_string
                && !self.escaped
                && self.key_of.is_none()
                && self.capturing().is_none()
            {
                let rest = &bytes[at..];
                let plain = rest
                    .iter()
                    .position(|&byte| byte == b'"' || byte == b'\\')
                    .unwrap_or(rest.len());
                if plain > 0 {
                    at += plain;
                    self.pos += plain;
                    continue;
                }
            }
            self.step(byte);
            self.pos += 1;
            at += 1;
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

#[cfg(test)]
mod tests;
