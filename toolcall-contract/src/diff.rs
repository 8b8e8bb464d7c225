//! Where two JSON documents differ, as lines a reviewer reads: `added`,
//! `removed` or `changed`, each with a JSON Pointer. Arrays of named things
//! (tool definitions: `name`, or `function.name` in OpenAI's format) are
//! matched by name, so a tool added in the middle is one `added` line, not a
//! change of every tool after it.

use serde_json::Value;

/// Every difference between `old` and `new`, a line each, in document
/// order (`changed: /a/x (2 -> 3)`, `added: /c`, `removed: /d`); a tool in
/// an array of named tools is named by its name in the pointer. Empty when
/// they are equal.
pub fn changes(old: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    values(old, new, &mut String::new(), &mut out);
    out
}

/// Appends to `out` every difference between `old` and `new` below `path`.
fn values(old: &Value, new: &Value, path: &mut String, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, x) in a {
                let len = push(path, key);
                match b.get(key) {
                    Some(y) => values(x, y, path, out),
                    None => out.push(format!("removed: {path}")),
                }
                path.truncate(len);
            }
            for key in b.keys().filter(|key| !a.contains_key(*key)) {
                let len = push(path, key);
                out.push(format!("added: {path}"));
                path.truncate(len);
            }
        }
        (Value::Array(a), Value::Array(b)) if named(a) && named(b) => {
            for x in a {
                let name = name_of(x).unwrap_or_default();
                let len = push(path, name);
                match b.iter().find(|y| name_of(y) == Some(name)) {
                    Some(y) => values(x, y, path, out),
                    None => out.push(format!("removed: {path}")),
                }
                path.truncate(len);
            }
            for y in b {
                let name = name_of(y).unwrap_or_default();
                if !a.iter().any(|x| name_of(x) == Some(name)) {
                    let len = push(path, name);
                    out.push(format!("added: {path}"));
                    path.truncate(len);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let len = push(path, &i.to_string());
                values(x, y, path, out);
                path.truncate(len);
            }
            for i in b.len()..a.len() {
                out.push(format!("removed: {path}/{i}"));
            }
            for i in a.len()..b.len() {
                out.push(format!("added: {path}/{i}"));
            }
        }
        (x, y) if x != y => out.push(format!(
            "changed: {} ({} -> {})",
            shown(path),
            short(x),
            short(y)
        )),
        _ => {}
    }
}

fn shown(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

/// Appends `/segment` (escaped as JSON Pointer says) and returns the length
/// to truncate back to.
fn push(path: &mut String, segment: &str) -> usize {
    let len = path.len();
    path.push('/');
    path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    len
}

/// Whether every item has a distinct name.
fn named(items: &[Value]) -> bool {
    let names: Vec<&str> = items.iter().filter_map(name_of).collect();
    names.len() == items.len()
        && !items.is_empty()
        && names
            .iter()
            .enumerate()
            .all(|(i, n)| !names[..i].contains(n))
}

fn name_of(item: &Value) -> Option<&str> {
    item.get("name")
        .or_else(|| item.get("function").and_then(|f| f.get("name")))
        .and_then(Value::as_str)
}

/// A value in a line: short ones whole, long ones by their kind.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 60 {
        return text;
    }
    match value {
        Value::String(s) => format!("a string of {} characters", s.chars().count()),
        Value::Array(a) => format!("an array of {} items", a.len()),
        Value::Object(o) => format!("an object of {} members", o.len()),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn diff(old: Value, new: Value) -> Vec<String> {
        changes(&old, &new)
    }

    #[test]
    fn tools_are_matched_by_name() {
        let old = json!([{"name": "a", "x": 1}, {"name": "b", "x": 2}]);
        let new = json!([{"name": "c", "x": 0}, {"name": "a", "x": 1}, {"name": "b", "x": 3}]);
        assert_eq!(diff(old, new), ["changed: /b/x (2 -> 3)", "added: /c"]);
    }

    #[test]
    fn openai_tools_are_named_by_their_function() {
        let old = json!([{"type": "function", "function": {"name": "a", "strict": true}}]);
        let new = json!([{"type": "function", "function": {"name": "a", "strict": false}}]);
        assert_eq!(
            diff(old, new),
            ["changed: /a/function/strict (true -> false)"]
        );
    }

    #[test]
    fn members_and_items_added_and_removed() {
        let old = json!({"p": {"a": 1, "b/c": 2}, "l": [1, 2]});
        let new = json!({"p": {"a": 1, "d": 2}, "l": [1]});
        assert_eq!(
            diff(old, new),
            ["removed: /p/b~1c", "added: /p/d", "removed: /l/1"]
        );
        assert!(diff(json!({"a": [1]}), json!({"a": [1]})).is_empty());
    }
}
