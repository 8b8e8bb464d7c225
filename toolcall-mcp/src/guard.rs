//! [`FrameGuard`]: the newline-delimited JSON-RPC transport of the server,
//! which answers every frame rmcp could not (instead of leaving the client
//! waiting) and hands a call's arguments to the pipeline as sent.

use std::sync::Arc;

use rmcp::model::JsonRpcMessage;
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Mutex;
use toolcall_core::__private::echo::{MAX_VALUE_ECHO, cut};

use crate::MAX_STDIO_LINE_BYTES;
use crate::frame::{self, Outcome, Scanner};

/// A transport for an MCP server over a byte stream of newline-delimited
/// JSON-RPC messages (standard input and output, a socket, a pipe), which
/// answers every request, well-formed or not, and keeps serving.
///
/// rmcp's own reader drops, unanswered, a message it cannot parse (nested
/// deeper than serde_json's 128 levels, a number such as `1e400`, invalid
/// UTF-8) or that is longer than its line limit, so that the client waits
/// forever for that request. The guard reads each line itself, at most
/// [`max_line_bytes`](FrameGuard::max_line_bytes) of it ([`MAX_STDIO_LINE_BYTES`]
/// by default), and:
///
/// * answers a line it cannot read with a JSON-RPC error: `-32700` (parse
///   error) for text that is not JSON (or beyond serde_json's limits), and
///   `-32600` (invalid request) for JSON that is not a valid message, for a
///   member such as `id` or `params` given twice in one object, and for a
///   line over the limit (which it skips, unread, up to its newline). The
///   error carries the request's `id`, found by a scan of the raw bytes that
///   needs no parser (even in a line too long to keep), and `null` when it
///   has none it can read; an unreadable notification or response is not
///   answered (JSON-RPC answers neither). The error quotes none of the
///   input beyond a short excerpt of the parser's message; and every
///   JSON-RPC error the server sends through the guard, rmcp's included, has
///   its strings cut (head and tail) and its `data` left out
///   past 4 KiB, so that no error grows with the request it answers.
/// * refuses (`-32600`, `id: null`, saying why) a request whose `id` no
///   answer could carry exactly as sent: longer than
///   [`MAX_REQUEST_ID_BYTES`](crate::MAX_REQUEST_ID_BYTES) as written, or a
///   number that is not an integer within 64 bits written as plain digits
///   (see the [crate docs](crate#request-ids)); and answers `-32602`
///   (invalid params), naming what is wrong, a `tools/call` without an
///   object `params` holding a string `name`.
/// * hands the `arguments` of a `tools/call` to [`McpServer`](crate::McpServer)
///   as the exact text the client sent, so that the pipeline parses them
///   itself (`toolcall_core::Arguments::Raw`): a member given twice, a
///   number out of range or nesting too deep is then `INVALID_JSON`, an
///   audited tool result like any rejection, and the limits on raw arguments
///   measure what was sent. rmcp sees `{}` in their place, and the text
///   travels beside the request in its extensions, where no client can put
///   anything.
///
/// Its answers and rmcp's messages go out through one writer, whole lines
/// at a time, so they never interleave. Its state is bounded: one line, a
/// scan of a few kilobytes, and the line being written.
///
/// [`serve_stdio`](crate::serve_stdio) serves through a guard; to serve on
/// another byte stream, pass one to [`serve`](crate::serve):
///
/// ```no_run
/// use std::sync::Arc;
/// use toolcall_mcp::{FrameGuard, Options};
///
/// # async fn run(
/// #     dispatcher: toolcall_core::Dispatcher<()>,
/// #     socket: tokio::io::DuplexStream,
/// # ) -> Result<(), toolcall_mcp::Error> {
/// // `socket`: a connection accepted on a Unix socket, a TCP stream, ...
/// let (read, write) = tokio::io::split(socket);
/// let transport = FrameGuard::new(read, write);
/// toolcall_mcp::serve(Arc::new(dispatcher), Options::new("desk-42"), transport).await
/// # }
/// ```
pub struct FrameGuard<R, W> {
    read: BufReader<R>,
    /// The line being read.
    line: Vec<u8>,
    max_line_bytes: usize,
    /// The scan of a line over the limit, being skipped, and its size so far.
    skipping: Option<(Box<Scanner>, u64)>,
    writer: Arc<Mutex<Option<LineWriter<W>>>>,
    /// The reply being written, kept here until it is out: `receive` may be
    /// cancelled at any await (rmcp polls it in a `select!`).
    reply: Option<Reply>,
}

