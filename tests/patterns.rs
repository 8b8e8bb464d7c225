//! One regex dialect: every `pattern` the macro accepts means the same to
//! the schema's readers (ECMA-262 with the `u` flag, here the `regress`
//! engine) and to the validator (toolcall's `Pattern`, on Rust's `regex`).
//!
//! Patterns are generated from the constructs both dialects have, with the
//! characters where they differ most (Unicode digits and letters, U+0085,
//! U+FEFF, U+2028, `\r`); each must pass the macro's check, and then match
//! exactly the strings ECMA-262 matches.

use proptest::prelude::*;
use toolcall::fields::Pattern;

#[allow(dead_code)]
#[path = "../toolcall-macros/src/pattern.rs"]
mod pattern;

/// Characters where Rust's and ECMA-262's classes disagree, and plain ones.
const CHARS: [char; 22] = [
    'a',
    'b',
    'z',
    'A',
    '_',
    '-',
    '0',
    '5',
    '.',
    ' ',
    '[',
    ']',
    '\n',
    '\r',
    '\t',
    '\u{85}',
    '\u{A0}',
    '\u{FEFF}',
    '\u{2028}',
    '\u{0663}',
    '\u{E9}',
    '\u{1F600}',
];

/// A character as a pattern writes it.
fn literal() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a",
        "b",
        "z",
        "_",
        "-",
        "5",
        " ",
        "\u{E9}",
        "\u{0663}",
        r"\.",
        r"\[",
        r"\]",
        r"\n",
        r"\r",
        r"\t",
        r"\u2028",
        r"\u{1F600}",
        r"\x41",
        r"\/",
    ])
    .prop_map(str::to_owned)
}

/// A class both dialects have, whose definitions differ.
fn perl_class() -> impl Strategy<Value = String> {
    prop::sample::select(vec![r"\d", r"\D", r"\w", r"\W", r"\s", r"\S"]).prop_map(str::to_owned)
}

/// `[...]` and `[^...]` of characters, ranges and classes.
fn bracketed() -> impl Strategy<Value = String> {
    // A bare `-` between two items would make a range of them.
    let item = prop_oneof![
        literal().prop_filter("a bare `-`", |l| l != "-"),
        perl_class(),
        Just("a-z".to_owned()),
        Just("0-9".to_owned()),
        Just(r"\u00C0-\u00FF".to_owned()),
        Just(".".to_owned()),
        Just(r"\-".to_owned()),
    ];
    (any::<bool>(), prop::collection::vec(item, 1..4)).prop_map(|(negated, items)| {
        format!("[{}{}]", if negated { "^" } else { "" }, items.concat())
    })
}

/// Something a quantifier may follow.
fn atom() -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        3 => literal(),
        2 => perl_class(),
        2 => bracketed(),
        1 => Just(".".to_owned()),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(piece(inner.clone()), 1..4)
                .prop_map(|p| format!("({})", p.concat())),
            prop::collection::vec(piece(inner.clone()), 1..4)
                .prop_map(|p| format!("(?:{})", p.concat())),
            (piece(inner.clone()), piece(inner)).prop_map(|(a, b)| format!("(?:{a}|{b})")),
        ]
    })
    .boxed()
}

/// An atom, perhaps quantified, or an assertion.
fn piece(atom: BoxedStrategy<String>) -> BoxedStrategy<String> {
    let quantifier = prop::sample::select(vec!["", "", "*", "+", "?", "{2}", "{1,3}", "{0,}"]);
    let lazy = prop::sample::select(vec!["", "?"]);
    prop_oneof![
        5 => (atom, quantifier, lazy).prop_map(|(a, q, l)| {
            if q.is_empty() { a } else { format!("{a}{q}{l}") }
        }),
        1 => prop::sample::select(vec![r"\b", r"\B"]).prop_map(str::to_owned),
    ]
    .boxed()
}

fn generated_pattern() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::collection::vec(piece(atom()), 1..5),
        any::<bool>(),
    )
        .prop_map(|(start, pieces, end)| {
            format!(
                "{}{}{}",
                if start { "^" } else { "" },
                pieces.concat(),
                if end { "$" } else { "" }
            )
        })
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(CHARS.to_vec()), 0..7)
        .prop_map(|chars| chars.into_iter().collect())
}

fn ecma_matches(pattern: &str, text: &str) -> bool {
    let flags = regress::Flags {
        unicode: true,
        ..regress::Flags::default()
    };
    let regex = regress::Regex::with_flags(pattern, flags)
        .expect("the macro accepted it, so ECMA-262 parses it");
    // regress's Pike VM: its backtracker takes exponential time on the
    // nested quantifiers generated here.
    regress::backends::find::<regress::backends::PikeVMExecutor>(&regex, text, 0)
        .next()
        .is_some()
}

