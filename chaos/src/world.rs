//! What the clients, the person and the fault injector share, and what they
//! leave for the checks and the figures: every operation with its answers,
//! every tool result with its request id, every decision the person sent,
//! every fault.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fleet::{CLIENT_TOKEN, Db, PERSON_TOKEN};

/// splitmix64: the run's randomness, from the seed printed for replay.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).max(1))
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The seeded orders the clients refund and note: ORD-2000 onwards.
pub const FIRST_ORDER: u64 = 2000;
pub const SEEDED_ORDERS: u64 = 400;
pub const SEEDED_TOTAL: i64 = 50_000_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Read,
    Messages,
    Refund,
    RefundTask,
    Note,
}

/// One operation of a client: the identical call made until it has a final
/// answer, on whichever replica is up.
#[derive(Clone, Debug)]
pub struct Op {
    pub id: String,
    pub kind: Kind,
    pub tool: &'static str,
    pub args: Value,
    /// `(ms since the start, what happened)`, in order.
    pub events: Vec<(u64, String)>,
    pub final_code: Option<String>,
    /// The arguments a person's edit put in its place.
    pub edited: Option<Value>,
    /// A person said it happened (`data.happened`).
    pub happened: bool,
    pub in_doubt_seen: bool,
    pub task_id: Option<String>,
}

impl Op {
    /// The arguments that were (to be) applied: the person's edit, if any.
    pub fn effective(&self) -> &Value {
        self.edited.as_ref().unwrap_or(&self.args)
    }
}

/// A tool result a client received: the audit must have its record.
#[derive(Clone, Debug)]
pub struct Answered {
    pub call_id: String,
    pub tool: String,
    pub code: String,
    pub op: String,
}

/// A decision the person sent to the inbox.
#[derive(Clone, Debug)]
pub struct Intent {
    pub id: String,
    pub tool: String,
    pub arguments: Value,
    /// approve, deny, edit, happened, not_happened
    pub decision: String,
    pub edited: Option<Value>,
    pub accepted: bool,
}

#[derive(Clone, Debug)]
pub struct Fault {
    pub kind: &'static str,
    pub target: String,
    pub start_ms: u64,
    pub end_ms: u64,
    pub detail: String,
}

#[derive(Clone, Debug)]
pub struct Violation {
    pub invariant: &'static str,
    pub what: String,
    pub ops: Vec<String>,
    pub at_ms: u64,
}

pub struct World {
    pub seed: u64,
    pub t0: Instant,
    pub db: Db,
    pub http: reqwest::Client,
    pub replicas: RwLock<Vec<Option<String>>>,
    pub inbox: RwLock<Option<String>>,
    pub stop_new: AtomicBool,
    pub give_up: AtomicBool,
    pub person_stop: AtomicBool,
    pub requests: AtomicU64,
    pub transport_errors: AtomicU64,
    pub next_request: AtomicU64,
    pub next_refund: AtomicU64,
    pub ops: Mutex<Vec<Op>>,
    pub answered: Mutex<Vec<Answered>>,
    /// `(start ms, latency ms)` of every request that got an answer.
    pub latencies: Mutex<Vec<(u64, u64)>>,
    pub intents: Mutex<HashMap<String, Intent>>,
    pub faults: Mutex<Vec<Fault>>,
    pub violations: Mutex<Vec<Violation>>,
    pub checks: AtomicU64,
    pub check_rounds: AtomicU64,
    pub codes: Mutex<HashMap<(String, String), u64>>,
}

impl World {
    pub fn new(seed: u64, db: Db, replicas: usize) -> World {
        World {
            seed,
            t0: Instant::now(),
            db,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(12))
                .pool_max_idle_per_host(0)
                .build()
                .expect("an HTTP client"),
            replicas: RwLock::new(vec![None; replicas]),
            inbox: RwLock::new(None),
            stop_new: AtomicBool::new(false),
            give_up: AtomicBool::new(false),
            person_stop: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            transport_errors: AtomicU64::new(0),
            next_request: AtomicU64::new(0),
            next_refund: AtomicU64::new(0),
            ops: Mutex::new(Vec::new()),
            answered: Mutex::new(Vec::new()),
            latencies: Mutex::new(Vec::new()),
            intents: Mutex::new(HashMap::new()),
            faults: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            checks: AtomicU64::new(0),
            check_rounds: AtomicU64::new(0),
            codes: Mutex::new(HashMap::new()),
        }
    }

    pub fn ms(&self) -> u64 {
        u64::try_from(self.t0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn violation(&self, invariant: &'static str, what: String, ops: Vec<String>) {
        let at_ms = self.ms();
        // Found again in a later round: the same violation, once.
        if self
            .violations
            .lock()
            .unwrap()
            .iter()
            .any(|v| v.invariant == invariant && v.what == what)
        {
            return;
        }
        eprintln!(
            "VIOLATION [{invariant}] seed={} t={at_ms}ms: {what}",
            self.seed
        );
        self.violations.lock().unwrap().push(Violation {
            invariant,
            what,
            ops,
            at_ms,
        });
    }

    fn pick_replica(&self, rng: &mut Rng) -> Option<(usize, String)> {
        let replicas = self.replicas.read().unwrap();
        let up: Vec<(usize, String)> = replicas
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.clone().map(|a| (i, a)))
            .collect();
        if up.is_empty() {
            return None;
        }
        let n = rng.below(up.len() as u64) as usize;
        Some(up[n].clone())
    }
}

