//! The output budget: a tool result whose model text is larger than a bound
//! is cut to fit, and stays valid JSON of the same shape.
//!
//! What is cut, in this order, until the text fits: long strings (to their
//! head, with a marker saying how much was left out), then long arrays (to
//! their first items), more and more; then objects of more than ten
//! members, to their first members. Member names (of the members kept), numbers and
//! booleans are never touched, and neither are the members of `data` the
//! pipeline answers with ([`CONTROL`]: what waits for a person, why, and
//! whether the outcome is known), nor the result's code, message,
//! question id and `replayed`. Whatever the budget, the data keeps the
//! head of its strings and the first item of its arrays: when even that
//! does not fit, the smallest form is kept, over the budget, rather than
//! nothing.

use serde_json::{Map, Value};

use crate::audit::Cut;
use crate::result::ToolResult;

/// The members of a failure's `data` the model must act on, never cut:
/// the call a person is asked about (`pending`), why (`reason`,
/// `tainted`), whether its outcome is unknown (`in_doubt`), how a person
/// settled it (`happened`, `edited_by_person`, `edited_arguments`) and
/// which tools exist (`available`).
const CONTROL: [&str; 8] = [
    "pending",
    "reason",
    "tainted",
    "in_doubt",
    "happened",
    "edited_by_person",
    "edited_arguments",
    "available",
];

/// The lengths strings are cut to, tried in turn.
const STRING_CAPS: [usize; 10] = [4096, 2048, 1024, 512, 256, 128, 64, 32, 16, 8];
/// The lengths arrays are cut to, tried with the string caps above.
const ARRAY_CAPS: [usize; 10] = [1000, 500, 200, 100, 50, 20, 10, 5, 2, 1];
/// The numbers of members objects are cut to, with the smallest caps
/// above: only objects of many members lose any (an object of ten members
/// or fewer keeps them all, at any budget).
const MEMBER_CAPS: [usize; 4] = [100, 50, 20, 10];

/// A result whose model text is over `budget` bytes, cut to fit (see the
/// module's docs); what it was goes to `cut`.
pub(crate) fn fit_result(result: &mut ToolResult, budget: usize, cut: &mut Vec<Cut>) {
    let text = result.to_model_text();
    if text.len() <= budget {
        return;
    }
    // An ok result's message becomes the note that it was cut; a
    // failure keeps its code, message and the data the model must act
    // on (`CONTROL`) whole.
    let mut probe = result.clone();
    probe.data = crate::Data::new();
    if result.ok {
        probe.message = format!(
            "The result was cut to fit {budget} bytes ({} in all). Narrow the request \
             (a filter, a page, fewer fields) to get the rest.",
            text.len()
        );
    }
    let protected: &[&str] = if result.ok { &[] } else { &CONTROL };
    let mut data = Map::clone(&result.data);
    let fitted = fit(&mut data, budget, protected, |data| {
        let mut probe = probe.clone();
        let mut data = data.clone();
        data.insert("truncated".into(), Value::Bool(true));
        probe.data = data.into();
        probe.to_model_text().len()
    });
    if fitted.is_none() {
        return;
    }
    cut.push(Cut::of("result", &text));
    data.insert("truncated".into(), Value::Bool(true));
    result.data = data.into();
    result.message = probe.message;
}

/// How a result was made to fit.
#[derive(Debug, PartialEq, Eq)]
struct Fitted {
    /// The size of the model text before, in bytes.
    pub before: usize,
    /// Whether the text fits the bound now (`false`: the smallest form
    /// was kept, over the bound).
    pub fits: bool,
}

/// Cuts `data` until `size(data) <= max_bytes`, where `size` measures the
/// whole model text with this data. The top-level members named in
/// `protected` are kept whole. `None` when it already fits.
fn fit(
    data: &mut Map<String, Value>,
    max_bytes: usize,
    protected: &[&str],
    size: impl Fn(&Map<String, Value>) -> usize,
) -> Option<Fitted> {
    let before = size(data);
    if before <= max_bytes {
        return None;
    }
    let original = std::mem::take(data);
    let caps = STRING_CAPS
        .into_iter()
        .zip(ARRAY_CAPS)
        .map(|(strings, arrays)| (strings, arrays, usize::MAX))
        .chain(MEMBER_CAPS.into_iter().map(|members| (8, 1, members)));
    let mut smallest = Map::new();
    for (strings, arrays, members) in caps {
        let candidate = shrunk(
            &original,
            protected,
            Caps {
                strings,
                arrays,
                members,
            },
        );
        if size(&candidate) <= max_bytes {
            *data = candidate;
            return Some(Fitted { before, fits: true });
        }
        smallest = candidate;
    }
    *data = smallest;
    Some(Fitted {
        before,
        fits: false,
    })
}

#[derive(Clone, Copy)]
struct Caps {
    strings: usize,
    arrays: usize,
    members: usize,
}