/// [`ecma_matches`] on each of `texts`, each within [`ORACLE_TIME`], or
/// `None`: regress's Pike VM is not linear on every pattern generated here
/// either (one in some tens of thousands ran for minutes), and the oracle's
/// time must not decide whether the test ends. A case it cannot answer in
/// time is discarded and named on stderr; its thread is left to finish
/// with the process.
fn ecma_matches_in_time(pattern: &str, texts: &[String]) -> Option<Vec<bool>> {
    let (answer, answered) = std::sync::mpsc::channel();
    let (owned_pattern, owned_texts) = (pattern.to_owned(), texts.to_vec());
    std::thread::spawn(move || {
        for text in &owned_texts {
            if answer.send(ecma_matches(&owned_pattern, text)).is_err() {
                break;
            }
        }
    });
    texts
        .iter()
        .map(|text| {
            let matched = answered.recv_timeout(ORACLE_TIME).ok();
            if matched.is_none() {
                eprintln!(
                    "regress gave no answer within {ORACLE_TIME:?}: {pattern:?} on {text:?}; case discarded"
                );
            }
            matched
        })
        .collect()
}

/// How long the oracle may take for one text.
const ORACLE_TIME: std::time::Duration = std::time::Duration::from_secs(2);

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn the_schema_and_the_validator_agree_on_every_accepted_pattern(
        pattern in generated_pattern(),
        texts in prop::collection::vec(text(), 8),
    ) {
        prop_assert_eq!(pattern::check(&pattern), Ok(()), "the macro refused {:?}", pattern);
        let validator = Pattern::new(Box::leak(pattern.clone().into_boxed_str()));
        let expected = ecma_matches_in_time(&pattern, &texts);
        prop_assume!(expected.is_some(), "regress gave no answer in time");
        for (text, expected) in texts.iter().zip(expected.unwrap_or_default()) {
            prop_assert_eq!(
                validator.is_match(text),
                expected,
                "pattern {:?} on {:?}", pattern, text
            );
        }
    }
}

/// The issue's case: `(?i)` was accepted, ignored case in the validator and
/// reached the schema, whose readers have no inline flags.
#[test]
fn an_inline_flag_is_refused_with_the_spelled_out_cases() {
    let message = pattern::check(r"^(?i)svc-[a-z]+$").unwrap_err();
    assert!(message.contains("[Ss][Vv][Cc]"), "{message}");
}

/// Each single character, alone and in a class, means the same to both.
#[test]
fn every_class_agrees_on_every_character_of_the_first_planes() {
    for source in [
        r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", ".", r"[\s]", r"[^\S]", r"[\w.]", r"\bx",
    ] {
        let pattern = format!("^{source}$");
        let pattern = if source == r"\bx" {
            format!(".{source}")
        } else {
            pattern
        };
        assert_eq!(pattern::check(&pattern), Ok(()), "{pattern}");
        let validator = Pattern::new(Box::leak(pattern.clone().into_boxed_str()));
        for c in (0..0x3100u32)
            .chain(0xFE00..0xFF00)
            .filter_map(char::from_u32)
        {
            let text = if source == r"\bx" {
                format!("{c}x")
            } else {
                c.to_string()
            };
            assert_eq!(
                validator.is_match(&text),
                ecma_matches(&pattern, &text),
                "{pattern} on U+{:04X}",
                c as u32
            );
        }
    }
}

/// The assertions, where an empty match could fall inside a character:
/// ECMA-262's `\B` holds between two bytes of one UTF-8 character as Rust
/// reads `(?-u:\B)`, and `regex`'s `is_match` skipped such an empty match
/// and with it a longer one that began earlier (`(?:\B|[^a]){2}` on
/// `"a\u{85}b"` matched nothing). Every text of up to three of the
/// characters above, on patterns made of assertions and the classes around
/// them.
#[test]
fn the_word_boundaries_agree_on_every_short_text() {
    let patterns = [
        r"\B",
        r"\b",
        r"(?:\B|[^a]){2}",
        r"(?:[^a]|\B){2}",
        r"(?:\B|.)+b",
        r"\B[^a]",
        r"[^a]\B",
        r"\B\B",
        r"^\B",
        r"\B$",
        r"a\B",
        r"\W\B\W",
        r"(?:\b|\s)\d",
        r"x*\B",
    ];
    let mut texts = vec![String::new()];
    let mut longest = vec![String::new()];
    for _ in 0..3 {
        longest = longest
            .iter()
            .flat_map(|t| CHARS.iter().map(move |c| format!("{t}{c}")))
            .collect();
        texts.extend(longest.iter().cloned());
    }
    for pattern in patterns {
        assert_eq!(pattern::check(pattern), Ok(()), "{pattern}");
        let validator = Pattern::new(pattern);
        for text in &texts {
            assert_eq!(
                validator.is_match(text),
                ecma_matches(pattern, text),
                "{pattern} on {text:?}"
            );
        }
    }
}
