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

/// The most of a conversation id or a caller id that is kept: 1 KiB (a
/// longer one is [`bound`]).
pub const MAX_ID_BYTES: usize = 1024;
/// The most of a provider's call id that is kept: 256 bytes.
pub const MAX_CALL_ID_BYTES: usize = 256;
/// The most of a person's note (a decision's reason) that is kept: 2 KiB.
pub const MAX_NOTE_BYTES: usize = 2048;

/// A text the host supplied (a conversation id, a caller id, a call id, a
/// person's note), bounded where it is stored and logged: itself when it
/// has at most `max` bytes, otherwise its head and the SHA-256 of the
/// whole, `"<head>…[sha256:<64 hex digits> of <n> bytes]"`, at most `max`
/// bytes in all (`max` is raised to 128 if lower).
///
/// The bounded form is computed once, where the text enters, and is the
/// text from then on (the audit, the store, the inbox and the report all
/// see it): two texts that differ anywhere bound to different forms, and
/// one text always to the same.
///
/// ```
/// use toolcall_ledger::echo::bound;
///
/// assert_eq!(bound("chat-1", 1024), "chat-1");
/// let long = "x".repeat(1_000_000);
/// let bounded = bound(&long, 1024);
/// assert!(bounded.len() <= 1024 && bounded.starts_with("xxxx"));
/// assert!(bounded.ends_with("of 1000000 bytes]"));
/// assert_ne!(bound(&format!("{long}y"), 1024), bounded);
/// ```
pub fn bound(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    use sha2::Digest as _;
    let digest = crate::hex::hex(&sha2::Sha256::digest(text.as_bytes()));
    let tail = format!("…[sha256:{digest} of {} bytes]", text.len());
    let head_end = floor_char_boundary(text, max.max(128).saturating_sub(tail.len()));
    Cow::Owned(format!("{}{tail}", &text[..head_end]))
}

/// `text` as a terminal may show it: every control character (newlines,
/// `ESC` of an ANSI sequence, `DEL`, ...) and every character that reorders
/// or hides text (bidirectional overrides and isolates, zero-width ones)
/// written as its escape (`\n`, `\u{1b}`), so that text from a model or an
/// audit file can neither forge a line nor recolour one; then [`cut`] to
/// `max` bytes.
///
/// ```
/// use toolcall_ledger::echo::printable;
///
/// assert_eq!(printable("get_order", 100), "get_order");
/// assert_eq!(
///     printable("x\n\u{1b}[32mok\u{202e}", 100),
///     "x\\n\\u{1b}[32mok\\u{202e}"
/// );
/// ```
pub fn printable(text: &str, max: usize) -> Cow<'_, str> {
    let hides = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
    };
    if !text.chars().any(hides) {
        return cut(text, max);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hides(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(cut(&out, max).into_owned())
}

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
mod bound_tests {
    use super::bound;

    #[test]
    fn a_bounded_text_is_short_distinct_and_stable() {
        for max in [0, 64, 128, 300, 1024] {
            let limit = max.max(128);
            for len in [0, 1, 127, 128, 129, 1023, 1024, 1025, 100_000] {
                let text: String = "é".repeat(len / 2) + &"a".repeat(len % 2);
                let bounded = bound(&text, max);
                if text.len() <= max {
                    assert_eq!(bounded, text);
                } else {
                    assert!(bounded.len() <= limit, "{len} {max}: {}", bounded.len());
                    assert!(bounded.contains("sha256:"));
                    assert_eq!(bound(&text, max), bounded, "stable");
                    let other = format!("{text}b");
                    assert_ne!(bound(&other, max), bounded, "distinct");
                }
            }
        }
    }
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
