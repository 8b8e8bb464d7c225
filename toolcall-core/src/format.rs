//! The string formats `#[arg(format = "...")]` checks, as JSON Schema names them.

/// A string format with a real check behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// `email`: `local@domain`, the local part a dot-atom, the domain a host name (RFC 5321/5322, no quoted or IP forms).
    Email,
    /// `uuid`: 32 hex digits in the 8-4-4-4-12 hyphenated form (RFC 4122).
    Uuid,
    /// `date`: an RFC 3339 full-date, `YYYY-MM-DD`, a real day of a real month.
    Date,
    /// `date-time`: an RFC 3339 date-time with an offset, `2026-11-29T20:08:40Z`.
    DateTime,
    /// `uri`: an absolute URI (RFC 3986): a scheme, `:`, and no white space or control characters.
    Uri,
}

impl Format {
    /// The format's name in JSON Schema, or `None` for a name with no check here.
    pub fn from_name(name: &str) -> Option<Format> {
        Some(match name {
            "email" => Format::Email,
            "uuid" => Format::Uuid,
            "date" => Format::Date,
            "date-time" => Format::DateTime,
            "uri" => Format::Uri,
            _ => return None,
        })
    }

    /// The format's name in JSON Schema.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Email => "email",
            Format::Uuid => "uuid",
            Format::Date => "date",
            Format::DateTime => "date-time",
            Format::Uri => "uri",
        }
    }

    /// Whether `text` is of this format.
    pub fn accepts(self, text: &str) -> bool {
        match self {
            Format::Email => is_email(text),
            Format::Uuid => is_uuid(text),
            Format::Date => is_date(text.as_bytes()),
            Format::DateTime => is_date_time(text),
            Format::Uri => is_uri(text),
        }
    }
}

fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

fn digits(bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(bytes.iter().fold(0, |n, b| n * 10 + u32::from(b - b'0')))
}

fn is_date(bytes: &[u8]) -> bool {
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (
        digits(&bytes[..4]),
        digits(&bytes[5..7]),
        digits(&bytes[8..]),
    ) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

fn is_date_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || !matches!(bytes[10], b'T' | b't') {
        return false;
    }
    is_date(&bytes[..10]) && is_time(&bytes[11..])
}

/// `hh:mm:ss[.frac](Z|±hh:mm)`.
fn is_time(bytes: &[u8]) -> bool {
    if bytes.len() < 9 || bytes[2] != b':' || bytes[5] != b':' {
        return false;
    }
    let (Some(hour), Some(minute), Some(second)) = (
        digits(&bytes[..2]),
        digits(&bytes[3..5]),
        digits(&bytes[6..8]),
    ) else {
        return false;
    };
    // A leap second (60) is valid RFC 3339.
    if hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let mut rest = &bytes[8..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            matches!((digits(&[*h1, *h2]), digits(&[*m1, *m2])), (Some(h), Some(m)) if h <= 23 && m <= 59)
        }
        _ => false,
    }
}

fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    const ATEXT: &str = "!#$%&'*+-/=?^_`{|}~";
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && local.split('.').all(|atom| {
            !atom.is_empty()
                && atom
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ATEXT.contains(c))
        });
    local_ok && is_hostname(domain)
}

fn is_hostname(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut scheme_chars = scheme.chars();
    let scheme_ok = scheme_chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme_chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    scheme_ok
        && !rest.is_empty()
        && rest.chars().all(|c| {
            !c.is_whitespace()
                && !c.is_control()
                && !matches!(c, '<' | '>' | '"' | '{' | '}' | '|' | '\\' | '^' | '`')
        })
        && percent_escapes_are_whole(rest)
}

fn percent_escapes_are_whole(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

#[cfg(test)]
mod tests {
    use super::Format::*;

    #[test]
    fn each_format_accepts_and_refuses() {
        let cases = [
            (Email, "ana@example.com", true),
            (Email, "first.last+tag@sub.example.org", true),
            (Email, "no-at-sign", false),
            (Email, "two@@example.com", false),
            (Email, "a b@example.com", false),
            (Email, ".dot@example.com", false),
            (Email, "a@-bad-.com", false),
            (Uuid, "67e55044-10b1-426f-9247-bb680e5fe0c8", true),
            (Uuid, "67E55044-10B1-426F-9247-BB680E5FE0C8", true),
            (Uuid, "67e5504410b1426f9247bb680e5fe0c8", false),
            (Uuid, "67e55044-10b1-426f-9247-bb680e5fe0cg", false),
            (Date, "2024-02-29", true),
            (Date, "2023-02-29", false),
            (Date, "2026-13-01", false),
            (Date, "2026-11-31", false),
            (Date, "2026-1-01", false),
            (DateTime, "2026-11-29T20:08:40Z", true),
            (DateTime, "2026-11-29t20:08:40.123+01:00", true),
            (DateTime, "2016-12-31T23:59:60Z", true),
            (DateTime, "2026-11-29 20:08:40Z", false),
            (DateTime, "2026-11-29T20:08:40", false),
            (DateTime, "2026-11-29T24:00:00Z", false),
            (DateTime, "2026-11-29T20:08:40.Z", false),
            (Uri, "https://example.com/a?b=c#d", true),
            (Uri, "mailto:ana@example.com", true),
            (Uri, "urn:isbn:0451450523", true),
            (Uri, "/relative/path", false),
            (Uri, "https://exa mple.com", false),
            (Uri, "1http://example.com", false),
            (Uri, "https://example.com/%zz", false),
        ];
        for (format, text, valid) in cases {
            assert_eq!(format.accepts(text), valid, "{} {text:?}", format.as_str());
        }
    }
}
