//! A raw HTTP/1.1 client for an MCP server on a socket: one request a
//! connection (`Connection: close`), headers written as given (bytes, so a
//! test can send what no client library would), and the whole answer read
//! back: status, headers with lowercase names, the body (de-chunked).
//!
//! [`send`] and [`send_bytes`] for a test on a tokio runtime, [`blocking`]
//! for a test that drives a server process from plain threads.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// An HTTP answer: status, headers (lowercase names), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    /// The value of the header `name` (lowercase), if the answer has one.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body: the body itself, or the last
    /// `data:` line of an event stream that holds one.
    pub fn message(&self) -> Value {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return value;
        }
        self.body
            .lines()
            .rev()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|value| value.get("jsonrpc").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC message in {self:?}"))
    }

    /// The answer in `raw` bytes, as read off the socket: a status line,
    /// headers, and a body (de-chunked when it came in chunks).
    pub fn parse(raw: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(raw).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|code| code.parse().ok())
            .expect("a status line");
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        };
        Answer {
            status,
            headers,
            body,
        }
    }
}

/// The body of a chunked answer.
pub fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

/// `Bearer token`, for an `Authorization` header.
pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The head of a request `method path` to `addr` (`Connection: close`,
/// `Accept` of JSON and event streams, `Content-Type: application/json`),
/// with `Host` and `Content-Length` unless `headers` has them, then
/// `headers` as given.
pub fn head(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body_len: usize,
) -> Vec<u8> {
    let has = |wanted: &str| {
        headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case(wanted))
    };
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
    );
    if !has("host") {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    if !has("content-length") {
        head.push_str(&format!("Content-Length: {body_len}\r\n"));
    }
    let mut head = head.into_bytes();
    for (name, value) in headers {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

fn as_bytes<'a>(headers: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a [u8])> {
    headers
        .iter()
        .map(|(name, value)| (*name, value.as_bytes()))
        .collect()
}

/// Sends one request `method /mcp` with `headers` (see [`head`]) and reads
/// the whole answer, which must come within 20 s.
pub async fn send(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    send_within(
        addr,
        method,
        &as_bytes(headers),
        body,
        Duration::from_secs(20),
    )
    .await
}

/// [`send`] with headers of any bytes, and 30 s for the answer.
pub async fn send_bytes(
    addr: SocketAddr,
    method: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> Answer {
    send_within(addr, method, headers, body, Duration::from_secs(30)).await
}

async fn send_within(
    addr: SocketAddr,
    method: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
    limit: Duration,
) -> Answer {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(&head(addr, method, "/mcp", headers, body.len()))
        .await
        .unwrap();
    // The server may answer before reading the body (and close): a failed
    // write is no failure of the test, the answer is.
    let _ = stream.write_all(body).await;
    read_answer_within(stream, limit).await
}

/// Reads a whole answer off `stream` (to its end), which must come within
/// 20 s.
pub async fn read_answer(stream: impl tokio::io::AsyncRead + Unpin) -> Answer {
    read_answer_within(stream, Duration::from_secs(20)).await
}

async fn read_answer_within(
    mut stream: impl tokio::io::AsyncRead + Unpin,
    limit: Duration,
) -> Answer {
    let mut raw = Vec::new();
    let read = tokio::time::timeout(limit, stream.read_to_end(&mut raw)).await;
    assert!(read.is_ok(), "the server answers within {limit:?}");
    Answer::parse(&raw)
}

/// The same requests from a plain thread, for a test that drives a server
/// process.
pub mod blocking {
    use std::io::{Read as _, Write as _};
    use std::net::{SocketAddr, TcpStream};
    use std::time::Duration;

    use super::{Answer, as_bytes, head};

    /// Sends one `POST /mcp` with `headers` (see [`head`]) and reads the
    /// whole answer (at most 30 s).
    pub fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> Answer {
        send(addr, "POST", "/mcp", headers, body)
    }

    /// Sends one request `method path` as [`post`] does, and reads the
    /// answer.
    pub fn send(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream
            .write_all(&head(addr, method, path, &as_bytes(headers), body.len()))
            .unwrap();
        // The server may answer before reading the body (and close).
        let _ = stream.write_all(body.as_bytes());
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .expect("the server answers within 30 s");
        Answer::parse(&raw)
    }
}
