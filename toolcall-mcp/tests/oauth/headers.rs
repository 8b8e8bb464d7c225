//! Any Authorization header through the token's checks (a property): made-up
//! identities, claims and signatures are refused, and nothing else.

use super::*;

// ------------------------------------------------------------------ any header, any token

/// One server for the property below, over the test process's life: its
/// runtime, its issuer, its address.
struct World {
    runtime: tokio::runtime::Runtime,
    issuer: Issuer,
    addr: SocketAddr,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (issuer, addr) = runtime.block_on(async {
            let issuer = Issuer::start(Mode::Serve, &[&KEY_1]).await;
            let http = HttpOptions::new()
                .max_sessions_per_caller(100_000)
                .max_sessions_per_principal(100_000);
            let addr = start(&issuer, Duration::from_secs(60), http).await;
            (issuer, addr)
        });
        World {
            runtime,
            issuer,
            addr,
        }
    })
}

/// base64url without padding, as JWTs write their parts.
fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (at, byte)| n | u32::from(*byte) << (16 - 8 * at));
        for at in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * at) & 63) as usize] as char);
        }
    }
    out
}

/// A JSON value of a few shapes, for a header's or claims' field.
fn any_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        prop::collection::vec(".{0,8}", 0..3).prop_map(Value::from),
    ]
}

/// A field of a token: as a good token has it, absent, or anything.
#[derive(Clone, Debug)]
enum Field {
    Good,
    Absent,
    Bad(Value),
}

fn field(bad: impl Strategy<Value = Value>) -> impl Strategy<Value = Field> {
    prop_oneof![
        4 => Just(Field::Good),
        1 => Just(Field::Absent),
        2 => bad.prop_map(Field::Bad),
    ]
}

/// Text a principal must not be made of.
fn bad_identity() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("")),
        Just(json!(" ")),
        Just(json!(" alice")),
        Just(json!("alice\t")),
        "[a-z]{0,4}[\u{0}-\u{1f}\u{7f}\u{202a}-\u{202e}\u{2066}-\u{2069}\u{200b}][a-z]{0,4}"
            .prop_map(Value::from),
        any_json().prop_filter("not a string", |value| !value.is_string()),
    ]
}

/// The claims of a token signed with the issuer's key, each field good,
/// absent or bad; and whether the token is one to take.
fn signed_claims(issuer: &str) -> impl Strategy<Value = (Value, bool)> + use<> {
    let issuer = issuer.to_owned();
    (
        field(prop_oneof![
            Just(json!("https://other.example")),
            any_json()
        ]),
        field(prop_oneof![
            Just(json!("https://other.example/mcp")),
            any_json()
        ]),
        field(prop_oneof![
            Just(json!(1)),
            Just(json!(now() - 3600)),
            any_json().prop_filter("not a number", |value| !value.is_number()),
        ]),
        field(bad_identity()),
        field(bad_identity()),
        field(bad_identity()),
        field(any_json().prop_filter("not a string", |value| !value.is_string())),
    )
        .prop_map(move |(iss, aud, exp, sub, client_id, azp, scope)| {
            let mut claims = serde_json::Map::new();
            let mut good = true;
            let mut set = |name: &str, field: Field, value: Value, optional: bool| match field {
                Field::Good => {
                    claims.insert(name.to_owned(), value);
                }
                Field::Absent => good &= optional,
                Field::Bad(value) => {
                    // A value that happens to be good stays good; a null
                    // optional claim is an absent one.
                    good &= match name {
                        _ if optional && value.is_null() => true,
                        "sub" | "client_id" | "azp" => false,
                        "iss" => value == json!(issuer),
                        "aud" => value == json!(AUDIENCE),
                        _ => false,
                    };
                    claims.insert(name.to_owned(), value);
                }
            };
            set("iss", iss, json!(issuer), false);
            set("aud", aud, json!(AUDIENCE), false);
            set("exp", exp, json!(now() + 3600), false);
            set("sub", sub, json!("alice"), false);
            set("client_id", client_id, json!("desk"), true);
            set("azp", azp, json!("desk"), true);
            set("scope", scope, json!("mcp.read"), true);
            (Value::Object(claims), good)
        })
}

/// What is sent as `Authorization`, and whether it should be taken.
fn authorization(issuer: &str) -> impl Strategy<Value = (Vec<u8>, bool)> + use<> {
    // The bytes a header value may hold (HTAB, SP, VCHAR, obs-text).
    let header_byte = prop_oneof![Just(b'\t'), 0x20u8..=0x7e, 0x80u8..=0xff];
    let scheme = prop_oneof![
        Just("Bearer ".to_owned()),
        Just("bearer  ".to_owned()),
        Just("Basic ".to_owned()),
        Just(String::new()),
    ];
    let segment = "[A-Za-z0-9_=+/-]{0,40}";
    let header = (
        prop_oneof![
            Just(json!("EdDSA")),
            Just(json!("RS256")),
            Just(json!("HS256")),
            Just(json!("none")),
            any_json(),
        ],
        prop_oneof![Just(json!(KEY_1.kid)), Just(json!("made-up")), any_json()],
        any::<bool>(),
    )
        .prop_map(|(alg, kid, with_kid)| {
            let mut header = json!({"alg": alg, "typ": "JWT"});
            if with_kid {
                header["kid"] = kid;
            }
            header
        });
    prop_oneof![
        // Any bytes at all.
        prop::collection::vec(header_byte, 0..300).prop_map(|bytes| (bytes, false)),
        // A bearer of anything shaped like a JWT.
        (scheme.clone(), prop::collection::vec(segment, 0..5)).prop_map(|(scheme, parts)| {
            (format!("{scheme}{}", parts.join(".")).into_bytes(), false)
        }),
        // A header and claims of any fields, signed with nothing that checks.
        (
            header,
            any_json(),
            prop::collection::vec(any::<u8>(), 0..80)
        )
            .prop_map(|(header, claims, signature)| {
                let token = format!(
                    "{}.{}.{}",
                    b64(header.to_string().as_bytes()),
                    b64(claims.to_string().as_bytes()),
                    b64(&signature)
                );
                (format!("Bearer {token}").into_bytes(), false)
            }),
        // Claims of every kind, signed with the issuer's key.
        signed_claims(issuer).prop_map(|(claims, good)| {
            let token = KEY_1.sign(Some(KEY_1.kid), &claims);
            (format!("Bearer {token}").into_bytes(), good)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any `Authorization` value, any token: never a panic nor a `5xx`;
    /// `401` with a `Bearer` challenge for all but good tokens (an
    /// `error_description` when it was a token), which are taken.
    #[test]
    fn any_authorization_is_taken_or_refused_with_a_challenge(
        (value, good) in authorization(world().issuer.url())
    ) {
        let world = world();
        let answer = world.runtime.block_on(send_bytes(
            world.addr,
            "POST",
            &[("Authorization", &value)],
            INITIALIZE.as_bytes(),
        ));
        if good {
            prop_assert_eq!(answer.status, 200, "{:?}", answer);
        } else {
            prop_assert_eq!(answer.status, 401, "{:?}", answer);
            let challenge = answer.header("www-authenticate").unwrap_or_default();
            prop_assert!(challenge.starts_with("Bearer "), "{:?}", answer);
            let bearer = value.len() > 7 && value[..7].eq_ignore_ascii_case(b"bearer ")
                && !value[7..].iter().all(u8::is_ascii_whitespace);
            if bearer && value.is_ascii() {
                prop_assert!(
                    challenge.contains("error=\"invalid_token\", error_description=\""),
                    "{:?}", answer
                );
            }
        }
    }
}
