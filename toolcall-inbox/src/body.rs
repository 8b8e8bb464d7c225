//! The one reader of the JSON bodies the inbox takes (a decision, a stop,
//! an enable, a revocation), as strict as the pipeline is with a model's
//! arguments: one JSON object, no member named twice at any depth (two
//! readers that keep different duplicates decide different things: a map
//! keeps the last, so `{"decision": "deny", "decision": "approve"}`
//! approved), nested at most [`MAX_DEPTH`] levels. The bound on its size
//! is the router's ([`MAX_BODY`](crate::MAX_BODY)).

use serde_json::{Map, Value};
use toolcall_core::__private::members_of;
use toolcall_core::canonical::canonical_json_from_text;

/// How deep a body may nest, its own object counted: an edit's arguments
/// as deep as the pipeline takes a model's by default (32 levels), inside
/// the body's object.
pub(crate) const MAX_DEPTH: usize = 33;

/// Why a body is not one the inbox reads.
#[derive(Debug, PartialEq)]
pub(crate) enum Unread {
    /// Not JSON, or not an object: what is wrong.
    NotAnObject(String),
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A member named twice: `field` is the body's member it is (or is
    /// inside), `why` the reader's words, which name it.
    Twice { field: String, why: String },
}

/// The members of the JSON object `bytes`, each read once.
pub(crate) fn object(bytes: &[u8]) -> Result<Map<String, Value>, Unread> {
    let text = std::str::from_utf8(bytes)
        .map_err(|error| Unread::NotAnObject(format!("not UTF-8: {error}")))?;
    // Before any parse: a body of brackets costs nothing to refuse.
    if nesting(text) > MAX_DEPTH {
        return Err(Unread::TooDeep);
    }
    let members = members_of(text).map_err(|error| {
        if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
            Unread::NotAnObject("the body is not an object".to_owned())
        } else {
            Unread::NotAnObject(error.to_string())
        }
    })?;
    let mut fields = Map::new();
    for (name, raw) in members {
        if fields.contains_key(name.as_ref()) {
            return Err(Unread::Twice {
                why: format!("duplicate member `{name}`"),
                field: name.into_owned(),
            });
        }
        // The strict reading refuses a name given twice further in (an
        // edit's arguments), and says which.
        let value = canonical_json_from_text(raw.get())
            .and_then(|_| serde_json::from_str::<Value>(raw.get()))
            .map_err(|error| {
                let why = error.to_string();
                if why.starts_with("duplicate member") {
                    Unread::Twice {
                        field: name.to_string(),
                        why,
                    }
                } else {
                    Unread::NotAnObject(format!("{name:?}: {why}"))
                }
            })?;
        fields.insert(name.into_owned(), value);
    }
    Ok(fields)
}

/// How deep `text` nests its arrays and objects, brackets in strings left
/// out: for a text that is not JSON, an estimate the parse then refuses.
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn twice(text: &str) -> Option<(String, String)> {
        match object(text.as_bytes()) {
            Err(Unread::Twice { field, why }) => Some((field, why)),
            _ => None,
        }
    }

    #[test]
    fn a_member_named_twice_is_refused_at_any_depth_and_named() {
        let (field, why) = twice(r#"{"decision": "deny", "decision": "approve"}"#).unwrap();
        assert_eq!(field, "decision");
        assert!(why.contains("`decision`"), "{why}");
        let (field, why) = twice(r#"{"arguments": {"a": [{"to": 1, "to": 2}]}}"#).unwrap();
        assert_eq!(field, "arguments");
        assert!(why.contains("`to`"), "{why}");
        // Escapes are read before names are compared.
        assert!(twice(r#"{"note": 1, "\u006eote": 2}"#).is_some());
        assert_eq!(
            object(br#"{"decision": "deny", "note": "x"}"#).unwrap()["decision"],
            "deny"
        );
    }

    #[test]
    fn what_is_not_one_object_within_the_bounds_is_refused() {
        for text in [
            "",
            "[1]",
            "\"x\"",
            "{",
            "{} {}",
            "{\"a\": 1e400}",
            "\u{feff}{}",
        ] {
            assert!(
                matches!(object(text.as_bytes()), Err(Unread::NotAnObject(_))),
                "{text:?}"
            );
        }
        assert!(matches!(
            object(b"{\"a\": \xff}"),
            Err(Unread::NotAnObject(_))
        ));
        let deep = |levels: usize| {
            format!(
                "{{\"a\": {}1{}}}",
                "[".repeat(levels - 1),
                "]".repeat(levels - 1)
            )
        };
        assert!(object(deep(MAX_DEPTH).as_bytes()).is_ok());
        assert_eq!(object(deep(MAX_DEPTH + 1).as_bytes()), Err(Unread::TooDeep));
        // Brackets in a string are text.
        let text = format!("{{\"a\": \"{}\\\"{}\"}}", "[".repeat(100), "{".repeat(100));
        assert!(object(text.as_bytes()).is_ok());
    }
}
