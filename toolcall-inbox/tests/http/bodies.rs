//! Bodies thrown at the inbox's JSON endpoints: whatever the bytes, the
//! answer is never a 5xx; a refusal is a 4xx in JSON with a code and words
//! and changes nothing in the store (no decision, no stop, nobody signed
//! out); and a body that is taken was one a strict reader takes: one JSON
//! object, no member named twice at any depth, only the endpoint's members.

use super::*;
use proptest::prelude::*;
use toolcall::store::MemoryStore;

#[derive(Clone, Copy, Debug)]
enum Endpoint {
    Decision,
    Stop,
    Enable,
    Revoke,
}

impl Endpoint {
    fn path(self) -> &'static str {
        match self {
            Endpoint::Decision => "/api/approvals/ap-fuzz/decision",
            Endpoint::Stop => "/api/controls/stops",
            Endpoint::Enable => "/api/controls/enable",
            Endpoint::Revoke => "/sessions/revoke",
        }
    }

    fn members(self) -> &'static [&'static str] {
        match self {
            Endpoint::Decision => &["decision", "note", "arguments", "csrf"],
            Endpoint::Stop => &["target", "name", "reason", "csrf"],
            Endpoint::Enable => &["target", "name", "csrf"],
            Endpoint::Revoke => &["csrf"],
        }
    }
}

const NAMES: [&str; 12] = [
    "decision",
    "note",
    "arguments",
    "csrf",
    "target",
    "name",
    "reason",
    "to",
    "amount_cents",
    "by",
    "",
    "decision\u{202e}",
];

const WORDS: [&str; 14] = [
    "approve",
    "deny",
    "edit",
    "happened",
    "not_happened",
    "tool",
    "caller",
    "everything",
    "pay",
    "default",
    "defualt",
    "acme",
    " ",
    "\u{202e}\u{7}",
];

/// A JSON value as text, names and words mostly the endpoints' own.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("1e400".to_owned()),
        Just("-0.0".to_owned()),
        prop::sample::select(&WORDS[..]).prop_map(|w| json!(w).to_string()),
        any::<String>().prop_map(|s| json!(s).to_string()),
    ];
    leaf.prop_recursive(4, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| format!("[{}]", items.join(","))),
            members(inner),
        ]
    })
}

/// An object's text, whose members may repeat a name.
fn members(value: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(&NAMES[..]), value), 0..5).prop_map(|members| {
        let members: Vec<String> = members
            .iter()
            .map(|(name, value)| format!("{}: {value}", json!(name)))
            .collect();
        format!("{{{}}}", members.join(", "))
    })
}

/// A body `endpoint` takes: its members, as name and JSON text.
fn taken(endpoint: Endpoint) -> BoxedStrategy<Vec<(String, String)>> {
    let text = || any::<String>().prop_map(|s| json!(s).to_string());
    let member = |name: &str, value: String| (name.to_owned(), value);
    match endpoint {
        Endpoint::Decision => prop_oneof![
            (prop::sample::select(vec!["approve", "deny"]), text()).prop_map(
                move |(word, note)| vec![
                    member("decision", json!(word).to_string()),
                    member("note", note),
                ]
            ),
            (1i64..200_000).prop_map(move |cents| vec![
                member("decision", json!("edit").to_string()),
                member(
                    "arguments",
                    json!({"to": "acme", "amount_cents": cents}).to_string()
                ),
            ]),
        ]
        .boxed(),
        Endpoint::Stop => (
            prop::sample::select(vec!["pay", "default", "defualt"]),
            text(),
        )
            .prop_map(move |(name, reason)| {
                let target = if name == "pay" { "tool" } else { "caller" };
                vec![
                    member("target", json!(target).to_string()),
                    member("name", json!(name).to_string()),
                    member("reason", reason),
                ]
            })
            .boxed(),
        Endpoint::Enable => Just(vec![
            member("target", json!("tool").to_string()),
            member("name", json!("pay").to_string()),
        ])
        .boxed(),
        Endpoint::Revoke => Just(vec![]).boxed(),
    }
}

/// A body `endpoint` takes, or one changed a little: a member given
/// again with another value, one it does not take, one of another type,
/// or one left out.
fn near(endpoint: Endpoint) -> impl Strategy<Value = Vec<u8>> {
    (
        taken(endpoint),
        0..8u8,
        any::<prop::sample::Index>(),
        value(),
    )
        .prop_map(|(mut members, change, at, other)| {
            let at = at.index(members.len().max(1));
            match change {
                1 if !members.is_empty() => members.push((members[at].0.clone(), other)),
                2 if !members.is_empty() => members[at].1 = other,
                3 if !members.is_empty() => drop(members.remove(at)),
                4 => members.push(("by".to_owned(), other)),
                _ => {}
            }
            let members: Vec<String> = members
                .iter()
                .map(|(name, value)| format!("{}: {value}", json!(name)))
                .collect();
            format!("{{{}}}", members.join(", ")).into_bytes()
        })
}

