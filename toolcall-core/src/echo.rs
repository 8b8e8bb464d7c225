//! Bounded echo: what the pipeline repeats of the model's input (a tool
//! name, a member name, a value in an error message) is cut to a bound, so
//! that no answer or audit record grows with the input.
//!
//! A cut text keeps its head and its tail and says how much it left out:
//! `"aaaa…[cut 204,780 of 204,800 bytes]…aaaa"`.

use std::borrow::Cow;

/// The most of a name (a tool's, a member's) that is repeated: 128 bytes.
pub const MAX_NAME_ECHO: usize = 128;
/// The most of one problem or value that is repeated: 256 bytes.
pub const MAX_VALUE_ECHO: usize = 256;

/// `text`, or its head and tail with a marker when it is longer than `max` bytes.
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let tail_len = max / 4;
    let head_len = max - tail_len;
    let head_end = floor_char_boundary(text, head_len);
    let tail_start = ceil_char_boundary(text, text.len() - tail_len);
    let left_out = tail_start - head_end;
    Cow::Owned(format!(
        "{}…[cut {} of {} bytes]…{}",
        &text[..head_end],
        thousands(left_out),
        thousands(text.len()),
        &text[tail_start..]
    ))
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept() {
        assert_eq!(cut("get_order", 128), "get_order");
        assert_eq!(cut(&"x".repeat(128), 128).len(), 128);
    }

    #[test]
    fn long_text_keeps_head_and_tail_and_says_how_much_was_cut() {
        let text = format!("{}{}", "a".repeat(200_000), "b".repeat(4_800));
        let cut = cut(&text, 128);
        assert!(cut.starts_with(&"a".repeat(96)), "{cut}");
        assert!(cut.ends_with(&"b".repeat(32)), "{cut}");
        assert!(cut.contains("…[cut 204,672 of 204,800 bytes]…"), "{cut}");
        assert!(cut.len() < 200);
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "é".repeat(1000);
        for max in [1, 2, 3, 127, 128, 129] {
            let cut = cut(&text, max);
            assert!(cut.contains("bytes]"), "{max}");
        }
    }
}
