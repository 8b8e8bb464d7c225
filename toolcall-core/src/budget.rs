//! The output budget: a tool result whose model text is larger than a bound
//! is cut to fit, and stays valid JSON of the same shape.
//!
//! What is cut, in this order, until the text fits: long strings (to their
//! head, with a marker saying how much was left out), then long arrays (to
//! their first items), more and more. Member names, numbers, booleans and
//! the result's code and message are never touched. When even the smallest
//! form does not fit (thousands of members), `data` is left with the
//! truncation note alone.

use serde_json::{Map, Value};

/// The lengths strings are cut to, tried in turn.
const STRING_CAPS: [usize; 9] = [4096, 2048, 1024, 512, 256, 128, 64, 32, 16];
/// The lengths arrays are cut to, tried with the string caps above.
const ARRAY_CAPS: [usize; 9] = [1000, 500, 200, 100, 50, 20, 10, 5, 1];

/// How a result was made to fit.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Fitted {
    /// The size of the model text before, in bytes.
    pub before: usize,
}

/// Cuts `data` until `size(data) <= max_bytes`, where `size` measures the
/// whole model text with this data. `None` when it already fits.
pub(crate) fn fit(
    data: &mut Map<String, Value>,
    max_bytes: usize,
    size: impl Fn(&Map<String, Value>) -> usize,
) -> Option<Fitted> {
    let before = size(data);
    if before <= max_bytes {
        return None;
    }
    let original = std::mem::take(data);
    for (strings, arrays) in STRING_CAPS.into_iter().zip(ARRAY_CAPS) {
        let mut candidate = Value::Object(original.clone());
        shrink(&mut candidate, strings, arrays);
        let Value::Object(candidate) = candidate else {
            unreachable!("an object stays an object")
        };
        if size(&candidate) <= max_bytes {
            *data = candidate;
            return Some(Fitted { before });
        }
    }
    Some(Fitted { before })
}

/// Cuts every string longer than `strings` characters and every array
/// longer than `arrays` items, at any depth.
fn shrink(value: &mut Value, strings: usize, arrays: usize) {
    match value {
        Value::String(text) => {
            let chars = text.chars().count();
            if chars > strings {
                let head: String = text.chars().take(strings).collect();
                *text = format!("{head}…[cut {} of {chars} characters]", chars - strings);
            }
        }
        Value::Array(items) => {
            items.truncate(arrays);
            items.iter_mut().for_each(|v| shrink(v, strings, arrays));
        }
        Value::Object(members) => members
            .values_mut()
            .for_each(|v| shrink(v, strings, arrays)),
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
        assert_eq!(fit(&mut data, 100, size), None);
        assert_eq!(data, object(json!({"a": "b"})));
    }

    #[test]
    fn long_strings_and_arrays_are_cut_and_the_shape_stays() {
        let reviews: Vec<Value> = (0..2000)
            .map(|i| json!({"id": i, "text": "great product ".repeat(100)}))
            .collect();
        let mut data = object(json!({"product": "P-1", "reviews": reviews}));
        let fitted = fit(&mut data, 8 * 1024, size).unwrap();
        assert!(fitted.before > 1_000_000);
        assert!(size(&data) <= 8 * 1024, "{}", size(&data));
        assert_eq!(data["product"], "P-1");
        let reviews = data["reviews"].as_array().unwrap();
        assert!(!reviews.is_empty());
        assert_eq!(reviews[0]["id"], 0);
        assert!(reviews[0]["text"].as_str().unwrap().contains("…[cut"));
    }

    #[test]
    fn what_cannot_fit_leaves_empty_data() {
        let many: Map<String, Value> = (0..5000).map(|i| (format!("k{i}"), json!(i))).collect();
        let mut data = many;
        assert!(fit(&mut data, 256, size).is_some());
        assert!(data.is_empty());
    }
}
