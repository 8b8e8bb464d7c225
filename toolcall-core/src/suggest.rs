//! The closest name to one that is not known: the "did you mean" of an
//! unknown member, tool or policy limit. Names are compared by their letters
//! and digits in lower case (`orderId` is `order_id`), by prefix (`amount`
//! for `amount_cents`), then by edit distance, and a name is suggested only
//! when it is close enough to be a likely typo.

/// The candidate closest to `name`, if it is close enough to be a likely typo
/// or a different spelling (`orderId` for `order_id`, `amount` for `amount_cents`).
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str> + Clone,
) -> Option<&'a str> {
    // Field, tool and limit names are almost always short and ASCII:
    // compared in buffers on the stack. Any other name takes the general way.
    closest_short(name, candidates.clone()).unwrap_or_else(|| closest_any(name, candidates))
}

/// The longest name, in letters and digits, [`closest_short`] compares.
const SHORT: usize = 48;

/// [`closest`] when `name` and every candidate are ASCII with at most
/// [`SHORT`] letters and digits: no allocation. `None` when one is not.
fn closest_short<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<Option<&'a str>> {
    let mut wanted = [0u8; SHORT];
    let len = short_letters(name, &mut wanted)?;
    let wanted = &wanted[..len];
    let mut have = [0u8; SHORT];
    let mut row = [0usize; SHORT + 1];
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let len = short_letters(candidate, &mut have)?;
        let have = &have[..len];
        let allowed = (wanted.len().max(have.len()) / 3).max(1);
        let distance = distance_of(wanted, have, wanted.len(), allowed, |a, b| {
            // Most names compared are not near misses: the letters one has
            // and the other lacks already say so, without the table.
            if bag_distance(a, b) > allowed {
                return allowed + 1;
            }
            edit_distance(a, b, &mut row)
        });
        if let Some(distance) = distance
            && distance <= allowed
            && best.is_none_or(|(d, _)| distance < d)
        {
            best = Some((distance, candidate));
        }
    }
    Some(best.map(|(_, candidate)| candidate))
}

/// The letters and digits of an ASCII `name` in lower case, written to
/// `out`: how many. `None` for a name that is not ASCII or has more.
fn short_letters(name: &str, out: &mut [u8; SHORT]) -> Option<usize> {
    if !name.is_ascii() {
        return None;
    }
    let mut len = 0;
    for byte in name.bytes().filter(u8::is_ascii_alphanumeric) {
        *out.get_mut(len)? = byte.to_ascii_lowercase();
        len += 1;
    }
    Some(len)
}

/// A lower bound of the edit distance of two ASCII names of at most
/// [`SHORT`] bytes: the letters one has more of than the other, counted
/// with their repeats, on the side that has more such letters. Each edit
/// changes each side's count by at most one.
fn bag_distance(a: &[u8], b: &[u8]) -> usize {
    let mut counts = [0i8; 128];
    for &byte in a {
        counts[usize::from(byte & 0x7f)] += 1;
    }
    for &byte in b {
        counts[usize::from(byte & 0x7f)] -= 1;
    }
    // Each letter's count is taken once, where it is first met.
    let mut more = 0;
    for &byte in a {
        let count = &mut counts[usize::from(byte & 0x7f)];
        if *count > 0 {
            more += usize::from(count.unsigned_abs());
            *count = 0;
        }
    }
    let mut fewer = 0;
    for &byte in b {
        let count = &mut counts[usize::from(byte & 0x7f)];
        if *count < 0 {
            fewer += usize::from(count.unsigned_abs());
            *count = 0;
        }
    }
    more.max(fewer)
}

/// [`closest`] of any names: Unicode letters, any length.
fn closest_any<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    // One buffer for the name, one for each candidate in turn, one row of
    // the distance table: an unknown member costs no allocation per field.
    let mut wanted = Normalized::of(name);
    let mut have = Normalized::default();
    let mut row = Vec::new();
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        have.set(candidate);
        let allowed = (wanted.bytes.max(have.bytes) / 3).max(1);
        let distance = if have.ascii && wanted.ascii {
            // Field names almost always are ASCII: compared as bytes.
            distance_of(
                &wanted.letters,
                &have.letters,
                wanted.bytes,
                allowed,
                |a, b| edit_distance_in(a, b, &mut row),
            )
        } else {
            wanted.widen();
            have.widen();
            distance_of(&wanted.chars, &have.chars, wanted.bytes, allowed, |a, b| {
                edit_distance_in(a, b, &mut row)
            })
        };
        let Some(distance) = distance else {
            continue;
        };
        if distance <= allowed && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// How far `have` is from `wanted` (`wanted_bytes` long in UTF-8): 0 for
/// the same, 1 for a prefix either way (of a name of 3 bytes or more), else
/// the edit distance; `None` when the lengths alone put it over `allowed`.
fn distance_of<T: PartialEq>(
    wanted: &[T],
    have: &[T],
    wanted_bytes: usize,
    allowed: usize,
    edit: impl FnOnce(&[T], &[T]) -> usize,
) -> Option<usize> {
    Some(if have == wanted {
        0
    } else if wanted_bytes >= 3 && (have.starts_with(wanted) || wanted.starts_with(have)) {
        1
    } else if wanted.len().abs_diff(have.len()) > allowed {
        // The distance is at least the difference in length.
        return None;
    } else {
        edit(wanted, have)
    })
}

/// A name's letters and digits in lower case (as bytes while the name is
/// ASCII, as characters once it is not, or once it is compared with a name
/// that is not), and their length in UTF-8.
#[derive(Default)]
struct Normalized {
    letters: Vec<u8>,
    chars: Vec<char>,
    ascii: bool,
    bytes: usize,
}

