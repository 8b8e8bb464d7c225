//! The inbox in a real browser (headless Chromium through its WebDriver),
//! over the store real `orders` processes share: `orders serve` shows the
//! refund an `orders replay` process asked for; a person approves, denies
//! or edits it on the page; the agent's next call (another `orders replay`
//! process, with the approval's id) runs it once, and a second use of the
//! id is refused. A hostile argument renders as text. On SQLite always, and
//! on Postgres when `TOOLCALL_POSTGRES_URL` is set.
//!
//! Without Chromium and chromedriver (`/usr/bin/chromium`,
//! `/usr/bin/chromedriver`, or `TOOLCALL_CHROMIUM` and
//! `TOOLCALL_CHROMEDRIVER`), the test prints SKIPPED to standard error and
//! passes. `.ci/run` installs them and sets `TOOLCALL_REQUIRE_BROWSER`, so
//! CI runs it for real (without them there, it fails).
//!
//! With `TOOLCALL_UPDATE_SCREENSHOT=1` it writes the screenshot `docs/inbox.md` shows,
//! `docs/inbox.png`; otherwise the screenshot goes to the target directory.

#[path = "../../examples/orders/tests/support/fresh_database.rs"]
mod support;

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use toolcall::store::{PendingApproval, now_ms};
use toolcall_testkit::run::{free_port, printed_json, spawn_fed};

/// Chromium's flags for a machine with no network but the package registries.
const CHROMIUM_FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

const TOKEN: &str = "ana-browser-test-token-0123456789";

fn skipped(why: &str) {
    // Straight to stderr, past the test harness's capture: loud.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {why}; the inbox was NOT tested in a browser"
    );
}

/// Chromium and its driver, if this machine has them.
fn browser_binaries() -> Option<(PathBuf, PathBuf)> {
    let find = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(default))
    };
    let chromium = find("TOOLCALL_CHROMIUM", "/usr/bin/chromium");
    let driver = find("TOOLCALL_CHROMEDRIVER", "/usr/bin/chromedriver");
    if chromium.is_file() && driver.is_file() {
        Some((chromium, driver))
    } else if std::env::var_os("TOOLCALL_REQUIRE_BROWSER").is_some() {
        panic!(
            "TOOLCALL_REQUIRE_BROWSER is set (CI) but there is no {} or no {}",
            chromium.display(),
            driver.display()
        );
    } else {
        skipped(&format!(
            "no {} or no {} (apt-get install chromium chromium-driver)",
            chromium.display(),
            driver.display()
        ));
        None
    }
}

/// The `orders` binary, built now by the cargo that runs this test (a
/// no-op when it is up to date), beside this test's own directory.
fn orders_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("TOOLCALL_ORDERS_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap().to_owned();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "-q", "-p", "orders", "--bin", "orders"]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo builds orders");
    assert!(status.success(), "cargo build -p orders failed");
    profile_dir.join("orders")
}

/// A child process, killed when the test is done with it.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `orders` over one store, with a fresh conversation.
struct Orders {
    binary: PathBuf,
    store: String,
    session: String,
    audit: PathBuf,
}

impl Orders {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .args(["--store", &self.store, "--session-id", &self.session])
            .arg("--audit")
            .arg(&self.audit)
            .args(["--approvals", "inbox", "--max-steps", "1000"]);
        command
    }

    /// Runs `orders replay` on these lines: the answers, one a line.
    fn replay(&self, lines: &[Value], extra: &[&str]) -> Vec<Value> {
        let mut args = vec!["replay"];
        args.extend_from_slice(extra);
        let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
        let child = spawn_fed(&mut self.command(&args), &input);
        printed_json(child.wait_with_output().unwrap())
    }

    /// An agent asks for a refund: the question id it is answered with.
    fn ask(&self, amount_cents: i64) -> String {
        let answers = self.replay(&[refund(amount_cents, None)], &[]);
        assert_eq!(answers[0]["code"], "CONFIRMATION_REQUIRED", "{answers:?}");
        answers[0]["question_id"].as_str().unwrap().to_owned()
    }

    /// `orders serve` on a free port: its address, and the process.
    fn serve(&self, token_file: &Path) -> (String, Running) {
        let mut child = self
            .command(&["serve", "--listen", "127.0.0.1:0"])
            .arg("--token-file")
            .arg(token_file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The address is a notice, on standard error, after whatever the
        // process logged first; the rest is drained so the pipe never fills.
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines
            .by_ref()
            .map_while(Result::ok)
            .find(|line| line.contains("http://"))
            .unwrap_or_default();
        std::thread::spawn(move || lines.for_each(drop));
        // "orders inbox: http://127.0.0.1:PORT/?token=TOKEN, ..."
        let addr = first
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_owned();
        (addr, Running(child))
    }
}

