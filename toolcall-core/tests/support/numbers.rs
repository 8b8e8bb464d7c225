//! JSON numbers written many ways, for the property tests of canonical
//! keys: toolcall-core's RFC 8785 tests and the workspace's properties
//! include this file.

use proptest::prelude::*;

/// 100 written every way JSON allows: the integer first, then fractions
/// and exponents.
pub const ONE_HUNDRED: [&str; 11] = [
    "100",
    "100.0",
    "1e2",
    "1E2",
    "1e+2",
    "1.00e+2",
    "10000e-2",
    "0.1e3",
    "100.000000000000000000000",
    "1000000000000000000000e-19",
    "0.0000000000000000000001e24",
];

/// Ways to write a double `f` as a JSON number: Rust's `{:e}`, `{:E}`,
/// `{:?}` and `{}`, 17 and 25 significant digits, the digits of `{:e}`
/// with trailing zeros, as an integer mantissa, and after a leading `0.`.
pub fn forms_of(f: f64) -> Vec<String> {
    let exponential = format!("{f:e}");
    let (mantissa, exponent) = exponential.split_once('e').expect("an exponent");
    let exponent: i32 = exponent.parse().expect("an exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let fraction = digits.len() as i32 - 1;
    let with_point = if mantissa.contains('.') {
        format!("{mantissa}000")
    } else {
        format!("{mantissa}.000")
    };
    let mut forms = vec![
        exponential.clone(),
        format!("{f:E}"),
        format!("{f:?}"),
        format!("{f}"),
        format!("{f:.16e}"),
        format!("{f:.24e}"),
        format!("{sign}{with_point}e{exponent}"),
        format!("{sign}{with_point}E+{exponent}").replace("E+-", "E-"),
        format!("{sign}{digits}e{}", exponent - fraction),
        format!("{sign}0.{digits}e{}", exponent + 1),
    ];
    if f != 0.0 {
        // No leading zero in JSON: `000e-2` is not a number.
        forms.push(format!("{sign}{digits}00e{}", exponent - fraction - 2));
    }
    forms
}

/// A JSON number's text: a sign, up to 25 integer digits, up to 25
/// fraction digits and an exponent below `exponents`.
pub fn number_text(exponents: u32) -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        "(0|[1-9][0-9]{0,24})",
        prop::option::of("[0-9]{1,25}"),
        prop::option::of((
            prop_oneof![Just("e"), Just("E")],
            prop_oneof![Just(""), Just("+"), Just("-")],
            0u32..exponents,
        )),
    )
        .prop_map(|(negative, int, fraction, exponent)| {
            let mut text = String::from(if negative { "-" } else { "" });
            text.push_str(&int);
            if let Some(fraction) = fraction {
                text.push('.');
                text.push_str(&fraction);
            }
            if let Some((e, sign, magnitude)) = exponent {
                text.push_str(&format!("{e}{sign}{magnitude}"));
            }
            text
        })
}