/// A line written back to the client (the JSON-RPC error that answers a
/// frame), on its way out.
enum Reply {
    /// Not yet handed to the writer.
    Queued(Vec<u8>),
    /// In the writer's buffer, being flushed.
    Flushing,
}

impl<R, W> std::fmt::Debug for FrameGuard<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameGuard")
            .field("max_line_bytes", &self.max_line_bytes)
            .finish_non_exhaustive()
    }
}

/// What one read of a line found.
enum Read {
    /// A whole line is in `line` (with its `\n`).
    Line,
    /// A line over the limit ended; it was skipped.
    Oversized(Box<Scanner>, u64),
    Eof,
    Failed(std::io::Error),
}

impl<R, W> FrameGuard<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// A guard that reads messages from `read` and writes to `write`.
    pub fn new(read: R, write: W) -> Self {
        FrameGuard {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line_bytes: MAX_STDIO_LINE_BYTES,
            skipping: None,
            writer: Arc::new(Mutex::new(Some(LineWriter {
                write,
                pending: Vec::new(),
            }))),
            reply: None,
        }
    }

    /// Sets the longest line read, in bytes (its `\n` included); a longer
    /// one is skipped and answered with an error. [`MAX_STDIO_LINE_BYTES`]
    /// (1 MiB) by default.
    pub fn max_line_bytes(mut self, max_line_bytes: usize) -> Self {
        self.max_line_bytes = max_line_bytes.max(1);
        self
    }

    /// Reads one line into `self.line`, never keeping more than the limit.
    /// Cancel-safe: what was read stays in `self`.
    async fn read_line(&mut self) -> Read {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) => return Read::Failed(error),
            };
            if available.is_empty() {
                return Read::Eof;
            }
            let newline = available.iter().position(|&byte| byte == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let chunk = &available[..take];

            if self.skipping.is_none() && self.line.len() + take > self.max_line_bytes {
                // Over the limit: scan what was kept, and skip the rest.
                let mut scanner = Box::<Scanner>::default();
                scanner.feed(&self.line);
                let size = self.line.len() as u64;
                self.line.clear();
                self.skipping = Some((scanner, size));
            }
            let done = match &mut self.skipping {
                Some((scanner, size)) => {
                    let body = chunk.strip_suffix(b"\n").unwrap_or(chunk);
                    scanner.feed(body);
                    *size += body.len() as u64;
                    newline.is_some()
                }
                None => {
                    self.line.extend_from_slice(chunk);
                    newline.is_some()
                }
            };
            self.read.consume(take);
            if done {
                return match self.skipping.take() {
                    Some((scanner, size)) => Read::Oversized(scanner, size),
                    None => Read::Line,
                };
            }
        }
    }

    /// Writes out the reply being written, if any. `false` if the writer
    /// is gone.
    async fn write_reply(&mut self) -> bool {
        if self.reply.is_none() {
            return true;
        }
        let mut writer = self.writer.lock().await;
        let Some(writer) = writer.as_mut() else {
            return false;
        };
        if let Some(Reply::Queued(line)) = self.reply.take() {
            writer.queue(&line);
        }
        self.reply = Some(Reply::Flushing);
        match writer.flush().await {
            Ok(()) => {
                self.reply = None;
                true
            }
            Err(error) => {
                tracing::debug!(%error, "could not answer a message");
                false
            }
        }
    }
}