fn refund(amount_cents: i64, approval: Option<&str>) -> Value {
    let mut line = json!({
        "tool": "refund_order",
        "arguments": {"order_id": "ORD-1001", "amount_cents": amount_cents, "currency": "BRL", "reason": "damaged"},
    });
    if let Some(id) = approval {
        line["approval"] = json!(id);
    }
    line
}

async fn browser(chromium: &Path, driver: &Path, profile: &Path) -> (Client, Running) {
    let port = free_port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let driver = Running(child);
    let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| (*f).to_owned()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args.push("--window-size=1280,900".into());
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({"binary": chromium, "args": args}),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let connected = ClientBuilder::new(connector.clone())
            .capabilities(capabilities.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await;
        match connected {
            Ok(client) => return (client, driver),
            Err(error) if Instant::now() < deadline => {
                let _ = error;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("chromedriver did not start: {error}"),
        }
    }
}

/// Waits until `css` matches (the page may still be loading).
async fn find(client: &Client, css: &str) -> fantoccini::elements::Element {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match client.find(Locator::Css(css)).await {
            Ok(element) => return element,
            Err(error) if Instant::now() > deadline => {
                let url = client.current_url().await.map(|u| u.to_string());
                let source = client.source().await.unwrap_or_default();
                let end = source.len().min(3000);
                panic!("no {css} at {url:?}: {error}\n{}", &source[..end]);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn absent(client: &Client, css: &str) -> bool {
    client.find_all(Locator::Css(css)).await.unwrap().is_empty()
}

/// Writes `note` on the card of `id`, presses its `button` (`approve`,
/// `deny`), and answers the notice the page then shows.
async fn decide(client: &Client, id: &str, note: &str, button: &str) -> String {
    let form = find(client, &card(id)).await;
    let field = form.find(Locator::Css("input[name=note]")).await.unwrap();
    field.send_keys(note).await.unwrap();
    let css = format!("button[value={button}]");
    form.find(Locator::Css(&css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    shown_notice(client).await
}

/// On the edit page, approves the call with its amount set to `cents`.
async fn approve_amount(client: &Client, cents: &str) {
    let amount = find(client, "textarea#arg-amount_cents").await;
    amount.clear().await.unwrap();
    amount.send_keys(cents).await.unwrap();
    let approve = find(client, "form.edit button.approve").await;
    approve.click().await.unwrap();
}

/// Clicks what `css` finds, once it is there.
async fn click(client: &Client, css: &str) {
    find(client, css).await.click().await.unwrap();
}

/// The notice the page shows after a decision.
async fn shown_notice(client: &Client) -> String {
    let notice = find(client, "p.notice[role=status]").await;
    notice.text().await.unwrap()
}

fn card(id: &str) -> String {
    format!("article[data-id=\"{id}\"]")
}

/// The whole story on one store: approve, deny, edit, wait, hostile text.
async fn story(orders: &Orders, client: &Client, dir: &Path, screenshot: Option<&Path>) {
    let token_file = dir.join("tokens");
    std::fs::write(&token_file, format!("# the team\nana {TOKEN}\n")).unwrap();
    let (addr, _serve) = orders.serve(&token_file);
    let root = format!("http://{addr}/");

    // Signing in: the token leaves the address bar.
    client.goto(&format!("{root}?token={TOKEN}")).await.unwrap();
    find(client, "header.top .who").await;
    assert_eq!(client.current_url().await.unwrap().as_str(), root);
    let who = find(client, "header.top .who b")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(who, "ana");

    // ---- approve: asked by one process, decided here, run once by another.
    let approved = orders.ask(2590);
    client.goto(&root).await.unwrap();
    let shown = find(client, &card(&approved)).await.text().await.unwrap();
    for expected in [
        "refund_order",
        "high risk",
        "2590",
        "Refund amount in minor units",
        "ORD-1001",
        &orders.session,
    ] {
        assert!(shown.contains(expected), "{expected} not in {shown}");
    }
    let denied = orders.ask(1000);
    let edited = orders.ask(2000);
    if let Some(path) = screenshot {
        client.goto(&root).await.unwrap();
        find(client, &card(&edited)).await;
        let png = client.screenshot().await.unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
    let notice = decide(client, &approved, "receipt checked", "approve").await;
    assert!(notice.starts_with("Approved"), "{notice}");
    assert!(
        absent(client, &card(&approved)).await,
        "decided: out of the inbox"
    );

    let ran = orders.replay(&[refund(2590, Some(&approved))], &[]);
    assert_eq!(ran[0]["ok"], true, "{ran:?}");
    assert_ne!(ran[0]["replayed"], true, "it ran: {ran:?}");
    // The id is used up: another call with it is refused, and the same
    // call again is the stored answer, not a second refund.
    let reused = orders.replay(
        &[refund(100, Some(&approved)), refund(2590, Some(&approved))],
        &[],
    );
    assert_eq!(reused[0]["code"], "CONFIRMATION_INVALID", "{reused:?}");
    assert_eq!(reused[1]["ok"], true);
    assert_eq!(reused[1]["replayed"], true, "not run twice: {reused:?}");

    // ---- deny, with a note the model is told.
    client.goto(&root).await.unwrap();
    let notice = decide(client, &denied, "no receipt yet", "deny").await;
    assert!(notice.starts_with("Denied"), "{notice}");
    let answers = orders.replay(
        &[refund(1000, Some(&denied)), refund(1000, Some(&denied))],
        &[],
    );
    assert_eq!(answers[0]["code"], "CONFIRMATION_DENIED", "{answers:?}");
    assert!(
        answers[0]["message"]
            .as_str()
            .unwrap()
            .contains("no receipt yet"),
        "{answers:?}"
    );
    // Used up, and final: the identical call is denied again.
    assert_eq!(answers[1]["code"], "CONFIRMATION_DENIED", "{answers:?}");

    // ---- edit: a wrong value is refused on the page, a right one runs.
    client.goto(&root).await.unwrap();
    click(client, &format!("{} a.edit", card(&edited))).await;
    approve_amount(client, "-3").await;
    let problems = find(client, ".problems").await.text().await.unwrap();
    assert!(problems.contains("amount_cents"), "{problems}");
    approve_amount(client, "1500").await;
    let notice = shown_notice(client).await;
    assert!(notice.starts_with("Approved with your edits"), "{notice}");
    let answers = orders.replay(&[refund(2000, Some(&edited))], &[]);
    assert_eq!(answers[0]["ok"], true, "{answers:?}");
    assert_eq!(answers[0]["data"]["edited_by_person"], true, "{answers:?}");
    assert_eq!(answers[0]["data"]["edited_arguments"]["amount_cents"], 1500);
    assert_eq!(answers[0]["data"]["refunded_cents"], 1500, "{answers:?}");

    // ---- an agent that waits: woken by the decision.
    let waiting = {
        let mut child = orders
            .command(&["replay", "--wait-approval", "60"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        writeln!(child.stdin.take().unwrap(), "{}", refund(700, None)).unwrap();
        child
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let waited_card = loop {
        client.goto(&root).await.unwrap();
        find(client, "header.top").await;
        let cards = client
            .find_all(Locator::Css("article.approval"))
            .await
            .unwrap();
        let mut found = None;
        for card in cards {
            if card.text().await.unwrap().contains("700") {
                found = card.attr("data-id").await.unwrap();
            }
        }
        if let Some(id) = found {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "the waiting agent's call never showed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    find(
        client,
        &format!("{} button[value=approve]", card(&waited_card)),
    )
    .await
    .click()
    .await
    .unwrap();
    find(client, "p.notice[role=status]").await;
    let decided = Instant::now();
    let output = waiting.wait_with_output().unwrap();
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(decided.elapsed() < Duration::from_secs(10));

    // ---- the history: who decided, and what came of it.
    client.goto(&format!("{root}history")).await.unwrap();
    let row = |id: &str| format!("tr[data-id=\"{id}\"]");
    let approved_row = find(client, &row(&approved)).await.text().await.unwrap();
    assert!(approved_row.contains("ran once"), "{approved_row}");
    assert!(approved_row.contains("ana") && approved_row.contains("receipt checked"));
    let denied_row = find(client, &row(&denied)).await.text().await.unwrap();
    assert!(denied_row.contains("denied"), "{denied_row}");
    let edited_row = find(client, &row(&edited)).await.text().await.unwrap();
    assert!(edited_row.contains("approved with edits") && edited_row.contains("1500"));
    if screenshot.is_some() {
        // The other pages, for a look, in the target directory.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/inbox");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("history.png"), client.screenshot().await.unwrap()).unwrap();
        client.goto(&format!("{root}metrics")).await.unwrap();
        find(client, "section.chart svg").await;
        std::fs::write(dir.join("metrics.png"), client.screenshot().await.unwrap()).unwrap();
    }
}

/// A hostile argument, session and note render as text: no script runs.
async fn hostile(
    orders: &Orders,
    store: &impl toolcall::store::Store,
    client: &Client,
    dir: &Path,
) {
    let token_file = dir.join("tokens");
    let (addr, _serve) = orders.serve(&token_file);
    let root = format!("http://{addr}/");
    let script = "<script>alert(1)</script>";
    let id = format!("hostile-{}", now_ms());
    store
        .put_approval(&PendingApproval {
            session: "<img src=x onerror=alert(2)>".into(),
            caller: "default".into(),
            tool: "refund_order".into(),
            arguments: json!({"order_id": script, "amount_cents": 1, "currency": "BRL", "reason": "damaged"}),
            expires_ms: now_ms() + 600_000,
            ..toolcall_testkit::store::asked(&id)
        })
        .await
        .unwrap();
    client.goto(&format!("{root}?token={TOKEN}")).await.unwrap();
    let shown = find(client, &card(&id)).await.text().await.unwrap();
    assert!(shown.contains(script), "shown as text: {shown}");
    assert!(shown.contains("<img src=x onerror=alert(2)>"));
    assert!(
        client.get_alert_text().await.is_err(),
        "no alert: nothing ran"
    );
    let scripts = client
        .execute(
            "return document.querySelectorAll('main script, main img').length",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(scripts, json!(0));
    // Denied, so that it does not wait in the inbox.
    click(client, &format!("{} button[value=deny]", card(&id))).await;
    find(client, "p.notice[role=status]").await;
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "toolcall-inbox-browser-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every story, on SQLite and (when it is set) Postgres.
async fn stories(client: Client, binary: PathBuf) {
    let dir = fresh_dir("sqlite");
    let db = dir.join("store.db");
    let orders = Orders {
        binary: binary.clone(),
        store: format!("sqlite:{}", db.display()),
        session: "support-chat-42".into(),
        audit: dir.join("audit.jsonl"),
    };
    let screenshot = if std::env::var_os("TOOLCALL_UPDATE_SCREENSHOT").is_some() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/inbox.png")
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/inbox/inbox.png")
    };
    story(&orders, &client, &dir, Some(&screenshot)).await;
    let store = toolcall_sqlite::SqliteStore::open(&db).unwrap();
    hostile(&orders, &store, &client, &dir).await;

    match std::env::var("TOOLCALL_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => {
            let dir = fresh_dir("postgres");
            // A database of the run's own: `orders --store postgres://`
            // keeps its shop's refunds there too.
            let database = support::FreshDatabase::create(&url, "browser");
            let url = database.url.clone();
            let orders = Orders {
                binary,
                store: url.clone(),
                session: format!("browser-{}-{}", std::process::id(), now_ms()),
                audit: dir.join("audit.jsonl"),
            };
            story(&orders, &client, &dir, None).await;
            let store = toolcall_postgres::PostgresStore::connect(&url)
                .await
                .unwrap();
            hostile(&orders, &store, &client, &dir).await;
        }
        _ => skipped("TOOLCALL_POSTGRES_URL is not set: the browser story ran on SQLite only"),
    }
}

#[test]
fn a_person_decides_in_the_browser_and_the_agent_runs_it_once() {
    let Some((chromium, driver)) = browser_binaries() else {
        return;
    };
    let binary = orders_binary();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let profile = fresh_dir("profile");
        let (client, driver) = browser(&chromium, &driver, &profile).await;
        // On a task of its own, so that a failed assertion still ends the
        // browser's session (and the browser) before the test fails.
        let outcome = tokio::spawn(stories(client.clone(), binary)).await;
        let _ = client.close().await;
        drop(driver);
        for name in ["sqlite", "postgres", "profile"] {
            let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!(
                "toolcall-inbox-browser-{}-{name}",
                std::process::id()
            )));
        }
        if let Err(failed) = outcome {
            std::panic::resume_unwind(failed.into_panic());
        }
    });
}
