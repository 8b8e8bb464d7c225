//! Taint from untrusted output: the values a tool marked
//! `#[tool(untrusted_output)]` returned (messages, reviews, web pages, written
//! by strangers) are remembered per session as digests, and a side-effecting
//! call whose arguments carry one of them needs a person's approval. This is
//! the [`Values`](crate::Taint::Values) level, which a caller opts into; the
//! default, [`Session`](crate::Taint::Session), asks for every side effect
//! after any untrusted output and needs none of this.
//!
//! # What is matched
//!
//! Both sides, the strings of an untrusted output and the strings of a
//! call's arguments, are *normalized* the same way before anything is taken
//! from them:
//!
//! * Unicode NFKC (full-width `ＯＲＤ－１００１`, ligatures, superscripts,
//!   circled and mathematical digits become their plain forms), then lower
//!   case (`ß` as `ss`);
//! * invisible characters dropped (zero-width spaces and joiners, soft
//!   hyphens, direction marks, variation selectors, tag characters);
//! * the decimal digits of other scripts (Arabic-Indic, Devanagari, Thai,
//!   ...) read as `0`-`9`, Unicode dashes as `-`, curly apostrophes as `'`,
//!   the ideographic full stop as `.`, and a few Cyrillic and Greek letters
//!   that look like Latin ones (`о`, `а`, `е`, `р`, `с`, `ο`, `ν`, ...) as
//!   those;
//! * defanged links restored (`hxxp`, `[.]`, `(.)`, `{.}`, `[dot]`);
//! * every run of white space one space, and none at either end.
//!
//! Each normalized string then gives its *fingerprints*:
//!
//! * the whole value, when it has at least [`MIN_CHARS`] characters;
//! * for each URL in it, with a scheme (`https://...`) or without one
//!   (`evil.example/pay`, `www.evil.example`): its host on its own (without
//!   `www.`, a port or user info), its host and path, and its host, path,
//!   query and fragment, each without the scheme and without trailing `/`,
//!   `?`, `#` or `&`. Subdomains do not hide a host: a call's `evil.example`
//!   matches an untrusted `pay.evil.example`, and a call's
//!   `pay.evil.example` an untrusted `evil.example`; two hosts that only
//!   share a parent domain (`a.example.org` and `b.example.org`, or
//!   `a.com.br` and `b.com.br`) do not match;
//! * the e-mail addresses in it;
//! * its ids and numbers: runs of letters and digits (`ord1001` is the
//!   letters `ord` and the digits `1001`) joined by one mark of
//!   `- _ . , ' / # :` (a space on either side of it or none: `ORD - 1001`),
//!   read with the separators dropped. Groups of digits joined so, or by a
//!   space alone, are one number (`12,000`, `12.000`, `12 000`, `12_000`,
//!   `12'000`, `120.00` are `12000`); each group of at least [`MIN_CHARS`]
//!   digits is a fingerprint on its own too (`1001 1002`). The whole run and
//!   every stretch of up to four of its parts and numbers that holds a
//!   digit and has at least [`MIN_CHARS`] characters is a fingerprint. So
//!   `ORD-1001`, `ORD_1001`, `ORD.1001`, `ord1001`, `ＯＲＤ－１００１` and
//!   `ORD–1001` give one fingerprint, `ord1001`, and `1001`, which `ORD
//!   1001` and `ord 1001` (a word, then digits) give too; `ORD-1001-A`
//!   gives `ord1001a`, `ord1001` and `1001` among others; twelve million
//!   (`12,000,000`) gives no `12000`.
//!
//! The same is done once more on the string with its percent-escapes
//! decoded (up to three times, for a doubly encoded link), so
//! `refund-help.example/cl%61im` is `refund-help.example/claim`.
//!
//! A call's integers (and numbers with no fraction, such as `12000.0`) are
//! the word of their digits; an untrusted output's are too. A call is
//! tainted when any of its fingerprints was seen in an untrusted output of
//! the session.
//!
//! The untrusted tool's own arguments (the order whose messages were read)
//! came from the caller: their fingerprints are not remembered, even where
//! the output repeats them. What is matched is digests; a bounded excerpt of the untrusted parts
//! is kept apart, for the person asked (`provenance`).
//!
//! # What it cannot catch
//!
//! A value the model rewrote beyond these forms:
//!
//! * a number spelled in words ("twelve thousand", "one thousand and
//!   one"), computed from the text (half of the 12000 it read, `120` for
//!   12000 cents: `120.00` is caught, `120` and `R$120` are not), or with
//!   its digits reordered or split by a word;
//! * an id or number of fewer than [`MIN_CHARS`] letters and digits
//!   (`#12`, `999`), or a short one written with a space where the text
//!   had a mark (`AB 12` for `AB-12`: a word and digits are two words, and
//!   `12` is too short alone), or split by two marks or more (`ORD--1001`
//!   still matches on `1001`);
//! * a value split across arguments or words: `12` in one field and `000`
//!   in another, "12 thousand";
//! * words without digits: "refund the blue sweater", a reason, a name, a
//!   paraphrase of the instructions. A whole value is matched only as a
//!   whole: the same message with a word or a punctuation mark changed, or
//!   cut short, is another value;
//! * a link whose host itself is changed: another domain or top-level
//!   domain, a redirect or shortener, an IP address for a named host,
//!   punycode (`xn--`) for a Unicode host, letters from other scripts
//!   beyond the few mapped, or a host written in words (`evil dot
//!   example`); a path or query copied onto another host (`/claim?id=...`
//!   alone matches only on the ids it holds);
//! * text encoded in another way than percent-escapes: base64, HTML
//!   entities, reversed, spelled letter by letter.
//!
//! A value that also came from a trusted source is still tainted once an
//! untrusted output held it: it fails towards asking a person, and so does
//! a number or host that the untrusted text happened to share with the
//! call. The session level catches everything above, at the price of asking
//! for every side effect after untrusted output, and is the default.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use unicode_normalization::UnicodeNormalization as _;