impl Normalized {
    fn of(name: &str) -> Self {
        let mut normalized = Normalized::default();
        normalized.set(name);
        normalized
    }

    fn set(&mut self, name: &str) {
        self.letters.clear();
        self.chars.clear();
        self.ascii = name.is_ascii();
        if self.ascii {
            // No Unicode tables needed.
            self.letters.extend(
                name.bytes()
                    .filter(u8::is_ascii_alphanumeric)
                    .map(|b| b.to_ascii_lowercase()),
            );
            self.bytes = self.letters.len();
            return;
        }
        self.chars.extend(
            name.chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase),
        );
        self.bytes = self.chars.iter().map(|c| c.len_utf8()).sum();
    }

    /// Its letters as characters too, to be compared with a name that is not ASCII.
    fn widen(&mut self) {
        if self.ascii && self.chars.len() != self.letters.len() {
            self.chars.clear();
            self.chars
                .extend(self.letters.iter().map(|&b| char::from(b)));
        }
    }
}

/// [`edit_distance`] in a row grown to fit `b`.
fn edit_distance_in<T: PartialEq>(a: &[T], b: &[T], row: &mut Vec<usize>) -> usize {
    row.resize(row.len().max(b.len() + 1), 0);
    edit_distance(a, b, row)
}

/// Levenshtein distance between `a` and `b`, in `row`'s memory (at least
/// one more than `b` is long).
fn edit_distance<T: PartialEq>(a: &[T], b: &[T], row: &mut [usize]) -> usize {
    for (j, cell) in row.iter_mut().enumerate().take(b.len() + 1) {
        *cell = j;
    }
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Asserts what each name of `cases` is suggested among `candidates`.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_suggests(candidates: &[&str], cases: &[(&str, Option<&str>)]) {
    for &(name, want) in cases {
        assert_eq!(closest(name, candidates.iter().copied()), want, "{name}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_misses_only() {
        assert_suggests(
            &["order_id", "amount_cents", "currency", "reason"],
            &[
                ("orderId", Some("order_id")),
                ("amount", Some("amount_cents")),
                ("currncy", Some("currency")),
                ("Reason", Some("reason")),
                ("force", None),
                ("x", None),
            ],
        );
    }

    /// The suggestion as it was first written (a `String` per name and two
    /// vectors per comparison): what the allocation-free one must agree with.
    fn closest_as_written<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
        fn normalize(name: &str) -> String {
            name.chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect()
        }
        fn distance(a: &str, b: &str) -> usize {
            let b: Vec<char> = b.chars().collect();
            let mut row: Vec<usize> = (0..=b.len()).collect();
            for (i, ca) in a.chars().enumerate() {
                let mut diagonal = row[0];
                row[0] = i + 1;
                for (j, cb) in b.iter().enumerate() {
                    let above = row[j + 1];
                    row[j + 1] = (diagonal + usize::from(ca != *cb))
                        .min(row[j] + 1)
                        .min(above + 1);
                    diagonal = above;
                }
            }
            row[b.len()]
        }
        let wanted = normalize(name);
        let mut best: Option<(usize, &str)> = None;
        for &candidate in candidates {
            let have = normalize(candidate);
            let d = if have == wanted {
                0
            } else if wanted.len() >= 3 && (have.starts_with(&wanted) || wanted.starts_with(&have))
            {
                1
            } else {
                distance(&wanted, &have)
            };
            let allowed = (wanted.len().max(have.len()) / 3).max(1);
            if d <= allowed && best.is_none_or(|(b, _)| d < b) {
                best = Some((d, candidate));
            }
        }
        best.map(|(_, candidate)| candidate)
    }

    #[test]
    fn the_letters_apart_count_repeats_on_the_side_with_more() {
        for (a, b, apart) in [
            ("force", "orderid", 4),
            ("orderid", "force", 4),
            ("abc", "abd", 1),
            ("aab", "b", 2),
            ("currncy", "currency", 1),
            ("", "reason", 6),
            ("reason", "reason", 0),
        ] {
            assert_eq!(bag_distance(a.as_bytes(), b.as_bytes()), apart, "{a} {b}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_letters_apart_never_exceed_the_edit_distance(
            a in "[a-z0-9]{0,48}",
            b in "[a-z0-9]{0,48}",
        ) {
            let (a, b) = (a.as_bytes(), b.as_bytes());
            let mut row = [0usize; SHORT + 1];
            proptest::prop_assert!(bag_distance(a, b) <= edit_distance(a, b, &mut row));
        }

        #[test]
        fn suggestions_agree_with_the_first_version(
            name in proptest::prop_oneof![
                "[a-zA-Z_ÉéßİΣς0-9-]{0,14}",
                // Near misses of the fields: cut, doubled, misspelt, recased.
                "(ord|orde|orderid|order_i|oder_id|ORDER_ID|amount|amnt_cents|amountcent|cents|curr|curency|currencyy|Currency|reasn|reason_|rason|REASON)[a-z_]{0,2}",
                // Longer than the names compared on the stack.
                "[a-z_]{44,60}",
            ],
            mut candidates in proptest::collection::vec(
                proptest::prop_oneof!["[a-zA-Z_ÉéßİΣς0-9]{0,14}", "[a-z]{40,60}"],
                0..6,
            ),
        ) {
            candidates.extend(["order_id", "amount_cents", "currency", "reason"].map(String::from));
            let candidates: Vec<&str> = candidates.iter().map(String::as_str).collect();
            proptest::prop_assert_eq!(
                closest(&name, candidates.iter().copied()),
                closest_as_written(&name, &candidates)
            );
        }
    }
}