/// `data` with every value but the protected ones cut to `caps`, and its
/// members beyond the first `caps.members` unprotected ones left out.
fn shrunk(data: &Map<String, Value>, protected: &[&str], caps: Caps) -> Map<String, Value> {
    let mut kept = 0;
    let mut out = Map::new();
    for (name, value) in data {
        if protected.contains(&name.as_str()) {
            out.insert(name.clone(), value.clone());
            continue;
        }
        if kept == caps.members {
            continue;
        }
        kept += 1;
        let mut value = value.clone();
        shrink(&mut value, caps);
        out.insert(name.clone(), value);
    }
    out
}

/// Cuts every string longer than `caps.strings` characters, every array
/// longer than `caps.arrays` items and every object with more than
/// `caps.members` members, at any depth.
fn shrink(value: &mut Value, caps: Caps) {
    match value {
        Value::String(text) => {
            let chars = text.chars().count();
            if chars > caps.strings {
                let head: String = text.chars().take(caps.strings).collect();
                *text = format!(
                    "{head}…[cut {} of {chars} characters]",
                    chars - caps.strings
                );
            }
        }
        Value::Array(items) => {
            items.truncate(caps.arrays);
            items.iter_mut().for_each(|v| shrink(v, caps));
        }
        Value::Object(members) => {
            if members.len() > caps.members {
                let keep: Vec<String> = members.keys().take(caps.members).cloned().collect();
                members.retain(|name, _| keep.contains(name));
            }
            members.values_mut().for_each(|v| shrink(v, caps));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn size(data: &Map<String, Value>) -> usize {
        serde_json::to_string(data).unwrap().len()
    }

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_result_that_fits_is_left_alone() {
        let mut data = object(json!({"a": "b"}));
        assert_eq!(fit(&mut data, 100, &[], size), None);
        assert_eq!(data, object(json!({"a": "b"})));
    }

    #[test]
    fn long_strings_and_arrays_are_cut_and_the_shape_stays() {
        let reviews: Vec<Value> = (0..2000)
            .map(|i| json!({"id": i, "text": "great product ".repeat(100)}))
            .collect();
        let mut data = object(json!({"product": "P-1", "reviews": reviews}));
        let fitted = fit(&mut data, 8 * 1024, &[], size).unwrap();
        assert!(fitted.fits);
        assert!(fitted.before > 1_000_000);
        assert!(size(&data) <= 8 * 1024, "{}", size(&data));
        assert_eq!(data["product"], "P-1");
        let reviews = data["reviews"].as_array().unwrap();
        assert!(!reviews.is_empty());
        assert_eq!(reviews[0]["id"], 0);
        assert!(reviews[0]["text"].as_str().unwrap().contains("…[cut"));
    }

    #[test]
    fn what_cannot_fit_keeps_its_first_members_never_nothing() {
        let many: Map<String, Value> = (0..5000).map(|i| (format!("k{i:04}"), json!(i))).collect();
        let mut data = many;
        let fitted = fit(&mut data, 256, &[], size).unwrap();
        assert!(fitted.fits, "{}", size(&data));
        assert!(!data.is_empty() && size(&data) <= 256);
        assert_eq!(data["k0000"], 0, "the first members: {data:?}");
    }

    #[test]
    fn at_every_budget_strings_keep_their_head_and_arrays_their_first_item() {
        let text = "a customer wrote this long message ".repeat(20);
        let original = object(json!({
            "order_id": "ORD-1002",
            "messages": [{"from": "customer", "text": text}, {"from": "customer", "text": text}],
        }));
        for budget in [0, 16, 64, 100, 128, 200, 256, 300, 400, 512, 1024] {
            let mut data = original.clone();
            fit(&mut data, budget, &[], size).unwrap();
            assert_eq!(data["order_id"], "ORD-1002", "{budget}");
            let messages = data["messages"].as_array().unwrap();
            assert!(!messages.is_empty(), "{budget}: the first item stays");
            let head = messages[0]["text"].as_str().unwrap();
            assert!(
                head.starts_with("a custo"),
                "{budget}: the head stays: {head}"
            );
        }
    }

    #[test]
    fn control_members_are_never_cut() {
        let pending = json!({"order_id": "ORD-1001", "note": "x".repeat(500)});
        let original = object(json!({
            "pending": pending, "reason": "untrusted_context", "tainted": ["note"],
            "in_doubt": true, "other": "y".repeat(500),
        }));
        for budget in [0, 64, 256, 600] {
            let mut data = original.clone();
            fit(&mut data, budget, &CONTROL, size).unwrap();
            for name in ["pending", "reason", "tainted", "in_doubt"] {
                assert_eq!(data[name], original[name], "{budget}: {name}");
            }
            assert!(data["other"].as_str().unwrap().starts_with('y'));
        }
    }
}
