//! `GET /api/metrics` (the `metrics` feature) over a real socket: refused
//! without a sign-in, and with one the Prometheus text whose counters are
//! the audit log's lines, counted once across scrapes, and whose gauge of
//! questions is the store's.
#![cfg(feature = "metrics")]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use toolcall::{Call, Code, Decision, Dispatcher, tools};
use toolcall_inbox::{Access, Options, Parts};
use toolcall_sqlite::SqliteStore;
use toolcall_testkit::inbox::{self as kit, ANA, Reply, pay};

/// One audit line of a call of `pay` with `code`.
fn line(code: &str, extra: Value) -> String {
    let mut record = json!({
        "session_id": "s", "caller": "default", "step": 1, "tool": "pay",
        "arguments": "{}", "confirmed": false, "ok": code == "OK", "code": code,
        "replayed": false, "duration_ms": 30.0, "at_ms": 1_796_043_600_000u64,
    });
    for (k, v) in extra.as_object().unwrap() {
        record[k] = v.clone();
    }
    format!("{record}\n")
}

fn append(path: &PathBuf, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// `GET path` with at most one header of ours, over a connection of its own.
async fn get(addr: &str, path: &str, header: Option<(&str, &str)>) -> Reply {
    kit::http(addr, "GET", path, header.as_slice(), None).await
}

/// The samples of a Prometheus text: `name{label="value",...}` to value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').unwrap();
        // Labels in a fixed order, whatever order the encoder wrote.
        let series = match series.split_once('{') {
            Some((name, labels)) => {
                let mut labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
                labels.sort();
                format!("{name}{{{}}}", labels.join(","))
            }
            None => series.to_owned(),
        };
        out.insert(series, value.parse().unwrap());
    }
    out
}

fn value(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    *samples
        .get(series)
        .unwrap_or_else(|| panic!("no {series} in {samples:#?}"))
}

const OK: &str = r#"toolcall_calls_total{gen_ai_tool_name="pay",toolcall_code="OK"}"#;
const DENIED: &str =
    r#"toolcall_calls_total{gen_ai_tool_name="pay",toolcall_code="CONFIRMATION_DENIED"}"#;
