//! One newline-delimited JSON-RPC frame, before rmcp sees it: a scan of its
//! raw bytes that needs no recursion and keeps bounded state (so that it
//! also reads a frame too large or too deep to parse), and what the guard
//! does with the frame: hand it to rmcp, answer it itself, or drop it.

mod duplicates;
mod scan;

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, JsonRpcMessage,
    JsonRpcRequest,
};
use serde_json::{Value, json};
use toolcall_core::__private::echo::{MAX_VALUE_ECHO, cut};

use crate::MAX_REQUEST_ID_BYTES;
pub(crate) use duplicates::no_duplicates;
pub(crate) use scan::{Scan, Scanner};

/// JSON-RPC's code for a message that is not JSON.
pub(crate) const PARSE_ERROR: i32 = -32700;
/// JSON-RPC's code for JSON that is not a valid request.
pub(crate) const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC's code for a known method whose `params` do not fit it.
pub(crate) const INVALID_PARAMS: i32 = -32602;

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
    read_text(line).0
}

/// Reads one frame, as [`read`]; with a message, also the text it was read
/// from: the frame without a byte order mark or a final `\r`, and `{}` in
/// place of a `tools/call`'s arguments. rmcp reads the same message from
/// that text.
pub(crate) fn read_text(line: &[u8]) -> (Outcome, Option<Cow<'_, str>>) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return (Outcome::Drop("a blank line"), None);
    }
    let mut scanner = Scanner::default();
    scanner.feed(line);
    let scan = scanner.finish();

    let Ok(text) = std::str::from_utf8(line) else {
        let answer = scan.answer(
            PARSE_ERROR,
            "Parse error: the message is not valid UTF-8".into(),
        );
        return (answer, None);
    };
    if let Some(member) = scan.duplicate {
        let answer = scan.answer(
            INVALID_REQUEST,
            format!("Invalid request: the member `{member}` appears twice").into(),
        );
        return (answer, None);
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
    let read = replaced.as_ref().map_or(text, |replaced| &replaced.text);

    if let Some(refusal) = refusal(read, &scan) {
        return (refusal, None);
    }
    match parse(read, &scan, is_call) {
        Ok(mut message) => {
            let (read, arguments) = match replaced {
                Some(replaced) => (Cow::Owned(replaced.text), Some(replaced.arguments)),
                None => (Cow::Borrowed(text), None),
            };
            attach_arguments(&mut message, arguments);
            match misread_call(&message) {
                Some(answer) => (answer, None),
                None => (Outcome::Message(Box::new(message)), Some(read)),
            }
        }
        Err(error) => (unread(&scan, read, is_call, &error), None),
    }
}

/// `text` as rmcp reads it. A request-shaped `tools/call` is read as one
/// directly: rmcp's reading tries each request kind in turn (thirteen
/// before `tools/call`, each failure a discarded error), to the same value.
/// Anything else, and a call that does not read as one, goes the long way,
/// so that every error is rmcp's own.
fn parse(text: &str, scan: &Scan, is_call: bool) -> serde_json::Result<ClientJsonRpcMessage> {
    if is_call
        && scan.is_request_shaped()
        && let Ok(JsonRpcRequest {
            jsonrpc,
            id,
            request,
        }) = serde_json::from_str::<JsonRpcRequest<CallToolRequest>>(text)
    {
        return Ok(JsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc,
            id,
            request: ClientRequest::CallToolRequest(request),
        }));
    }
    serde_json::from_str::<ClientJsonRpcMessage>(text)
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
pub(crate) fn kind(value: &Value) -> &'static str {
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

#[cfg(test)]
mod tests;
