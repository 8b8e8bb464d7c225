//! The invariants, checked from the shop's tables, the store's tables, the
//! audit logs and the inbox: at intervals while the faults run, and once
//! more, with the checks that need a finished run, at the end.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::Value;

use crate::shop::{ApprovalRow, RecordRow, effect_of, effects, open_questions, snapshot, wall_ms};
use crate::world::{Kind, World, inbox_listing};

/// Approvals seen in any round (the store purges them once expired).
#[derive(Default)]
pub struct Checker {
    pub approvals: HashMap<String, ApprovalRow>,
}

fn count(world: &World, n: usize) {
    world
        .checks
        .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
}

/// One round of checks. `last`: the run is over, every operation driven
/// to its end (or given up), nothing is moving.
pub async fn round(world: &World, checker: &mut Checker, lease_ms: u64, last: bool, dir: &Path) {
    world
        .check_rounds
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let s = match snapshot(&world.db).await {
        Ok(s) => s,
        Err(why) => {
            if last {
                world.violation(
                    "readable",
                    format!("the store could not be read at the end: {why}"),
                    vec![],
                );
            }
            return;
        }
    };
    for a in &s.approvals {
        checker.approvals.insert(a.id.clone(), a.clone());
    }
    let ops = world.ops.lock().unwrap().clone();
    let intents = world.intents.lock().unwrap().clone();
    let effects = effects(&s);

    // 0. Every operation ends: the drain drives each to a final answer, the
    // person deciding all along, so one still without it (a task `working`
    // or a call refused "try again" for the whole drain) is stuck.
    if last {
        count(world, ops.len());
        for op in ops.iter().filter(|op| op.final_code.is_none()) {
            world.violation(
                "finished",
                format!("{} {} never got a final answer", op.id, op.tool),
                vec![op.id.clone()],
            );
        }
    }
    let ops_of = |tool: &str, o: &str, x: &str| -> Vec<String> {
        ops.iter()
            .filter(|op| {
                op.tool == tool
                    && [Some(&op.args), op.edited.as_ref()]
                        .into_iter()
                        .flatten()
                        .any(|a| effect_of(tool, a).is_some_and(|(oo, xx)| oo == o && xx == x))
            })
            .map(|op| op.id.clone())
            .collect()
    };

    // 1. Each key applied at most once: every operation's arguments are
    // unique in the run, so an effect twice is a call applied twice.
    count(world, effects.len());
    for ((tool, o, x), n) in &effects {
        if *n > 1 {
            world.violation(
                "at_most_once",
                format!("{tool} {o} {x:?} applied {n} times"),
                ops_of(tool, o, x),
            );
        }
    }

    // 2. No high-risk call ran without an authorized decision bound to its
    // arguments: each refund matches an approval a person approved (or
    // edited to it), recorded in the store and sent by the person.
    count(world, s.refunds.len());
    for (o, amount) in &s.refunds {
        let bound = checker.approvals.values().any(|a| {
            a.tool == "refund_order"
                && a.decision.as_ref().is_some_and(|d| {
                    d["approved"] == Value::Bool(true) && {
                        let args = if d["edited_arguments"].is_object() {
                            &d["edited_arguments"]
                        } else {
                            &a.arguments
                        };
                        args["order_id"].as_str() == Some(o)
                            && args["amount_cents"].as_i64() == Some(*amount)
                    }
                })
                && intents
                    .get(&a.id)
                    .is_some_and(|i| i.decision == "approve" || i.decision == "edit")
        });
        if !bound {
            world.violation(
                "authorized",
                format!("refund of {amount} on {o} with no approval bound to it by the person"),
                ops_of("refund_order", o, &amount.to_string()),
            );
        }
    }

    // 3. No denial overridden: what the person denied never took effect,
    // and the store still says denied.
    let denials: Vec<_> = intents.values().filter(|i| i.decision == "deny").collect();
    count(world, denials.len());
    for i in denials {
        if let Some((o, x)) = effect_of(&i.tool, &i.arguments)
            && effects
                .get(&(i.tool.clone(), o.clone(), x.clone()))
                .copied()
                .unwrap_or(0)
                > 0
        {
            world.violation(
                "denial_final",
                format!(
                    "{} {o} {x:?} took effect after the person denied {}",
                    i.tool, i.id
                ),
                ops_of(&i.tool, &o, &x),
            );
        }
        if let Some(a) = checker.approvals.get(&i.id)
            && a.decision
                .as_ref()
                .is_some_and(|d| d["approved"] == Value::Bool(true))
        {
            world.violation(
                "denial_final",
                format!(
                    "approval {} denied by the person is approved in the store",
                    i.id
                ),
                vec![],
            );
        }
    }

    // 4. Every unknown outcome is in doubt in the store and listed for a
    // person: a claim's question whose outcome is unknown (in doubt, or
    // its lease over) is an approval the inbox lists, or one decided.
    let now = wall_ms();
    let lapsed = |r: &RecordRow| {
        r.state == "in_doubt" || (r.state == "in_flight" && r.until_ms + 10_000 < now)
    };
    let mut listed = 0;
    for r in s.records.iter().filter(|r| lapsed(r)) {
        let Some(q) = &r.question else { continue };
        if q["tool"] != "add_note" {
            continue;
        }
        listed += 1;
        let id = q["id"].as_str().unwrap_or_default();
        if !checker.approvals.contains_key(id) && last {
            world.violation(
                "unknown_listed",
                format!(
                    "the unknown outcome of key {} ({}) is not listed for a person",
                    r.key, q["arguments"]
                ),
                vec![],
            );
        }
    }
    count(world, listed);

    // 5. No call stays claimed past its lease with its owner gone and
    // nobody to settle it: a lapsed claim keeps a question, or an
    // identical call takes it up.
    let stale = 30_000 + i64::try_from(lease_ms).unwrap_or(0);
    let mut claims = 0;
    for r in s.records.iter().filter(|r| r.state == "in_flight") {
        claims += 1;
        if r.until_ms + stale < now && r.question.is_none() {
            world.violation(
                "stale_claim",
                format!(
                    "key {} claimed until {} ({} s ago), no question kept",
                    r.key,
                    r.until_ms,
                    (now - r.until_ms) / 1000
                ),
                vec![],
            );
        }
    }
    count(world, claims);

    // 6. The inbox lists what the store holds open, and counts it: read the
    // store before and after the inbox, so that calls coming and going
    // in between cannot make a difference where there is none. A question
    // open at both reads was open when the inbox was read (a decided, used
    // or expired one never opens again): the inbox lists it. A question
    // the inbox lists was open then: not one already closed before.
    count(world, 1);
    if let Some(problem) = inbox_agrees(world).await {
        world.violation("inbox_count", problem, vec![]);
    }

    if !last {
        return;
    }

    // 7. Exactly once, unless a person settled it: an operation answered OK
    // took effect once (with a person's edit, the edit did and the
    // original did not); one refused took no effect.
    let mut attributed: HashSet<(String, String, String)> = HashSet::new();
    for op in &ops {
        if !matches!(op.kind, Kind::Refund | Kind::RefundTask | Kind::Note) {
            continue;
        }
        for a in [Some(&op.args), op.edited.as_ref()].into_iter().flatten() {
            if let Some((o, x)) = effect_of(op.tool, a) {
                attributed.insert((op.tool.to_owned(), o, x));
            }
        }
        let Some(code) = &op.final_code else { continue };
        count(world, 1);
        let n = |a: &Value| {
            effect_of(op.tool, a)
                .map(|(o, x)| {
                    effects
                        .get(&(op.tool.to_owned(), o, x))
                        .copied()
                        .unwrap_or(0)
                })
                .unwrap_or(0)
        };
        let effective = n(op.effective());
        let original = if op.edited.is_some() { n(&op.args) } else { 0 };
        let fine = if code == "OK" {
            (effective == 1 || (op.happened && effective <= 1)) && original == 0
        } else {
            effective == 0 && original == 0
        };
        if !fine {
            world.violation(
                "exactly_once",
                format!(
                    "{} answered {code}{} but took effect {effective} time(s){}",
                    op.id,
                    if op.happened {
                        " (a person said it happened)"
                    } else {
                        ""
                    },
                    if op.edited.is_some() {
                        format!(", its original {original}")
                    } else {
                        String::new()
                    }
                ),
                vec![op.id.clone()],
            );
        }
    }
    for key in effects.keys() {
        if !attributed.contains(key) {
            world.violation(
                "at_most_once",
                format!("an effect no operation asked for: {key:?}"),
                vec![],
            );
        }
    }

    // 8. Every call that was answered has its audit record (same request
    // id, same code), and every note in doubt went to a person.
    let records = read_audit(dir);
    let mut by_id: HashMap<String, Vec<(String, Value)>> = HashMap::new();
    for r in &records {
        if let Some(id) = r["call_id"].as_str() {
            by_id
                .entry(id.to_owned())
                .or_default()
                .push((r["code"].as_str().unwrap_or_default().to_owned(), r.clone()));
        }
    }
    let answered = world.answered.lock().unwrap().clone();
    count(world, answered.len());
    for a in &answered {
        let found = by_id
            .get(&a.call_id)
            .is_some_and(|rs| rs.iter().any(|(code, _)| *code == a.code));
        if !found {
            world.violation(
                "audited",
                format!(
                    "{} ({} answered {}) has no audit record",
                    a.call_id, a.tool, a.code
                ),
                vec![a.op.clone()],
            );
        }
    }
    let settled: HashSet<String> = intents
        .values()
        .filter(|i| {
            i.tool == "add_note" && (i.decision == "happened" || i.decision == "not_happened")
        })
        .filter_map(|i| i.arguments["text"].as_str().map(str::to_owned))
        .collect();
    let doubted: Vec<_> = records
        .iter()
        .filter(|r| r["in_doubt"] == Value::Bool(true) && r["tool"] == "add_note")
        .filter_map(|r| {
            serde_json::from_str::<Value>(r["arguments"].as_str()?)
                .ok()?
                .get("text")?
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    count(world, doubted.len());
    for text in doubted {
        let op = ops
            .iter()
            .find(|op| op.args["text"] == Value::String(text.clone()));
        let unfinished = op.is_none_or(|op| op.final_code.is_none());
        // A result whose recording lost its answer (the write took, the
        // connection went): the answer said in doubt, the store knew, and
        // the identical call replayed it. Nothing was unknown to the store,
        // so there was nothing to ask; check 7 counts its effect.
        let recorded = op.is_some_and(|op| {
            op.final_code.as_deref() == Some("OK")
                && op
                    .events
                    .last()
                    .is_some_and(|(_, what)| what.ends_with(" replayed"))
        });
        if !settled.contains(&text) && !unfinished && !recorded {
            world.violation(
                "unknown_listed",
                format!("the note {text:?} was in doubt and no person was asked"),
                op.map(|op| vec![op.id.clone()]).unwrap_or_default(),
            );
        }
    }
}

/// Every audit record of every process of the run.
pub fn read_audit(dir: &Path) -> Vec<Value> {
    let mut records = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return records;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("audit-") && name.ends_with(".jsonl") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            records.extend(
                text.lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok()),
            );
        }
    }
    records
}