/// The `_meta` of a stateless (2026-07-28) request in conversation `conv`.
fn meta(conv: &str, tasks: bool) -> Value {
    let capabilities = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "chaos", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "toolcall/conversation": conv,
    })
}

/// The JSON-RPC message of a body: itself, or an event stream's last one.
fn message(body: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return Some(value);
    }
    body.lines()
        .rev()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|value| value.get("jsonrpc").is_some())
}

/// One stateless MCP request; its `result`, or why there is none.
async fn mcp(
    world: &World,
    addr: &str,
    method: &str,
    name: &str,
    id: &str,
    params: Value,
) -> Result<Value, String> {
    world.requests.fetch_add(1, Ordering::Relaxed);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let answer = world
        .http
        .post(format!("http://{addr}/mcp"))
        .header("Authorization", format!("Bearer {CLIENT_TOKEN}"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .header("Mcp-Name", name)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("transport: {e}"))?;
    let status = answer.status().as_u16();
    let text = answer.text().await.map_err(|e| format!("transport: {e}"))?;
    if status != 200 {
        return Err(format!("http {status}: {}", cut(&text)));
    }
    let message = message(&text).ok_or_else(|| format!("no message: {}", cut(&text)))?;
    if let Some(error) = message.get("error") {
        return Err(format!("json-rpc error: {error}"));
    }
    message
        .get("result")
        .cloned()
        .ok_or_else(|| format!("no result: {}", cut(&text)))
}

pub fn cut(text: &str) -> String {
    text.chars().take(300).collect()
}

/// Codes after which the client makes the identical call again.
fn again(code: &str, structured: &Value) -> bool {
    structured["data"]["in_doubt"] == json!(true)
        || matches!(
            code,
            "CONFIRMATION_REQUIRED"
                | "IN_DOUBT"
                | "CALL_IN_PROGRESS"
                | "RESOURCE_BUSY"
                | "STORE_UNAVAILABLE"
                | "UPSTREAM_UNAVAILABLE"
                | "TIMEOUT"
                | "PENDING_LIMIT"
                | "RATE_LIMITED"
        )
}

/// A client: operations one after another until told to stop.
pub async fn client(world: &World, index: usize, mut rng: Rng) {
    let conv = format!("chaos-{index}");
    let mut n = 0u64;
    while !world.stop_new.load(Ordering::Relaxed) {
        n += 1;
        let op = new_op(world, index, n, &mut rng);
        let op = drive(world, op, &conv, &mut rng).await;
        world.ops.lock().unwrap().push(op);
        tokio::time::sleep(Duration::from_millis(rng.range(0, 150))).await;
    }
}

fn new_op(world: &World, client: usize, n: u64, rng: &mut Rng) -> Op {
    let roll = rng.below(100);
    let kind = match roll {
        0..30 => Kind::Read,
        30..38 => Kind::Messages,
        38..60 => Kind::Refund,
        60..70 => Kind::RefundTask,
        _ => Kind::Note,
    };
    // A few calls on the reference's orders, whose messages are untrusted.
    let reference = rng.chance(8);
    let order = if reference {
        if rng.chance(50) { 1001 } else { 1002 }
    } else {
        FIRST_ORDER + rng.below(SEEDED_ORDERS)
    };
    let order_id = format!("ORD-{order}");
    let id = format!("c{client}-op{n}");
    let (tool, args) = match kind {
        Kind::Read => ("get_order", json!({"order_id": order_id})),
        Kind::Messages => {
            let order_id = if rng.chance(50) {
                "ORD-1001"
            } else {
                "ORD-1002"
            };
            ("read_messages", json!({"order_id": order_id}))
        }
        Kind::Refund | Kind::RefundTask => {
            // Even and unique in the run: a person's edit makes it odd.
            let k = world.next_refund.fetch_add(1, Ordering::Relaxed);
            let amount = 1000 + 2 * (k % 24_000) as i64;
            let currency = if order == 1002 { "USD" } else { "BRL" };
            (
                "refund_order",
                json!({"order_id": order_id, "amount_cents": amount, "currency": currency,
                       "reason": "damaged"}),
            )
        }
        Kind::Note => (
            "add_note",
            json!({"order_id": order_id, "text": format!("chaos note {} {id}", world.seed)}),
        ),
    };
    Op {
        id,
        kind,
        tool,
        args,
        events: Vec::new(),
        final_code: None,
        edited: None,
        happened: false,
        in_doubt_seen: false,
        task_id: None,
    }
}

/// Makes the operation's call until its answer is final (or the run gives up).
async fn drive(world: &World, mut op: Op, conv: &str, rng: &mut Rng) -> Op {
    let tasks = op.kind == Kind::RefundTask;
    loop {
        if world.give_up.load(Ordering::Relaxed) {
            op.events
                .push((world.ms(), "given up: the run ended".into()));
            return op;
        }
        let Some((replica, addr)) = world.pick_replica(rng) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let id = format!("q{}", world.next_request.fetch_add(1, Ordering::Relaxed));
        let start = world.ms();
        let (method, name, params) = match &op.task_id {
            Some(task) => (
                "tasks/get",
                task.clone(),
                json!({"taskId": task, "_meta": meta(conv, true)}),
            ),
            None => (
                "tools/call",
                op.tool.to_owned(),
                json!({"name": op.tool, "arguments": op.args, "_meta": meta(conv, tasks)}),
            ),
        };
        let answer = mcp(world, &addr, method, &name, &id, params).await;
        let end = world.ms();
        let result = match answer {
            Err(why) => {
                world.transport_errors.fetch_add(1, Ordering::Relaxed);
                op.events
                    .push((end, format!("{id} r{replica} {method}: {why}")));
                tokio::time::sleep(Duration::from_millis(rng.range(100, 400))).await;
                continue;
            }
            Ok(result) => result,
        };
        world.latencies.lock().unwrap().push((start, end - start));
        let (structured, call_id) = if result["resultType"] == "task" && op.task_id.is_none() {
            let task = result["taskId"].as_str().unwrap_or_default().to_owned();
            op.events.push((
                end,
                format!("{id} r{replica}: task {task} {}", result["status"]),
            ));
            op.task_id = Some(task);
            tokio::time::sleep(Duration::from_millis(rng.range(200, 600))).await;
            continue;
        } else if let Some(task) = op.task_id.clone() {
            let status = result["status"].as_str().unwrap_or_default().to_owned();
            match status.as_str() {
                "completed" => (
                    result["result"]["structuredContent"].clone(),
                    format!("task:{task}"),
                ),
                "cancelled" | "failed" => {
                    op.events
                        .push((end, format!("{id} r{replica}: task {status}")));
                    op.final_code = Some(format!("TASK_{}", status.to_uppercase()));
                    return op;
                }
                _ => {
                    op.events
                        .push((end, format!("{id} r{replica}: task {status}")));
                    tokio::time::sleep(Duration::from_millis(rng.range(300, 800))).await;
                    continue;
                }
            }
        } else {
            (result["structuredContent"].clone(), id.clone())
        };
        let code = if structured["ok"] == json!(true) {
            "OK".to_owned()
        } else {
            structured["code"].as_str().unwrap_or("NO_CODE").to_owned()
        };
        *world
            .codes
            .lock()
            .unwrap()
            .entry((op.tool.to_owned(), code.clone()))
            .or_default() += 1;
        world.answered.lock().unwrap().push(Answered {
            call_id,
            tool: op.tool.to_owned(),
            code: code.clone(),
            op: op.id.clone(),
        });
        let in_doubt = structured["data"]["in_doubt"] == json!(true) || code == "IN_DOUBT";
        op.in_doubt_seen |= in_doubt;
        op.events.push((
            end,
            format!(
                "{id} r{replica}: {code}{}{}",
                if in_doubt { " in_doubt" } else { "" },
                if structured["replayed"] == json!(true) {
                    " replayed"
                } else {
                    ""
                }
            ),
        ));
        if again(&code, &structured) {
            let wait = if code == "CONFIRMATION_REQUIRED" || code == "IN_DOUBT" {
                rng.range(300, 900)
            } else {
                rng.range(100, 400)
            };
            tokio::time::sleep(Duration::from_millis(wait)).await;
            continue;
        }
        if structured["data"]["edited_by_person"] == json!(true) {
            op.edited = Some(structured["data"]["edited_arguments"].clone());
        }
        if structured["data"]["happened"] == json!(true) {
            op.happened = true;
        }
        op.final_code = Some(code);
        return op;
    }
}

/// The scripted person: reads the inbox, approves, denies, edits, and
/// settles unknown outcomes after looking at the shop (truthfully).
pub async fn person(world: &World, mut rng: Rng, lease_ms: u64) {
    let mut due: HashMap<String, u64> = HashMap::new();
    while !world.person_stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Some(addr) = world.inbox.read().unwrap().clone() else {
            continue;
        };
        let Ok(items) = pending(world, &addr).await else {
            continue;
        };
        let now = world.ms();
        for item in items {
            let Some(id) = item["id"].as_str().map(str::to_owned) else {
                continue;
            };
            let in_doubt = item["reason"] == "in_doubt";
            // An unknown outcome is looked at once the attempt is surely
            // over (past a paused process's lease); an approval soon.
            let when = *due.entry(id.clone()).or_insert_with(|| {
                now + if in_doubt {
                    2 * lease_ms + rng.range(1000, 3000)
                } else {
                    rng.range(200, 3000)
                }
            });
            if now < when {
                continue;
            }
            let intent = {
                let intents = world.intents.lock().unwrap();
                intents.get(&id).cloned()
            };
            let intent = match intent {
                Some(intent) => intent,
                None => {
                    let Some(intent) = choose(world, &item, &mut rng).await else {
                        continue;
                    };
                    world
                        .intents
                        .lock()
                        .unwrap()
                        .insert(id.clone(), intent.clone());
                    intent
                }
            };
            let mut body = json!({"decision": intent.decision, "note": "chaos person"});
            if let Some(edited) = &intent.edited {
                body["arguments"] = edited.clone();
            }
            let sent = world
                .http
                .post(format!("http://{addr}/api/approvals/{id}/decision"))
                .header("Authorization", format!("Bearer {PERSON_TOKEN}"))
                .timeout(Duration::from_secs(5))
                .json(&body)
                .send()
                .await;
            if let Ok(answer) = sent {
                let status = answer.status().as_u16();
                if (status == 200 || status == 409 || status == 410)
                    && let Some(i) = world.intents.lock().unwrap().get_mut(&id)
                {
                    i.accepted |= status == 200;
                }
            }
        }
    }
}

