//! The approval inbox's tests over a real socket: the tool its questions
//! are about ([`pay`]), the people's tokens, and a plain HTTP/1.1 client
//! (one request a connection) that reads the whole reply.

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use toolcall::{Rejection, tool};

/// Ana's token (an admin where the test's token file says so).
pub const ANA: &str = "ana-0123456789abcdef";
/// Bo's token.
pub const BO: &str = "bo-0123456789abcdef0";

/// Pays someone. Amount in cents.
#[tool(side_effect, high_risk)]
pub fn pay(
    /// Who gets the money.
    to: String,
    /// The amount, in cents.
    #[arg(min = 1, max = 100_000)]
    amount_cents: i64,
) -> Result<Value, Rejection> {
    Ok(json!({"paid": amount_cents, "to": to}))
}

/// A reply: its status, its headers (as sent), its body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The value of the header `name`, whatever its case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `name=value` of the cookie this reply sets.
    pub fn cookie(&self) -> String {
        let set = self.header("set-cookie").expect("a cookie");
        set.split(';').next().unwrap().to_owned()
    }

    /// The body, read as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    /// The reply in `raw`, as read off the socket.
    pub fn parse(raw: Vec<u8>) -> Reply {
        let text = String::from_utf8(raw).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let mut lines = head.lines();
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .filter_map(|line| line.split_once(": "))
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        Reply {
            status,
            headers,
            body: body.to_owned(),
        }
    }
}

/// A form's fields, URL-encoded.
pub fn encode(form: &[(&str, &str)]) -> String {
    let byte = |b: u8| {
        if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
            char::from(b).to_string()
        } else {
            format!("%{b:02X}")
        }
    };
    form.iter()
        .map(|(k, v)| {
            let k: String = k.bytes().map(byte).collect();
            let v: String = v.bytes().map(byte).collect();
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The text of a request `method path` to `host` (`Connection: close`),
/// with `headers`, and `body` if any: a form unless `headers` name another
/// `Content-Type`.
pub fn request(
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> String {
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        {
            request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    } else {
        request.push_str("\r\n");
    }
    request
}

/// Writes `request` on `stream` and reads the whole reply.
pub async fn exchange(mut stream: impl AsyncRead + AsyncWrite + Unpin, request: &str) -> Reply {
    // A server that answers before reading the whole body (413) may close
    // the connection while it is still being written: its answer is what
    // counts.
    let written = stream.write_all(request.as_bytes()).await;
    let mut raw = Vec::new();
    let read = stream.read_to_end(&mut raw).await;
    assert!(!raw.is_empty(), "no answer: {written:?} {read:?}");
    Reply::parse(raw)
}

/// One request (see [`request`]) on a connection of its own to `addr`.
pub async fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let stream = TcpStream::connect(addr).await.unwrap();
    exchange(stream, &request(method, path, addr, headers, body)).await
}

/// [`http`] to a socket address.
pub async fn http_to(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    http(&addr.to_string(), method, path, headers, body).await
}
