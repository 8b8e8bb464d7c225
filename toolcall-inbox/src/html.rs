//! HTML written as Rust: every piece of text that is not a literal of this
//! crate goes through [`esc`], the one escaping function, whether it ends
//! up in an element or an attribute; and text shown to a person goes
//! through [`shown`] (or [`Html::text`]), which first makes visible what
//! would reorder or hide it.

use std::fmt::Write as _;

use toolcall_core::__private::echo::printable;

/// Escapes `text` for an HTML element or a quoted attribute value: `&`,
/// `<`, `>`, `"` and `'` become character references, so nothing in it can
/// open a tag, close an attribute or start an entity.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text shown to a person (a name, a reason, a note, a caller, anything a
/// person, a model or the store supplied), for an element or an
/// attribute: every control character and every character that reorders
/// or hides text (a bidirectional override, a zero-width space) written as
/// its escape (`\u{202e}`), so that a name cannot read backwards or hide
/// a part of itself; then [`esc`]aped.
pub(crate) fn shown(text: &str) -> String {
    esc(&printable(text, usize::MAX))
}

/// A path segment: everything but ASCII letters, digits, `-` and `_`
/// percent-encoded, so an id from the store cannot change the path.
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// A page being written. [`raw`](Html::raw) takes markup this crate wrote;
/// [`text`](Html::text) takes text shown to a person, [`lines`](Html::lines)
/// text of several lines, [`value`](Html::value) a value the browser sends
/// back or a script reads, each escaped.
#[derive(Default)]
pub struct Html(String);

impl Html {
    /// Markup written by this crate (literals and already-escaped text).
    pub fn raw(&mut self, markup: &str) -> &mut Self {
        self.0.push_str(markup);
        self
    }

    /// Text from outside (a model, a person, the store) shown to a person:
    /// [`shown`].
    pub fn text(&mut self, text: &str) -> &mut Self {
        self.0.push_str(&shown(text));
        self
    }

    /// Text of several lines (a `<pre>`, a description of paragraphs):
    /// each line [`shown`], the line breaks kept.
    pub fn lines(&mut self, text: &str) -> &mut Self {
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.0.push('\n');
            }
            self.0.push_str(&shown(line));
        }
        self
    }

    /// A value the browser sends back as it is (a form's field, a link) or
    /// a script compares (an id): only [`esc`]aped, so that it comes back
    /// unchanged. Never for text a person reads.
    pub fn value(&mut self, value: &str) -> &mut Self {
        self.0.push_str(&esc(value));
        self
    }

    /// An element with escaped text content and literal attributes.
    pub fn el(&mut self, open: &str, text: &str, close: &str) -> &mut Self {
        self.raw(open).text(text).raw(close)
    }

    /// The markup.
    pub fn finish(self) -> String {
        self.0
    }
}

/// `ms` since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// `ms` since the Unix epoch in RFC 3339, for `<time datetime>`.
pub fn rfc3339(ms: u64) -> String {
    let text = utc(ms);
    format!("{}T{}Z", &text[..10], &text[11..19])
}

/// How long until (or since) `target`, roughly: `4 min 10 s`, `2 h 5 min`.
pub fn duration(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
    }
}

/// Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day
/// count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_that_could_open_markup_is_escaped() {
        assert_eq!(
            esc(r#"<script>alert("x") & 'y'</script>"#),
            "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;"
        );
        let mut html = Html::default();
        html.el("<td>", "<b>bold</b>", "</td>");
        assert_eq!(html.finish(), "<td>&lt;b&gt;bold&lt;/b&gt;</td>");
    }

    #[test]
    fn what_reorders_or_hides_text_is_shown_as_its_escape() {
        let mut html = Html::default();
        html.el("<b>", "eve\u{202e}lin\u{7} <x>\u{200b}", "</b>")
            .lines("{\n  \"a\u{2066}\"\n}")
            .value("v\u{202e}\"");
        assert_eq!(
            html.finish(),
            "<b>eve\\u{202e}lin\\u{7} &lt;x&gt;\\u{200b}</b>{\n  &quot;a\\u{2066}&quot;\n}v\u{202e}&quot;"
        );
    }

    #[test]
    fn a_segment_cannot_leave_its_place_in_the_path() {
        assert_eq!(segment("ab12-_"), "ab12-_");
        assert_eq!(segment("../x?y#z"), "%2E%2E%2Fx%3Fy%23z");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn times_are_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_796_045_102_000), "2026-11-30 13:25:02 UTC");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(duration(65_000), "1 min 5 s");
        assert_eq!(duration(7_500_000), "2 h 5 min");
    }
}