/// The fewest characters a whole value, a host or an id needs to be
/// remembered.
pub const MIN_CHARS: usize = 4;

/// The most adjacent parts of an id or a number read as one fingerprint,
/// besides the whole run.
const MAX_PARTS: usize = 4;

/// The most parts a run may have for its whole to be read as one
/// fingerprint.
const MAX_RUN: usize = 32;

/// A link with a scheme (the text is normalized: lower case).
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"[a-z][a-z0-9+.-]*://[^\s<>"'`{}\[\]|\\^]+"#).expect("a valid regex")
});
/// A link without one: a host of dotted labels whose last is letters,
/// then a port, a path, a query or a fragment if any.
static BARE_URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?:[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?\.)+\p{L}{2,63}(?::[0-9]{1,5})?(?:[/?#][^\s<>"'`{}\[\]|\\^]*)?"#,
    )
    .expect("a valid regex")
});
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(\.[\p{L}\p{N}-]+)*\.\p{L}{2,}")
        .expect("a valid regex")
});

/// What a link or a sentence may end with that is not part of the link.
const TRAILING: [char; 11] = ['.', ',', ';', ':', '!', '?', ')', '\'', '"', '*', '>'];

/// Which side a string is read for: the domains a host belongs to are
/// read one way in an untrusted output and another in a call, so that a
/// subdomain matches its domain and two siblings do not match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// A string of an untrusted output.
    Untrusted,
    /// A string of a call's arguments.
    Call,
}

/// A fingerprint: hex SHA-256 of the normalized token.
pub(crate) type Fingerprint = String;

fn digest(token: &str) -> Fingerprint {
    crate::hex::hex(&Sha256::digest(
        format!("toolcall-taint\0{token}").as_bytes(),
    ))
}

/// The normalized form of a string, from which fingerprints are taken on
/// both sides (see the module's docs): NFKC, lower case, invisible
/// characters dropped, other scripts' digits, dashes, apostrophes, full
/// stops and a few look-alike letters read as their ASCII forms, defanged
/// links restored, white space collapsed and trimmed.
pub(crate) fn normalize(text: &str) -> String {
    let mut folded = String::with_capacity(text.len());
    if text.is_ascii() {
        folded.extend(text.chars().map(|c| c.to_ascii_lowercase()));
    } else {
        for c in text.chars().filter(|c| !invisible(*c)).nfkc() {
            for c in c.to_lowercase() {
                fold(c, &mut folded);
            }
        }
    }
    let folded = undefang(folded);
    let mut out = String::with_capacity(folded.len());
    for word in folded.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Characters that show nothing: a value with them looks the same to a
/// person and differs to a digest.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{E0000}'..='\u{E0FFF}')
}

