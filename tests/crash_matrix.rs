//! The crash matrix: a real process (`crashy`, bin/crashy.rs) is killed
//! with SIGKILL at each point of a side-effecting call, on SQLite and on
//! Postgres, and another process then makes the same call. For each kind
//! of backend (one that honours the idempotency key, one that can be asked,
//! one that can do neither, and one that can be asked and, on Postgres,
//! writes in the call's transaction) the invariants hold:
//!
//! * the backend applied the call at most once, and exactly once unless a
//!   person has to decide (and then exactly once after they did);
//! * no answer after an applied call says refused, asks for the approval
//!   afresh, or says ok without the outcome being known;
//! * every unknown outcome the backend cannot settle is an `IN_DOUBT`
//!   answer in the audit log and one question in the inbox;
//! * a call killed while it waits for a person is asked about once.
//!
//! Crash points are named (the pipeline's `toolcall_core::crash` points and the
//! ledger's own); the killing is real, the waiting bounded, and nothing
//! sleeps: the next process waits for the dead one's claim through the
//! store, as any replica would.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;
use toolcall_testkit::run;

const CRASHY: &str = env!("CARGO_BIN_EXE_crashy");

/// A store shared by the processes of one test.
struct Shared {
    store: String,
    schema: Option<String>,
    dir: PathBuf,
}