const AWAITING: &str = "toolcall_approval_awaiting";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_the_logs_counts_and_the_stores_questions_behind_the_sign_in() {
    let dir = std::env::temp_dir().join(format!(
        "toolcall-inbox-prometheus-{}-{}",
        std::process::id(),
        toolcall::store::now_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let audit = dir.join("audit.jsonl");
    // 3 calls ok, 2 denied by a person, and a line that is no record.
    let mut log = String::new();
    for _ in 0..3 {
        log.push_str(&line("OK", json!({})));
    }
    for step in [2, 3] {
        log.push_str(&line(
            "CONFIRMATION_DENIED",
            json!({"step": step, "approved_by": "ana"}),
        ));
    }
    log.push_str("not a record\n");
    append(&audit, &log);

    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let dispatcher = Dispatcher::builder(tools![pay].unwrap(), Arc::new(()))
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    // Two questions wait for a person.
    let mut ids = Vec::new();
    for (session, amount) in [("s1", 10), ("s2", 20)] {
        let asked = dispatcher
            .execute(
                Call::new(
                    "pay",
                    &*json!({"to": "acme", "amount_cents": amount}).to_string(),
                )
                .session(session),
            )
            .await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
        ids.push((asked.question_id.unwrap(), session));
    }

    let backend = Arc::new(Parts {
        store: Arc::clone(&store),
        registry: tools![pay].unwrap(),
    });
    let access = Access::parse(&format!("ana {ANA}\n"), "x").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(toolcall_inbox::serve(
        backend,
        Options::new(access).audit(&audit),
        listener,
    ));

    // No token, a wrong one, an unknown cookie: refused, in JSON, nothing shown.
    for header in [
        None,
        Some(("Authorization", "Bearer not-the-token-0000000")),
        Some(("Cookie", "toolcall_inbox=0123456789abcdef0123456789abcdef")),
    ] {
        let refused = get(&addr, "/api/metrics", header).await;
        assert_eq!(refused.status, 401, "{header:?}: {}", refused.body);
        assert!(!refused.body.contains("toolcall_calls"), "{}", refused.body);
        assert_eq!(refused.header("content-type"), Some("application/json"));
    }

    let bearer = format!("Bearer {ANA}");
    let scrape = || {
        get(
            &addr,
            "/api/metrics",
            Some(("Authorization", bearer.as_str())),
        )
    };
    let first = scrape().await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(
        first
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")),
        "{:?}",
        first.headers
    );
    let text = &first.body;
    assert!(
        text.contains("# TYPE toolcall_calls_total counter"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE gen_ai_execute_tool_duration_seconds histogram"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE toolcall_approval_awaiting gauge"),
        "{text}"
    );
    let s = samples(text);
    assert_eq!(value(&s, OK), 3.0);
    assert_eq!(value(&s, DENIED), 2.0);
    assert_eq!(
        s.keys()
            .filter(|k| k.starts_with("toolcall_calls_total"))
            .count(),
        2,
        "the line that is no record is no call: {s:#?}"
    );
    assert_eq!(
        value(
            &s,
            r#"gen_ai_execute_tool_duration_seconds_count{gen_ai_tool_name="pay"}"#
        ),
        3.0
    );
    assert_eq!(
        value(
            &s,
            r#"gen_ai_execute_tool_duration_seconds_count{error_type="CONFIRMATION_DENIED",gen_ai_tool_name="pay"}"#
        ),
        2.0
    );
    let sum = value(
        &s,
        r#"gen_ai_execute_tool_duration_seconds_sum{gen_ai_tool_name="pay"}"#,
    );
    assert!((sum - 0.09).abs() < 1e-9, "3 × 30 ms: {sum}");
    assert_eq!(
        value(
            &s,
            r#"toolcall_approval_decisions_total{gen_ai_tool_name="pay",toolcall_approval_decision="denied"}"#
        ),
        2.0
    );
    assert_eq!(value(&s, AWAITING), 2.0);

    // The same person signed in with a cookie sees the same.
    let signed_in = get(&addr, &format!("/?token={ANA}"), None).await;
    assert_eq!(signed_in.status, 303);
    let cookie = signed_in
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let by_cookie = get(&addr, "/api/metrics", Some(("Cookie", cookie.as_str()))).await;
    assert_eq!(by_cookie.status, 200, "{}", by_cookie.body);

    // New lines, one still being written: each whole line once.
    append(
        &audit,
        &format!(
            "{}{}",
            line("OK", json!({"step": 4})),
            "{\"session_id\": \"s\""
        ),
    );
    let person = dispatcher
        .deny(Decision::new(&ids[0].0, ids[0].1).by("ana"), "no")
        .await;
    assert_eq!(person.code, Code::ConfirmationDenied);
    // (three scrapes so far, the cookie's included)
    let s = samples(&scrape().await.body);
    assert_eq!(value(&s, OK), 4.0, "each line counted once");
    assert_eq!(value(&s, DENIED), 2.0);
    assert_eq!(value(&s, AWAITING), 1.0, "one question decided");
    // The rest of the line arrives.
    let rest = line("OK", json!({"step": 5}));
    let rest = rest.trim_start_matches("{\"session_id\":\"s\"");
    assert_ne!(rest.len(), line("OK", json!({"step": 5})).len());
    append(&audit, rest);
    let s = samples(&scrape().await.body);
    assert_eq!(value(&s, OK), 5.0, "the finished line, once");
    let s = samples(&scrape().await.body);
    assert_eq!(value(&s, OK), 5.0, "nothing new, nothing counted");

    // A log replaced by a shorter one: its counts start over.
    std::fs::write(&audit, line("CONFIRMATION_DENIED", json!({}))).unwrap();
    let s = samples(&scrape().await.body);
    assert_eq!(value(&s, DENIED), 1.0, "{s:#?}");
    assert!(!s.contains_key(OK), "{s:#?}");

    std::fs::remove_dir_all(&dir).unwrap();
}
