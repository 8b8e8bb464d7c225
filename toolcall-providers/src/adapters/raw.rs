//! The text of each member of a message, as the provider wrote it.
//!
//! [`Provider::calls_str`](super::Provider::calls_str) reads a message that
//! `serde_json` has already parsed (and so checked to be JSON, at most 128
//! levels deep) and needs the exact text of some of its values: the
//! arguments of each call, which go to the pipeline as
//! [`Arguments::Raw`](toolcall_core::Arguments::Raw) so that its limits and
//! its refusal of duplicate members apply to what the model wrote, not to a
//! map that kept one of two members. These functions cut that text into
//! members and items, one level at a time, as [`RawValue`]s: `serde_json`
//! skips each value without building it and without recursion, whatever its
//! depth.
//!
//! The text must be one JSON value; anything else is `None`, never a panic.

use serde_json::value::RawValue;

/// The members of the object `text`, in order, every one of them even when
/// a name comes twice: each name (decoded) and the text of its value.
/// `None` when `text` is not an object.
pub(super) fn members(text: &str) -> Option<Vec<(String, &str)>> {
    let members = toolcall_core::__private::members_of(text).ok()?;
    Some(
        members
            .into_iter()
            .map(|(name, value)| (name.into_owned(), value.get()))
            .collect(),
    )
}

/// The text of each item of the array `text`, in order. `None` when `text`
/// is not an array.
pub(super) fn items(text: &str) -> Option<Vec<&str>> {
    let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
    Some(items.into_iter().map(RawValue::get).collect())
}

/// `text` without the JSON white space around it.
pub(super) fn trim(text: &str) -> &str {
    text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_keep_their_text_and_every_name() {
        let text =
            r#" { "a" : {"x": [1, "]}", {"y": null}]} , "b\u0022c":-1.5e3,"a":"q\"}" , "e": [] } "#;
        let members = members(text).unwrap();
        let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b\"c", "a", "e"]);
        let values: Vec<&str> = members.iter().map(|(_, v)| *v).collect();
        assert_eq!(
            values,
            [
                r#"{"x": [1, "]}", {"y": null}]}"#,
                "-1.5e3",
                r#""q\"}""#,
                "[]"
            ]
        );
        assert_eq!(super::members("{}").unwrap(), []);
        assert_eq!(super::members("[1]"), None);
    }

    #[test]
    fn items_keep_their_text() {
        assert_eq!(
            items(r#"[ {"a": "[,]"} ,true,"\\", [[]] ]"#).unwrap(),
            [r#"{"a": "[,]"}"#, "true", r#""\\""#, "[[]]"]
        );
        assert_eq!(items("[]").unwrap(), Vec::<&str>::new());
        assert_eq!(items("{}"), None);
    }

    #[test]
    fn deep_nesting_is_skipped_without_recursion() {
        let deep = format!("[{}{}]", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(items(&deep).unwrap().len(), 1);
        let deep = format!(
            r#"{{"a": {}null{}}}"#,
            "{\"b\":".repeat(100_000),
            "}".repeat(100_000)
        );
        assert_eq!(members(&deep).unwrap().len(), 1);
    }

    #[test]
    fn broken_text_is_none_not_a_panic() {
        for text in [
            "{",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1",
            "[1,",
            "\"",
            "{\"a\" 1}",
            "[1 2]",
        ] {
            assert!(members(text).is_none() && items(text).is_none(), "{text}");
        }
    }
}