impl Shared {
    fn sqlite(name: &str) -> Shared {
        let dir = std::env::temp_dir().join(format!(
            "toolcall-crash-{name}-{}-{}",
            std::process::id(),
            toolcall::store::now_ms()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Shared {
            store: format!("sqlite:{}", dir.join("shared.db").display()),
            schema: None,
            dir,
        }
    }

    fn postgres(name: &str) -> Option<Shared> {
        let url = run::postgres_url("the crash matrix")?;
        let mut shared = Shared::sqlite(name);
        shared.store = url;
        shared.schema = Some(format!(
            "toolcall_crash_{name}_{}_{}",
            std::process::id(),
            toolcall::store::now_ms()
        ));
        Some(shared)
    }

    fn command(&self, subcommand: &str) -> Command {
        let mut command = Command::new(CRASHY);
        command.arg(subcommand).arg("--store").arg(&self.store);
        if let Some(schema) = &self.schema {
            command.arg("--schema").arg(schema);
        }
        command.env_remove("CRASHY_CRASH_AT");
        command
    }

    /// Runs `crashy` to the end; its one line of output.
    fn run(&self, subcommand: &str, args: &[&str]) -> String {
        let output = self.command(subcommand).args(args).output().unwrap();
        assert!(
            output.status.success(),
            "crashy {subcommand} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// A call, to the end: its answer.
    fn call(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.run("call", args)).unwrap()
    }

    /// A call killed (SIGKILL) once it reached `point`.
    fn call_killed_at(&self, point: &str, args: &[&str]) {
        let mut child = self
            .command("call")
            .args(args)
            .env("CRASHY_CRASH_AT", point)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let reached = run::lines(child.stderr.take().unwrap());
        let wanted = format!("crash point: {point}");
        let mut seen = Vec::new();
        loop {
            match reached.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line == wanted => break,
                Ok(line) => seen.push(line),
                Err(_) => {
                    let _ = child.kill();
                    panic!("crashy never reached {point}: {seen:?}");
                }
            }
        }
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "killed, not finished: {status:?}");
    }

    fn applied(&self, tool: &str, text: &str) -> i64 {
        self.run("applied", &["--tool", tool, "--text", text])
            .parse()
            .unwrap()
    }

    fn pending(&self, session: &str) -> Value {
        serde_json::from_str(&self.run("pending", &["--session", session])).unwrap()
    }

    fn decide(&self, id: &str, approved: bool) {
        let outcome = self.run(
            "decide",
            &[
                "--id",
                id,
                "--approved",
                if approved { "true" } else { "false" },
            ],
        );
        assert_eq!(outcome, "Decided");
    }

    fn audit(&self, file: &Path) -> Vec<Value> {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where a call is killed, and whether the backend had applied it then.
const POINTS: [(&str, bool); 5] = [
    ("after_claim", false),
    ("before_commit", false),
    ("after_commit", true),
    ("retry_backoff", true),
    ("before_complete", true),
];

/// The arguments of a call of `tool` with `text` in `session`, then `extra`.
fn call_args<'a>(
    session: &'a str,
    tool: &'a str,
    text: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["--session", session, "--tool", tool, "--text", text];
    args.extend_from_slice(extra);
    args
}

fn code(answer: &Value) -> &str {
    answer["code"].as_str().unwrap_or("OK")
}

/// One cell of the matrix: `tool` killed at `point`, then called again.
fn cell(shared: &Shared, tool: &str, point: &str, applied_at_kill: bool) {
    let session = format!("{tool}-{point}");
    let text = format!("{tool} at {point}");
    let audit = shared.dir.join(format!("{session}.jsonl"));
    let audit = audit.to_str().unwrap();
    let base = call_args(
        &session,
        tool,
        &text,
        &["--lease-ms", "300", "--audit", audit],
    );
    let call = |extra: &[&'static str]| {
        let mut args = base.clone();
        args.extend_from_slice(extra);
        args
    };
    let mut first = call(&["--confirmed"]);
    if point == "retry_backoff" {
        first.extend_from_slice(&["--lose", "--max-retries", "1"]);
    }
    shared.call_killed_at(point, &first);
    let context = format!("{tool} killed at {point} ({})", shared.store);
    let applied = || shared.applied(tool, &text);
    let at_kill = i64::from(applied_at_kill);
    assert_eq!(applied(), at_kill, "{context}: the ledger at the kill");

    // The model's retry, in another process, unconfirmed: the call it
    // makes is the same one.
    let retry = shared.call(&call(&[]));
    assert_ne!(
        code(&retry),
        "CONFIRMATION_REQUIRED",
        "{context}: asked afresh: {retry}"
    );
    match tool {
        "keyed" | "asked" | "lent" => {
            assert_eq!(retry["ok"], true, "{context}: {retry}");
            assert_eq!(applied(), 1, "{context}: exactly once");
            if tool != "keyed" && applied_at_kill {
                assert_eq!(retry["data"]["reconciled"], true, "{context}: {retry}");
            }
        }
        _ => {
            // Neither: never run again blindly; a person answers it.
            assert_eq!(code(&retry), "IN_DOUBT", "{context}: {retry}");
            assert_eq!(retry["data"]["in_doubt"], true);
            let id = retry["question_id"].as_str().unwrap().to_owned();
            assert_eq!(applied(), at_kill, "{context}: not run again");
            let again = shared.call(&call(&[]));
            assert_eq!(again["question_id"], id.as_str(), "{context}: one question");
            let pending = shared.pending(&session);
            assert_eq!(pending["total"], 1, "{context}: {pending}");
            assert_eq!(pending["items"][0]["reason"], "in_doubt");
            let records = shared.audit(Path::new(audit));
            assert!(
                records.iter().filter(|r| r["code"] == "IN_DOUBT").count() >= 2
                    && records
                        .iter()
                        .filter(|r| r["code"] == "IN_DOUBT")
                        .all(|r| r["in_doubt"] == true),
                "{context}: every unknown outcome in the audit: {records:?}"
            );
            // The person checks the ledger: it happened, or it did not.
            shared.decide(&id, !applied_at_kill);
            let settled = shared.call(&call(&[]));
            assert_eq!(settled["ok"], true, "{context}: {settled}");
            assert_eq!(
                settled["data"]["happened"] == true,
                applied_at_kill,
                "{context}: {settled}"
            );
            assert_eq!(applied(), 1, "{context}: exactly once, after the person");
        }
    }
    let last = shared.call(&call(&[]));
    assert!(
        last["ok"] == true && last["replayed"] == true,
        "{context}: {last}"
    );
    assert_eq!(applied(), 1, "{context}");
}

/// A call killed while it waits for a person: the next process's call is
/// the same question, and the person's answer runs it once.
fn killed_while_waiting_for_a_person(shared: &Shared) {
    let (session, text) = ("waiting", "asked for once");
    let call = |extra: &[&'static str]| {
        let mut args = call_args(session, "plain", text, &["--inbox", "--lease-ms", "300"]);
        args.extend_from_slice(extra);
        args
    };
    shared.call_killed_at("awaiting_approval", &call(&[]));
    let pending = shared.pending(session);
    assert_eq!(pending["total"], 1, "{pending}");
    let id = pending["items"][0]["id"].as_str().unwrap().to_owned();
    let asked = shared.call(&call(&[]));
    assert_eq!(asked["code"], "CONFIRMATION_REQUIRED", "{asked}");
    assert_eq!(asked["question_id"], id.as_str(), "the same question");
    assert_eq!(shared.pending(session)["total"], 1, "no person asked twice");
    assert_eq!(shared.applied("plain", text), 0);
    shared.decide(&id, true);
    let ran = shared.call(&call(&[]));
    assert_eq!(ran["ok"], true, "{ran}");
    let again = shared.call(&call(&[]));
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(shared.applied("plain", text), 1);
}

/// The token the on-call person signs in to the inbox with.
const TOKEN: &str = "on-call-0123456789abcdef";

/// An inbox process over the shared store.
struct Served {
    child: Child,
    addr: String,
    stderr: mpsc::Receiver<String>,
}

impl Served {
    fn start(shared: &Shared, crash_at: Option<&str>) -> Served {
        let mut command = shared.command("serve");
        command
            .args(["--token", TOKEN])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(point) = crash_at {
            command.env("CRASHY_CRASH_AT", point);
        }
        let mut child = command.spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("not an address: {line:?}"))
            .to_owned();
        let received = run::lines(child.stderr.take().unwrap());
        Served {
            child,
            addr,
            stderr: received,
        }
    }

    /// The person's decision, posted as the inbox's form is; the answer's
    /// status, or `None` when the inbox never answered.
    fn decide(&self, id: &str, action: &str) -> Option<u16> {
        post_decision(&self.addr, id, action)
    }

    fn wait_for(&self, point: &str) {
        let wanted = format!("crash point: {point}");
        loop {
            match self.stderr.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line == wanted => return,
                Ok(_) => {}
                Err(_) => panic!("the inbox never reached {point}"),
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn post_decision(addr: &str, id: &str, action: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    let body = format!("action={action}");
    let request = format!(
        "POST /approvals/{id}/decide HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Authorization: Bearer {TOKEN}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    reply.split(' ').nth(1)?.parse().ok()
}

/// The inbox process is killed while it records a person's decision: before
/// the store has it, the question is still open and asked once; after, the
/// decision stands and the call runs once.
fn killed_while_the_inbox_decides(shared: &Shared, point: &str) {
    let session = format!("inbox-{point}");
    let text = format!("decided at {point}");
    let args = call_args(&session, "plain", &text, &["--inbox", "--lease-ms", "300"]);
    let asked = shared.call(&args);
    assert_eq!(asked["code"], "CONFIRMATION_REQUIRED", "{asked}");
    let id = asked["question_id"].as_str().unwrap().to_owned();

    let dying = Served::start(shared, Some(point));
    let posting = {
        let (addr, id) = (dying.addr.clone(), id.clone());
        std::thread::spawn(move || post_decision(&addr, &id, "approve"))
    };
    dying.wait_for(point);
    drop(dying); // SIGKILL
    assert_eq!(
        posting.join().unwrap(),
        None,
        "the inbox died before answering"
    );

    let context = format!("the inbox killed at {point} ({})", shared.store);
    let recorded = point == "after_decision";
    let pending = shared.pending(&session);
    assert_eq!(
        pending["total"],
        u64::from(!recorded),
        "{context}: {pending}"
    );
    if !recorded {
        // Nothing was decided: the same question, asked once.
        let again = shared.call(&args);
        assert_eq!(again["code"], "CONFIRMATION_REQUIRED", "{context}: {again}");
        assert_eq!(again["question_id"], id.as_str(), "{context}");
        assert_eq!(shared.pending(&session)["total"], 1, "{context}");
        let inbox = Served::start(shared, None);
        assert_eq!(inbox.decide(&id, "approve"), Some(303), "{context}");
    }
    let ran = shared.call(&args);
    assert_eq!(ran["ok"], true, "{context}: {ran}");
    assert_eq!(ran["replayed"], Value::Null, "{context}: ran now: {ran}");
    // A second click is the same decision (answered alike), and runs nothing.
    let inbox = Served::start(shared, None);
    let _ = inbox.decide(&id, "approve");
    assert_eq!(shared.pending(&session)["total"], 0, "{context}");
    let again = shared.call(&args);
    assert_eq!(again["replayed"], true, "{context}: {again}");
    assert_eq!(shared.applied("plain", &text), 1, "{context}: exactly once");
}

/// A lost answer with retries left: only a backend that honours the key is
/// tried again (and killed in its backoff, `retry_backoff`, in the matrix);
/// one that can be asked is asked, and one that can be neither is in doubt
/// at once. Never a second attempt on a guess.
fn lost_answers_are_never_retried_on_a_guess(shared: &Shared) {
    for tool in ["asked", "plain"] {
        let session = format!("{tool}-lost");
        let text = format!("{tool} lost");
        let extra = ["--confirmed", "--lose", "--max-retries", "1"];
        let answer = shared.call(&call_args(&session, tool, &text, &extra));
        assert_eq!(shared.applied(tool, &text), 1, "{tool}: once: {answer}");
        match tool {
            "asked" => assert_eq!(answer["data"]["reconciled"], true, "{answer}"),
            _ => assert_eq!(code(&answer), "IN_DOUBT", "{answer}"),
        }
    }
}

fn matrix(shared: &Shared) {
    for tool in ["keyed", "asked", "plain", "lent"] {
        for (point, applied) in POINTS {
            // On Postgres `lent` writes in the call's transaction: nothing
            // of it is kept before the pipeline's commit, after every point.
            let applied = applied && !(tool == "lent" && shared.schema.is_some());
            // Only a backend that honours the key is retried after a lost
            // answer, and so waits in a backoff to be killed in.
            if point == "retry_backoff" && tool != "keyed" {
                continue;
            }
            cell(shared, tool, point, applied);
        }
        // On Postgres a confirmed side effect whose outcome can be found
        // out claims its key with its start: killed before any stage after
        // it, it is in doubt as if killed after its claim (`plain`, which
        // only a person can settle, still claims at stage 8).
        if shared.schema.is_some() && tool != "plain" {
            cell(shared, tool, "after_start", false);
        }
    }
    lost_answers_are_never_retried_on_a_guess(shared);
    killed_while_waiting_for_a_person(shared);
    killed_while_the_inbox_decides(shared, "before_decision");
    killed_while_the_inbox_decides(shared, "after_decision");
}

#[test]
fn the_crash_matrix_holds_on_sqlite() {
    matrix(&Shared::sqlite("sqlite"));
}

#[test]
fn the_crash_matrix_holds_on_postgres() {
    let Some(shared) = Shared::postgres("postgres") else {
        return;
    };
    matrix(&shared);
}