/// One page of `limit` of the inbox's questions waiting, as its API
/// answers it.
async fn pending_page(world: &World, addr: &str, limit: u32) -> Result<Value, String> {
    let answer = world
        .http
        .get(format!("http://{addr}/api/pending?limit={limit}"))
        .header("Authorization", format!("Bearer {PERSON_TOKEN}"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    answer.json().await.map_err(|e| e.to_string())
}

async fn pending(world: &World, addr: &str) -> Result<Vec<Value>, String> {
    let value = pending_page(world, addr, 100).await?;
    Ok(value["items"].as_array().cloned().unwrap_or_default())
}

/// The inbox's questions waiting: its count (`total`) and the ids on one
/// page of the largest size (the run never has that many open at once).
pub async fn inbox_listing(world: &World) -> Result<(u64, HashSet<String>), String> {
    let addr = world.inbox.read().unwrap().clone().ok_or("no inbox")?;
    let value = pending_page(world, &addr, 500).await?;
    let total = value["total"]
        .as_u64()
        .ok_or_else(|| format!("no total: {value}"))?;
    let ids = value["items"]
        .as_array()
        .ok_or_else(|| format!("no items: {value}"))?
        .iter()
        .filter_map(|item| item["id"].as_str().map(str::to_owned))
        .collect();
    Ok((total, ids))
}

/// What the person decides about one item.
async fn choose(world: &World, item: &Value, rng: &mut Rng) -> Option<Intent> {
    let tool = item["tool"].as_str()?.to_owned();
    let arguments = item["arguments"].clone();
    let id = item["id"].as_str()?.to_owned();
    let (decision, edited) = if item["reason"] == "in_doubt" {
        let happened = crate::shop::effect_count(&world.db, &tool, &arguments)
            .await
            .ok()?
            > 0;
        (if happened { "happened" } else { "not_happened" }, None)
    } else {
        match rng.below(100) {
            0..70 => ("approve", None),
            70..85 => ("deny", None),
            _ => {
                let mut edited = arguments.clone();
                if tool == "refund_order" {
                    let amount = edited["amount_cents"].as_i64().unwrap_or(2);
                    edited["amount_cents"] = json!(amount + 1);
                } else {
                    let text = edited["text"].as_str().unwrap_or_default().to_owned();
                    edited["text"] = json!(format!("{text} (edited)"));
                }
                ("edit", Some(edited))
            }
        }
    };
    Some(Intent {
        id,
        tool,
        arguments,
        decision: decision.to_owned(),
        edited,
        accepted: false,
    })
}
