//! The runtimes, scratch folders and ports that tests outside
//! `#[tokio::test]` make for themselves.

use std::future::Future;
use std::path::PathBuf;

/// A runtime of one thread, with its clock and its I/O.
pub fn one_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `future` to its end on a runtime of one thread, made for it.
pub fn block_on<F: Future>(future: F) -> F::Output {
    one_thread().block_on(future)
}

/// A runtime of two worker threads: enough for a server and its client to
/// run at once, few enough for a machine that runs many tests.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// An empty folder of this process named after `name`, emptied first if
/// an earlier run left it behind.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A local port nobody listens on now, for a server a test starts as a
/// process of its own.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The Postgres server to test against, from `TOOLCALL_POSTGRES_URL` (CI
/// sets it); without it, `None`, and a loud line on stderr, past the test
/// harness's capture, that `untested` was not tested.
pub fn postgres_url(untested: &str) -> Option<String> {
    match std::env::var("TOOLCALL_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: TOOLCALL_POSTGRES_URL is not set; {untested} was NOT tested on Postgres"
            );
            None
        }
    }
}

/// The JSON values a process printed, one a line; it must have succeeded.
pub fn printed_json(output: std::process::Output) -> Vec<serde_json::Value> {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Starts `command` with its standard streams piped and `stdin` written
/// to it. A process that refuses its arguments exits before reading: a
/// closed pipe is its answer, not the test's failure.
pub fn spawn_fed(command: &mut std::process::Command, stdin: &str) -> std::process::Child {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    if let Err(error) = child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    child
}

/// Starts `times` tasks of `call` at the same moment; their answers, in
/// the order they were started.
pub async fn all_at_once<T, Fut>(times: usize, call: impl Fn() -> Fut) -> Vec<T>
where
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = (0..times).map(|_| tokio::spawn(call())).collect();
    let mut answers = Vec::with_capacity(times);
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// Runs `task(i)` for each `i` below `count` on a thread of its own, all
/// at once: what each answered, in order.
pub fn on_threads<T, Task>(count: usize, task: Task) -> Vec<T>
where
    Task: Fn(usize) -> T + Send + Sync + 'static,
    T: Send + 'static,
{
    let task = std::sync::Arc::new(task);
    let threads: Vec<_> = (0..count)
        .map(|i| {
            let task = std::sync::Arc::clone(&task);
            std::thread::spawn(move || task(i))
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// `name`, made unique to this process and this moment: a conversation or
/// a database no other run used.
pub fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

/// The lines of a child process's `output` as they come, read on a thread
/// of its own so that a test can wait for one with a timeout
/// (`recv_timeout`); the thread ends with the output, at a line that is not
/// UTF-8, or when the receiver is dropped.
pub fn lines(output: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead as _;
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(output)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    received
}
