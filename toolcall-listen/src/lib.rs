//! The accept loop toolcall's HTTP servers share (the MCP server's
//! `toolcall_mcp::http::serve`, the inbox's `toolcall_inbox::serve`):
//! every connection with `TCP_NODELAY`, its request head read within a
//! bound, and no more connections open at once than allowed.
//!
//! ```no_run
//! # async fn run(router: axum::Router) -> std::io::Result<()> {
//! use std::time::Duration;
//! use toolcall_listen::{Limits, serve};
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let limits = Limits::new().max_connections(256).header_timeout(Duration::from_secs(5));
//! serve(listener, router, limits).await;
//! # Ok(())
//! # }
//! ```

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower_service::Service as _;

/// How [`serve`] holds connections.
///
/// By default: a request's head (its line and headers) read within 10 s of
/// the connection's first byte, or of the end of the request before it on a
/// kept-alive connection; at most 1,024 connections open at once.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Limits {
    /// How long a request's head may take to arrive; a connection slower
    /// than this is closed (before anything of it is read further, so
    /// before authentication).
    pub header_timeout: Duration,
    /// How many connections may be open at once. One over it is answered
    /// `503 Service Unavailable` with `Retry-After`, and closed.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            max_connections: 1024,
        }
    }
}

impl Limits {
    /// The default limits (see [`Limits`]).
    pub fn new() -> Self {
        Limits::default()
    }

    /// Sets [`Limits::header_timeout`] (at least 1 ms).
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets [`Limits::max_connections`] (at least 1).
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }
}

/// What a connection over the bound is answered, before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
Content-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\n\
Content-Length: 63\r\n\r\n\
Service Unavailable: too many connections are open; retry soon\n";

/// Accepts connections on `listener` until the process ends, serving each
/// with `router` over HTTP/1.1, kept alive: the peer's address in its
/// requests' extensions (`ConnectInfo<SocketAddr>`, as axum's
/// `into_make_service_with_connect_info` gives it), `TCP_NODELAY` set (a
/// kept-alive client's small answers are not held back for its delayed
/// acknowledgement), a request's head read within
/// [`Limits::header_timeout`], at most [`Limits::max_connections`] open (one
/// more is answered `503` with `Retry-After`, and closed). A failed accept
/// (out of descriptors) is logged and retried.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits) {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, or a connection reset before it was
                // accepted: the listener itself is fine; wait a little.
                tracing::warn!(%error, "could not accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Err(error) = nodelay(&stream) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            tracing::warn!(
                limit = limits.max_connections,
                "refused a connection over the bound"
            );
            tokio::spawn(busy(stream));
            continue;
        };
        let router = router.clone();
        let http = http.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let mut router = router.clone();
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(ConnectInfo(peer));
                async move {
                    router
                        .call(request)
                        .await
                        .map_err(|never: Infallible| never)
                }
            });
            if let Err(error) = http.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(%error, %peer, "a connection ended with an error");
            }
            drop(permit);
        });
    }
}

/// Sends small answers at once: without it, a kept-alive client waits for
/// its own delayed acknowledgement (some 40 ms) on each response.
fn nodelay(stream: &TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)
}

/// Answers `503` to a connection over the bound and closes it.
async fn busy(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(BUSY).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_declares_its_own_length() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let declared: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(declared, body.len());
    }
}