impl<R, W> Transport<RoleServer> for FrameGuard<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        let mut item = item;
        bound_error(&mut item);
        // Written out here, so that the future (which rmcp spawns, and the
        // runtime moves) carries the line rather than the message.
        let line = serde_json::to_vec(&item).map_err(std::io::Error::other);
        drop(item);
        async move {
            let line = line?;
            let mut writer = writer.lock().await;
            let Some(writer) = writer.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the transport is closed",
                ));
            };
            writer.queue(&line);
            writer.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if !self.write_reply().await {
                return None;
            }
            let outcome = match self.read_line().await {
                Read::Line => {
                    let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
                    let outcome = frame::read(line);
                    self.line.clear();
                    outcome
                }
                Read::Oversized(scanner, size) => {
                    tracing::warn!(
                        size,
                        limit = self.max_line_bytes,
                        "an MCP message over the line limit was skipped"
                    );
                    frame::oversized(&scanner.finish(), size, self.max_line_bytes)
                }
                Read::Eof => {
                    if !self.line.is_empty() {
                        tracing::debug!("the MCP client left in the middle of a message");
                    }
                    return None;
                }
                Read::Failed(error) => {
                    tracing::error!(%error, "reading from the MCP client failed");
                    return None;
                }
            };
            match outcome {
                Outcome::Message(message) => return Some(*message),
                Outcome::Answer(answer) => {
                    tracing::debug!("answering a message rmcp could not read");
                    self.reply = Some(Reply::Queued(answer));
                }
                Outcome::Drop(what) => tracing::debug!(what, "dropped a message"),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.writer.lock().await.take());
        Ok(())
    }
}

/// The most of an error's `data` sent, written out as JSON: past it, the
/// data is left out.
const MAX_ERROR_DATA: usize = 4096;

/// Bounds what a JSON-RPC error repeats of its request: rmcp's errors may
/// quote the client (an unsupported protocol version comes back in
/// `data.requested`, whatever its length). Every string of the message and
/// data is cut (head and tail), and data still larger than
/// [`MAX_ERROR_DATA`] is left out. Results are the pipeline's, which bounds
/// its own echo.
fn bound_error(item: &mut TxJsonRpcMessage<RoleServer>) {
    let JsonRpcMessage::Error(error) = item else {
        return;
    };
    let error = &mut error.error;
    if let std::borrow::Cow::Owned(message) = cut(&error.message, MAX_VALUE_ECHO) {
        error.message = message.into();
    }
    if let Some(data) = &mut error.data {
        cut_strings(data);
        if serde_json::to_vec(data).map_or(true, |text| text.len() > MAX_ERROR_DATA) {
            error.data = None;
        }
    }
}

/// Cuts every string (and member name) in `value`.
fn cut_strings(value: &mut Value) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => {
                if let std::borrow::Cow::Owned(short) = cut(text, MAX_VALUE_ECHO) {
                    *text = short;
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(members) => {
                if members.keys().any(|name| name.len() > MAX_VALUE_ECHO) {
                    *members = std::mem::take(members)
                        .into_iter()
                        .map(|(name, value)| (cut(&name, MAX_VALUE_ECHO).into_owned(), value))
                        .collect();
                }
                stack.extend(members.values_mut());
            }
            _ => {}
        }
    }
}

/// The one writer of a connection: whole lines, in order. A line is queued
/// whole, then flushed; a flush cancelled halfway leaves the rest queued,
/// written by the next flush, so lines never interleave.
struct LineWriter<W> {
    write: W,
    /// Queued bytes not yet written: whole lines, the first maybe in part.
    pending: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> LineWriter<W> {
    fn queue(&mut self, line: &[u8]) {
        self.pending.extend_from_slice(line);
        self.pending.push(b'\n');
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        while !self.pending.is_empty() {
            // `write` is cancel-safe: if cancelled, it wrote nothing.
            let written = self.write.write(&self.pending).await?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.pending.drain(..written);
        }
        self.write.flush().await
    }
}