/// What the inbox gets wrong of the store's open questions, if anything:
/// one read of the inbox between two of the store. `None` when it agrees,
/// or when the inbox or the store could not be read (a fault is on).
async fn inbox_agrees(world: &World) -> Option<String> {
    let before = open_questions(&world.db).await.ok()?;
    let (total, listed) = inbox_listing(world).await.ok()?;
    let after = open_questions(&world.db).await.ok()?;
    let open = |map: &HashMap<String, bool>, id: &str| map.get(id).copied().unwrap_or(false);
    let mut unlisted: Vec<&String> = before
        .keys()
        .filter(|id| open(&before, id) && open(&after, id) && !listed.contains(*id))
        .collect();
    unlisted.sort();
    if !unlisted.is_empty() {
        return Some(format!(
            "open in the store before and after the inbox was read, not listed: {unlisted:?}"
        ));
    }
    let mut closed: Vec<&String> = listed
        .iter()
        .filter(|id| before.get(*id) == Some(&false))
        .collect();
    closed.sort();
    if !closed.is_empty() {
        return Some(format!(
            "listed by the inbox, closed in the store before it was read: {closed:?}"
        ));
    }
    if total != listed.len() as u64 {
        return Some(format!(
            "the inbox counts {total} and lists {} on one page",
            listed.len()
        ));
    }
    None
}
