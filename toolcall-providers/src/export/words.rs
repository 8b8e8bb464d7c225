//! The words a description gains when a constraint moves into it.

use serde_json::Value;

/// `text` ending with a full stop (or other closing punctuation).
pub(crate) fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() || text.ends_with(['.', '!', '?']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// The description `own`, followed by the notes of the constraints moved into it.
pub(crate) fn describe(own: Option<&Value>, notes: &[String]) -> Option<String> {
    let own = own.and_then(Value::as_str);
    if notes.is_empty() {
        return own.map(str::to_owned);
    }
    let mut text = own.map(sentence).unwrap_or_default();
    for note in notes {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(note);
    }
    Some(text)
}

/// A constraint, in words, as a description states it once its keyword is gone.
pub(crate) fn moved_sentence(keyword: &str, value: &Value) -> String {
    let count = |unit: &str| {
        let n = value.as_u64().unwrap_or(0);
        format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
    };
    match keyword {
        "minLength" => format!("Must have at least {}.", count("character")),
        "maxLength" => format!("Must have at most {}.", count("character")),
        "minItems" => format!("Must have at least {}.", count("item")),
        "maxItems" => format!("Must have at most {}.", count("item")),
        "minProperties" => format!("Must have at least {}.", count("member")),
        "maxProperties" => format!("Must have at most {}.", count("member")),
        "minimum" => format!("Must be at least {value}."),
        "maximum" => format!("Must be at most {value}."),
        "exclusiveMinimum" => format!("Must be greater than {value}."),
        "exclusiveMaximum" => format!("Must be less than {value}."),
        "multipleOf" => format!("Must be a multiple of {value}."),
        "uniqueItems" if value == &Value::Bool(true) => "The items must be distinct.".into(),
        "pattern" => format!(
            "Must match the regular expression {}.",
            value.as_str().unwrap_or_default()
        ),
        "format" => {
            let name = value.as_str().unwrap_or_default();
            let what = match toolcall_core::fields::StringFormat::from_name(name) {
                Some(format) => format.describe().to_owned(),
                None if name == "time" => "an RFC 3339 time".to_owned(),
                None => format!("in the `{name}` format"),
            };
            format!("Must be {what}.")
        }
        _ => format!("Must also satisfy the JSON Schema keyword `{keyword}`: {value}."),
    }
}

/// The values of an enum, for a sentence.
pub(crate) fn list_values(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