/// The first digit (zero) of the decimal digits of other scripts that NFKC
/// leaves as they are: Arabic-Indic, Extended Arabic-Indic, N'Ko,
/// Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada,
/// Malayalam, Sinhala, Thai, Lao, Tibetan, Myanmar (two), Khmer, Mongolian,
/// Limbu, New Tai Lue, Tai Tham (two), Balinese, Sundanese, Lepcha, Ol
/// Chiki, Vai, Saurashtra, Kayah Li, Javanese, Myanmar Extended-B, Cham,
/// Meetei Mayek.
const DIGIT_ZEROS: [u32; 35] = [
    0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6, 0x0D66,
    0x0DE6, 0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0,
];

/// Appends one lower-case character as the fingerprints read it.
fn fold(c: char, out: &mut String) {
    let plain = match c {
        '\u{00DF}' => return out.push_str("ss"),
        '\u{03C2}' => '\u{03C3}',
        '\u{2010}'..='\u{2015}'
        | '\u{2212}'
        | '\u{2E3A}'
        | '\u{2E3B}'
        | '\u{FE58}'
        | '\u{FE63}' => '-',
        '\u{2018}' | '\u{2019}' | '\u{201B}' | '\u{2032}' => '\'',
        '\u{3002}' => '.',
        // The dot of a Turkish capital I, left by lower-casing it.
        '\u{0307}' => return,
        // Cyrillic and Greek letters drawn as Latin ones.
        '\u{0430}' | '\u{03B1}' | '\u{0251}' => 'a',
        '\u{0441}' => 'c',
        '\u{0501}' => 'd',
        '\u{0435}' => 'e',
        '\u{0261}' => 'g',
        '\u{04BB}' => 'h',
        '\u{0456}' | '\u{03B9}' | '\u{0131}' => 'i',
        '\u{0458}' => 'j',
        '\u{03BA}' => 'k',
        '\u{04CF}' => 'l',
        '\u{043E}' | '\u{03BF}' => 'o',
        '\u{0440}' | '\u{03C1}' => 'p',
        '\u{0455}' => 's',
        '\u{03C5}' => 'u',
        '\u{03BD}' => 'v',
        '\u{0445}' => 'x',
        '\u{0443}' => 'y',
        c if c as u32 >= 0x0660 => {
            let code = c as u32;
            match DIGIT_ZEROS
                .iter()
                .find(|zero| (**zero..**zero + 10).contains(&code))
            {
                Some(zero) => char::from(b'0' + (code - zero) as u8),
                None => c,
            }
        }
        c => c,
    };
    out.push(plain);
}

/// Undoes the usual ways of writing a link so that it does not link.
fn undefang(text: String) -> String {
    if !text.contains(['[', '(', '{']) && !text.contains("hxxp") {
        return text;
    }
    let mut text = text.replace("hxxp", "http");
    for (marked, plain) in [
        ("[.]", "."),
        ("(.)", "."),
        ("{.}", "."),
        ("[dot]", "."),
        ("(dot)", "."),
        ("[:]", ":"),
        ("[://]", "://"),
    ] {
        if text.contains(marked) {
            text = text.replace(marked, plain);
        }
    }
    text
}

/// The string with its percent-escapes decoded, if it has any.
fn percent_decoded(text: &str) -> Option<String> {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(high), Some(low)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(high * 16 + low);
            changed = true;
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    changed.then(|| String::from_utf8_lossy(&out).into_owned())
}

/// The fingerprints of one string.
pub(crate) fn of_text(text: &str, side: Side, out: &mut BTreeSet<Fingerprint>) {
    let mut normalized = normalize(text);
    // A doubly encoded link needs two rounds; a third is a bound.
    for round in 0..4 {
        if normalized.chars().count() >= MIN_CHARS {
            out.insert(digest(&normalized));
        }
        tokens(&normalized, side, out);
        match percent_decoded(&normalized) {
            Some(decoded) if round < 3 => normalized = normalize(&decoded),
            _ => break,
        }
    }
}

/// The URLs, e-mail addresses, ids and numbers of a normalized string.
fn tokens(text: &str, side: Side, out: &mut BTreeSet<Fingerprint>) {
    for url in URL.find_iter(text).chain(BARE_URL.find_iter(text)) {
        of_url(url.as_str(), side, out);
    }
    for email in EMAIL.find_iter(text) {
        out.insert(digest(email.as_str()));
    }
    ids(text, out);
}

