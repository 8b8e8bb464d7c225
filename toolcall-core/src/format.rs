//! The string formats `#[arg(format = "...")]` checks, as JSON Schema names them.
//!
//! Each check follows the RFC that JSON Schema's draft 2020-12 names for the
//! format, through a maintained parser where one does the job: `uuid` for
//! UUIDs, the RFC 3339 parser of `time` for dates and date-times, and
//! `fluent-uri` (a strict RFC 3986 parser) for URIs. E-mail addresses are
//! checked here, stricter than RFC 5321 on purpose (see
//! [`StringFormat::Email`]): the address parsers at hand take quoted local
//! parts, address literals or non-ASCII text, which this check refuses.
//!
//! The JSON Schema Test Suite's `optional/format` files for these five
//! formats are a test of this module (`tests/format_suite.rs`), and the cases
//! where it departs from them are listed there with the reason.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A string format with a real check behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StringFormat {
    /// `email`: `local@domain`, the local part an ASCII dot-atom of at most
    /// 64 characters, the domain a host name of letters, digits and hyphens
    /// (RFC 5321/5322, with no quoted local parts and no address literals).
    Email,
    /// `uuid`: 32 hex digits in the 8-4-4-4-12 hyphenated form (RFC 4122),
    /// any version and variant, either case.
    Uuid,
    /// `date`: an RFC 3339 full-date, `YYYY-MM-DD`, a real day of a real month.
    Date,
    /// `date-time`: an RFC 3339 date-time with an offset, `2026-11-29T20:08:40Z`;
    /// `T` and `Z` in either case, a leap second (`:60`) only as the last
    /// second of a month in UTC.
    DateTime,
    /// `uri`: a URI with a scheme (RFC 3986 `URI`), every character in the
    /// RFC's grammar: no white space, no non-ASCII text, no malformed
    /// percent-escapes, ports of digits, bracketed hosts that are IP literals.
    Uri,
}

impl StringFormat {
    /// Every format with a check here, in the order JSON Schema's
    /// draft 2020-12 lists them.
    pub const ALL: [StringFormat; 5] = [
        StringFormat::DateTime,
        StringFormat::Date,
        StringFormat::Email,
        StringFormat::Uri,
        StringFormat::Uuid,
    ];

    /// The format's name in JSON Schema, or `None` for a name with no check here.
    pub fn from_name(name: &str) -> Option<StringFormat> {
        StringFormat::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
    }

    /// The format's name in JSON Schema.
    pub fn as_str(self) -> &'static str {
        match self {
            StringFormat::Email => "email",
            StringFormat::Uuid => "uuid",
            StringFormat::Date => "date",
            StringFormat::DateTime => "date-time",
            StringFormat::Uri => "uri",
        }
    }

    /// What a value of the format is, in words, as the definitions sent to
    /// a model say it: "an email address".
    pub fn describe(self) -> &'static str {
        match self {
            StringFormat::Email => "an email address",
            StringFormat::Uuid => "a UUID (8-4-4-4-12 hexadecimal digits)",
            StringFormat::Date => "a date, YYYY-MM-DD",
            StringFormat::DateTime => "an RFC 3339 date-time with an offset",
            StringFormat::Uri => "an absolute URI (RFC 3986)",
        }
    }

    /// Whether `text` is of this format.
    pub fn accepts(self, text: &str) -> bool {
        match self {
            StringFormat::Email => is_email(text),
            StringFormat::Uuid => is_uuid(text),
            StringFormat::Date => is_date(text),
            StringFormat::DateTime => is_date_time(text),
            StringFormat::Uri => fluent_uri::Uri::parse(text).is_ok(),
        }
    }
}

fn is_uuid(text: &str) -> bool {
    // `try_parse` also takes the simple, braced and URN forms; of those
    // only the hyphenated one is 36 characters long.
    text.len() == 36 && uuid::Uuid::try_parse(text).is_ok()
}

fn is_date_time(text: &str) -> bool {
    // The parser takes any one character between the date and the time (RFC
    // 3339 lets applications choose a space); the format's grammar has `T`.
    matches!(text.as_bytes().get(10), Some(b'T' | b't'))
        && OffsetDateTime::parse(text, &Rfc3339).is_ok()
}

fn is_date(text: &str) -> bool {
    // A full-date is the date of a date-time; check it as one at midnight UTC.
    text.len() == 10 && is_date_time(&format!("{text}T00:00:00Z"))
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

#[cfg(test)]
mod tests {
    use super::StringFormat::*;

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
            (Uri, "http://[2001:db8::7]:8080/c=GB?objectClass?one", true),
            (Uri, "http://example.com:abc/path", false),
            (Uri, "https://example.org/foobar\u{AE}.txt", false),
            (Uri, "https://[@example.org/test.txt", false),
            (Uri, "http:/[::1]", false),
            (Uri, "http://[::ffff:01.2.3.4]", false),
            (DateTime, "1998-12-31T15:59:60.123-08:00", true),
            (DateTime, "2016-06-30T23:59:60z", true),
            (DateTime, "1998-12-31T23:58:60Z", false),
            (DateTime, "1998-12-31T22:59:60Z", false),
            (DateTime, "1998-12-30T23:59:60Z", false),
            (DateTime, "1985-04-12T00:59:59.999999999999999Z", true),
            (DateTime, "1990-12-31T15:59:59-24:00", false),
            (Date, "0400-02-29", true),
            (Date, "2100-02-29", false),
            (Date, "2020-01-01Z", false),
            (Date, "+2020-01-01", false),
            (Uuid, "urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8", false),
            (Uuid, "{67e55044-10b1-426f-9247-bb680e5fe0c8}", false),
            (Uuid, "67e55044-10b1-426f-9247-bb680e5fe0c8\n", false),
        ];
        for (format, text, valid) in cases {
            assert_eq!(format.accepts(text), valid, "{} {text:?}", format.as_str());
        }
    }
}

#[cfg(test)]
mod names {
    use super::StringFormat;

    #[test]
    fn every_format_is_found_by_its_name_and_described() {
        for format in StringFormat::ALL {
            assert_eq!(StringFormat::from_name(format.as_str()), Some(format));
            assert!(format.describe().starts_with("a"), "{format:?}");
        }
        for unknown in ["time", "hostname", "Email", ""] {
            assert_eq!(StringFormat::from_name(unknown), None, "{unknown}");
        }
    }
}