fn body(endpoint: Endpoint) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => near(endpoint),
        4 => members(value()).prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..64),
        // Cut short anywhere.
        1 => (members(value()), any::<prop::sample::Index>()).prop_map(|(text, at)| {
            let bytes = text.into_bytes();
            let at = at.index(bytes.len() + 1);
            bytes[..at].to_vec()
        }),
        // Nested deep, inside a member every endpoint reads.
        1 => (1usize..300, prop::sample::select(&NAMES[..4])).prop_map(|(depth, name)| {
            format!("{{{}: {}1{}}}", json!(name), "[".repeat(depth), "]".repeat(depth))
                .into_bytes()
        }),
        // A long string, over the bound on a body or a note, or not.
        1 => prop::sample::select(vec![999usize, 1001, 200_000, 300_000]).prop_map(|len| {
            json!({"decision": "deny", "note": "n".repeat(len), "target": "everything"})
                .to_string()
                .into_bytes()
        }),
    ]
}

/// How deep `value` nests, itself counted.
fn depth_of(value: &Value, depth: usize) -> usize {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|v| depth_of(v, depth + 1))
            .max()
            .unwrap_or(depth + 1),
        Value::Object(map) => map
            .values()
            .map(|v| depth_of(v, depth + 1))
            .max()
            .unwrap_or(depth + 1),
        _ => depth,
    }
}

async fn check(endpoint: Endpoint, body: Vec<u8>) -> Result<(), TestCaseError> {
    let store = Arc::new(MemoryStore::default());
    let backend = Arc::new(
        Dispatcher::builder(tools![pay].unwrap(), Arc::new(()))
            .store(Arc::clone(&store))
            .build()
            .unwrap(),
    );
    store
        .put_approval(&asked_at("ap-fuzz", "s", now_ms()))
        .await
        .unwrap();
    let access = Access::parse(&format!("ana {ANA} admin\n"), "x").unwrap();
    let router = toolcall_inbox::router(backend, Options::new(access));
    let signed_in = routed(&router, "GET", &format!("/?token={ANA}"), &[], vec![]).await;
    prop_assert_eq!(signed_in.status, 303);
    let cookie = signed_in.cookie.unwrap();
    let bearer = format!("Bearer {ANA}");
    let text = String::from_utf8_lossy(&body).into_owned();
    let reply = routed(
        &router,
        "POST",
        endpoint.path(),
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
        body.clone(),
    )
    .await;
    prop_assert!(
        reply.status < 500,
        "{} {}: {}",
        reply.status,
        text,
        reply.body
    );
    prop_assert_eq!(reply.content_type.as_deref(), Some("application/json"));
    let answer: Value = serde_json::from_str(&reply.body)
        .map_err(|e| TestCaseError::fail(format!("not JSON ({e}): {}", reply.body)))?;
    if (200..300).contains(&reply.status) {
        // Taken: a strict reader takes it too.
        let strict = std::str::from_utf8(&body)
            .ok()
            .and_then(|text| toolcall_core::canonical::canonical_json_from_text(text).ok());
        prop_assert!(strict.is_some(), "took {}", text);
        let parsed: Value = serde_json::from_slice(&body).unwrap();
        let object = parsed.as_object();
        prop_assert!(object.is_some(), "took {}", text);
        for name in object.unwrap().keys() {
            prop_assert!(endpoint.members().contains(&name.as_str()), "took {}", text);
        }
        prop_assert!(depth_of(&parsed, 0) <= 33, "took {}", text);
        return Ok(());
    }
    prop_assert!(reply.status >= 400, "{}: {}", reply.status, reply.body);
    prop_assert!(
        answer["code"].as_str().is_some_and(|c| !c.is_empty())
            && answer["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{}",
        answer
    );
    // Refused: nothing changed.
    let entry = store.approval("ap-fuzz").await.unwrap().unwrap();
    prop_assert!(entry.approval.decision.is_none(), "decided by {}", text);
    prop_assert_eq!(store.signatures("ap-fuzz").await.unwrap(), vec![]);
    let (version, controls) = toolcall_core::controls::read(&*store).await.unwrap();
    prop_assert_eq!(
        (version, controls.stops),
        (0, vec![]),
        "changed by {}",
        text
    );
    let page = routed(&router, "GET", "/sessions", &[("cookie", &cookie)], vec![]).await;
    prop_assert_eq!(page.status, 200, "signed out by {}", text);
    Ok(())
}

proptest! {
    // Cheap enough for every run; CI pins PROPTEST_RNG_SEED.
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_body_is_a_5xx_and_a_refused_one_changes_nothing(
        (endpoint, body) in prop::sample::select(vec![
            Endpoint::Decision,
            Endpoint::Stop,
            Endpoint::Enable,
            Endpoint::Revoke,
        ])
        .prop_flat_map(|endpoint| (Just(endpoint), body(endpoint))),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(check(endpoint, body))?;
    }
}