fn insert(token: &str, out: &mut BTreeSet<Fingerprint>) {
    if token.chars().count() >= MIN_CHARS {
        out.insert(digest(token));
    }
}

/// A URL's host, host and path, and host, path, query and fragment.
fn of_url(url: &str, side: Side, out: &mut BTreeSet<Fingerprint>) {
    let url = url.trim_end_matches(TRAILING);
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let host = host.trim_end_matches('.');
    let host = host
        .strip_prefix("www.")
        .filter(|rest| rest.contains('.'))
        .unwrap_or(host);
    if host.is_empty() {
        return;
    }
    insert(host, out);
    // A host and the domains it belongs to meet across subdomains: an
    // untrusted `pay.evil.example` taints a call's `evil.example`, an
    // untrusted `evil.example` a call's `pay.evil.example`. A call's parent
    // domains are kept apart (`parent\0`), so that two hosts under one
    // domain (`a.example.org`, `b.example.org`, or `a.com.br` and
    // `b.com.br`) share nothing.
    if side == Side::Untrusted && host.contains('.') {
        insert(&format!("parent\0{host}"), out);
    }
    let mut domain = host;
    while let Some((_, parent)) = domain.split_once('.')
        && parent.contains('.')
    {
        match side {
            Side::Untrusted => insert(parent, out),
            Side::Call => insert(&format!("parent\0{parent}"), out),
        }
        domain = parent;
    }
    let path = &tail[..tail.find(['?', '#']).unwrap_or(tail.len())];
    let host_path = format!("{host}{path}");
    insert(host_path.trim_end_matches('/'), out);
    let address = format!("{host}{tail}");
    insert(address.trim_end_matches(['/', '?', '#', '&']), out);
}

/// Whether two parts of letters and digits with `separator` between them
/// are one id or number: nothing (letters then digits, or digits then
/// letters, in one word), one mark of `- _ . , ' / # :` (with a space on
/// either side or none), or a space alone between two groups of digits
/// (`12 000`).
fn joined(before: &str, separator: &str, after: &str) -> bool {
    if separator.is_empty() {
        return true;
    }
    let mut marks = separator.chars().filter(|c| *c != ' ');
    match (marks.next(), marks.next()) {
        (Some(mark), None) => {
            matches!(mark, '-' | '_' | '.' | ',' | '\'' | '/' | '#' | ':') && separator.len() <= 3
        }
        (None, None) => digits(before) && digits(after),
        _ => false,
    }
}

fn digits(part: &str) -> bool {
    part.bytes().all(|b| b.is_ascii_digit())
}

