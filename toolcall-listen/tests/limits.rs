//! The accept loop's bounds over real sockets: a head that does not come
//! in time closes its connection unanswered, a connection over the bound
//! is `503` at once, and the bound frees as connections end.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use toolcall_listen::{Limits, serve};

async fn read_all(mut stream: TcpStream) -> String {
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the server ends the connection")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_head_is_closed_and_a_connection_over_the_bound_is_503() {
    let router = axum::Router::new().route("/", axum::routing::get(|| async { "hello" }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(
        listener,
        router,
        Limits::new()
            .header_timeout(Duration::from_secs(4))
            .max_connections(1),
    ));
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let asked = Instant::now();
    let extra = read_all(TcpStream::connect(addr).await.unwrap()).await;
    assert!(extra.starts_with("HTTP/1.1 503"), "{extra:?}");
    assert!(extra.contains("Retry-After: 1"), "{extra}");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "answered at once, not after the head's timeout: {:?}",
        asked.elapsed()
    );

    let half = read_all(half).await;
    assert!(!half.contains("hello"), "{half:?}");

    let mut fresh = TcpStream::connect(addr).await.unwrap();
    fresh
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let fresh = read_all(fresh).await;
    assert!(
        fresh.starts_with("HTTP/1.1 200") && fresh.ends_with("hello"),
        "{fresh}"
    );
}