/// Ids and numbers: runs of parts of letters and digits, read without
/// their separators.
fn ids(text: &str, out: &mut BTreeSet<Fingerprint>) {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    let mut digit = false;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            // Letters and digits meet: `ord1001` is `ord` and `1001`,
            // joined by nothing.
            (true, Some(s)) if c.is_ascii_digit() != digit => {
                spans.push((s, i));
                start = Some(i);
            }
            (false, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
        digit = c.is_ascii_digit();
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    let part = |(s, e): (usize, usize)| &text[s..e];
    let mut from = 0;
    for i in 1..=spans.len() {
        let ends = i == spans.len()
            || !joined(
                part(spans[i - 1]),
                &text[spans[i - 1].1..spans[i].0],
                part(spans[i]),
            );
        if ends {
            run(text, &spans[from..i], out);
            from = i;
        }
    }
}

/// The fingerprints of one run of parts. Adjacent groups of digits are
/// one number (`12,000` is `12000`, `2024-05-01` is `20240501`), each of
/// its groups of [`MIN_CHARS`] digits or more a fingerprint too (`1001
/// 1002`). Then every stretch of up to [`MAX_PARTS`] parts and numbers,
/// and the whole run, that holds a digit, read without separators:
/// `ORD-1001-A` gives `ord1001a`, `ord1001`, `1001a` and `1001`.
fn run(text: &str, spans: &[(usize, usize)], out: &mut BTreeSet<Fingerprint>) {
    // (the part or number, whether it holds a digit)
    let mut units: Vec<(&str, String, bool)> = Vec::with_capacity(spans.len());
    for &(s, e) in spans {
        let part = &text[s..e];
        match units.last_mut() {
            Some((last, number, _)) if digits(part) && digits(last) => {
                if number.len() == last.len() {
                    insert(last, out);
                }
                insert(part, out);
                number.push_str(part);
                *last = part;
            }
            _ => units.push((
                part,
                part.to_owned(),
                part.bytes().any(|b| b.is_ascii_digit()),
            )),
        }
    }
    let mut joined = String::new();
    let mut stretch = |units: &[(&str, String, bool)], out: &mut BTreeSet<Fingerprint>| {
        if units.iter().any(|(_, _, digit)| *digit) {
            joined.clear();
            units.iter().for_each(|(_, unit, _)| joined.push_str(unit));
            insert(&joined, out);
        }
    };
    for from in 0..units.len() {
        for to in from + 1..=(from + MAX_PARTS).min(units.len()) {
            stretch(&units[from..to], out);
        }
    }
    if units.len() > MAX_PARTS && units.len() <= MAX_RUN {
        stretch(&units, out);
    }
}

/// The fingerprints of a number: the word of its digits, for an integer
/// or a number with no fraction; else those of its text.
fn of_number(number: &serde_json::Number, side: Side, out: &mut BTreeSet<Fingerprint>) {
    let digits = if number.is_i64() || number.is_u64() {
        number.to_string()
    } else {
        match number.as_f64() {
            Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
            _ => return of_text(&number.to_string(), side, out),
        }
    };
    insert(digits.trim_start_matches('-'), out);
}

/// The fingerprints of every string and number in an untrusted output.
pub(crate) fn of_output(value: &Value, out: &mut BTreeSet<Fingerprint>) {
    match value {
        Value::String(text) => of_text(text, Side::Untrusted, out),
        Value::Number(number) => of_number(number, Side::Untrusted, out),
        Value::Array(items) => items.iter().for_each(|v| of_output(v, out)),
        Value::Object(members) => members.values().for_each(|v| of_output(v, out)),
        _ => {}
    }
}

/// The value at a JSON pointer into a tool's output (its `data` map).
pub(crate) fn part<'a>(output: &'a Map<String, Value>, pointer: &str) -> Option<&'a Value> {
    let rest = pointer.strip_prefix('/')?;
    let (first, rest) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let key = first.replace("~1", "/").replace("~0", "~");
    output.get(&key)?.pointer(rest)
}

/// Whether a part of an output has anything in it a stranger could have
/// written: not null, not blank text, not an empty list or object.
pub(crate) fn has_content(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(text) => !text.trim().is_empty(),
        Value::Array(items) => items.iter().any(has_content),
        Value::Object(members) => members.values().any(has_content),
        Value::Bool(_) | Value::Number(_) => true,
    }
}

/// Those of `parts` (JSON pointers) that carry something in `output`, in
/// the order declared.
pub(crate) fn filled_parts(output: &Map<String, Value>, parts: &[&str]) -> Vec<String> {
    parts
        .iter()
        .filter(|pointer| part(output, pointer).is_some_and(has_content))
        .map(|pointer| (*pointer).to_owned())
        .collect()
}

/// The fingerprints an untrusted output would give for the untrusted tool's
/// own arguments: those it must not remember.
pub(crate) fn of_given(arguments: &Value) -> BTreeSet<Fingerprint> {
    let mut prints = BTreeSet::new();
    of_output(arguments, &mut prints);
    prints
}

/// The fingerprints of a call's arguments, each with the path of the value
/// it came from (`order_id`, `lines[0].sku`).
/// Sorted by path, whatever the order of the members.
pub(crate) fn of_arguments(arguments: &Value) -> Vec<(String, BTreeSet<Fingerprint>)> {
    let mut found = Vec::new();
    walk(arguments, &mut String::new(), &mut found);
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn walk(value: &Value, path: &mut String, found: &mut Vec<(String, BTreeSet<Fingerprint>)>) {
    match value {
        Value::String(_) | Value::Number(_) => {
            let mut prints = BTreeSet::new();
            match value {
                Value::String(text) => of_text(text, Side::Call, &mut prints),
                Value::Number(number) => of_number(number, Side::Call, &mut prints),
                _ => {}
            }
            if !prints.is_empty() {
                found.push((path.clone(), prints));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, path, found);
                path.truncate(len);
            }
        }
        Value::Object(members) => {
            for (name, member) in members {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                walk(member, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
