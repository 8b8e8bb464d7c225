//! `#[arg(pattern = "...")]`: one dialect for the schema and the validator.
//!
//! The schema sent to a provider or an MCP client carries the pattern as it
//! is written, and its readers take it as ECMA-262 (JSON Schema's dialect,
//! read with the `u` flag). The validator runs Rust's `regex`, which matches
//! in linear time whatever a model sends. A pattern is accepted only where
//! the two read it the same way: it must be ECMA-262, it must be Rust, and
//! it may use nothing whose meaning differs between them. The few classes
//! that both have but define differently (`\d`, `\w`, `\s`, `\b`, `.`) are
//! run by the validator with ECMA-262's definitions (toolcall-core's
//! `Pattern`).
//!
//! Each refusal names the construct and the way to write it in both.

use regex_syntax::ast::{
    self, Assertion, AssertionKind, Ast, ClassSet, ClassSetItem, GroupKind, HexLiteralKind,
    LiteralKind, SpecialLiteralKind,
};

/// Whether the schema's readers and the validator read `source` alike:
/// `Err` with a message saying what differs and how to write it. A pattern
/// neither reads passes here: `regex`'s error, with its caret, says more.
pub(crate) fn check(source: &str) -> Result<(), String> {
    let rust = ast::parse::Parser::new().parse(source);
    let ecma = regress::Regex::with_flags(source, ecma_flags());
    match (rust, ecma) {
        (Ok(tree), ecma) => {
            differing(&tree)?;
            match ecma {
                Ok(_) => Ok(()),
                Err(error) => Err(format!(
                    "`pattern` is not a pattern of JSON Schema's dialect (ECMA-262, as a `u` \
                     regular expression), which the schema's readers use: {error}"
                )),
            }
        }
        (Err(error), Ok(_)) => Err(format!(
            "`pattern` is ECMA-262, but the validator does not run it: {}; toolcall matches with \
             Rust's `regex`, in time linear in what a model sends, which has no lookaround, \
             backreferences, `[\\b]`, `\\0`, `\\cX` or `[^]`; write the rule in the tool's \
             `check` instead, or use `\\x08`, `\\x00`, `\\x01` and `[\\s\\S]` for the last four",
            error.kind()
        )),
        // Neither reads it: the caller reports Rust's own error, which
        // points at the place.
        (Err(_), Err(_)) => Ok(()),
    }
}

/// The flags the schema's readers use: none but `u`.
fn ecma_flags() -> regress::Flags {
    regress::Flags {
        unicode: true,
        ..regress::Flags::default()
    }
}

/// The first construct of `tree` that Rust and ECMA-262 read differently.
fn differing(tree: &Ast) -> Result<(), String> {
    match tree {
        Ast::Empty(_) | Ast::Dot(_) | Ast::ClassPerl(_) => Ok(()),
        Ast::Flags(_) => Err(FLAGS.to_owned()),
        Ast::Literal(literal) => literal_differs(&literal.kind),
        Ast::Assertion(assertion) => assertion_differs(assertion),
        Ast::ClassUnicode(_) => Err(UNICODE_CLASS.to_owned()),
        Ast::ClassBracketed(class) => set_differs(&class.kind),
        Ast::Repetition(repetition) => differing(&repetition.ast),
        Ast::Group(group) => {
            match &group.kind {
                GroupKind::CaptureIndex(_) => {}
                GroupKind::CaptureName {
                    starts_with_p,
                    name,
                } => {
                    if *starts_with_p {
                        return Err(format!(
                            "`pattern` names a group `(?P<{0}>...)`, which ECMA-262 does not \
                             have: write `(?<{0}>...)`",
                            name.name
                        ));
                    }
                }
                GroupKind::NonCapturing(flags) => {
                    if !flags.items.is_empty() {
                        return Err(FLAGS.to_owned());
                    }
                }
            }
            differing(&group.ast)
        }
        Ast::Alternation(alternation) => alternation.asts.iter().try_for_each(differing),
        Ast::Concat(concat) => concat.asts.iter().try_for_each(differing),
    }
}

const FLAGS: &str = "`pattern` sets flags (`(?i)`, `(?i:...)`, `(?s)`, `(?m)`, `(?x)`, `(?u)`), \
    which the schema's readers do not take from a pattern (JSON Schema has no flags): spell the \
    cases out, `[Ss][Vv][Cc]-[a-z]+` for `(?i)svc-[a-z]+`, or accept any case and normalize it in \
    the tool";

const UNICODE_CLASS: &str = "`pattern` uses a Unicode class (`\\p{...}`, `\\pL`), whose names \
    and meaning differ between Rust and ECMA-262 (and which many of the schema's readers do not \
    take): list the characters or ranges in a class, `[A-Za-z\\u00C0-\\u00FF]`";

fn literal_differs(kind: &LiteralKind) -> Result<(), String> {
    match kind {
        LiteralKind::HexBrace(HexLiteralKind::X) => Err(
            "`pattern` writes a character `\\x{...}`, which ECMA-262 does not have: write \
             `\\u{...}` (or `\\xHH` for two digits)"
                .to_owned(),
        ),
        LiteralKind::HexFixed(HexLiteralKind::UnicodeLong)
        | LiteralKind::HexBrace(HexLiteralKind::UnicodeLong) => Err(
            "`pattern` writes a character `\\U...`, which ECMA-262 does not have: write \
             `\\u{...}`"
                .to_owned(),
        ),
        LiteralKind::Special(SpecialLiteralKind::Bell) => {
            Err("`pattern` writes `\\a`, which ECMA-262 does not have: write `\\x07`".to_owned())
        }
        LiteralKind::Special(SpecialLiteralKind::Space) | LiteralKind::Octal => Err(
            "`pattern` writes an escape ECMA-262 does not have: write the character as `\\xHH` \
             or `\\uHHHH`"
                .to_owned(),
        ),
        _ => Ok(()),
    }
}

fn assertion_differs(assertion: &Assertion) -> Result<(), String> {
    match assertion.kind {
        AssertionKind::StartLine
        | AssertionKind::EndLine
        | AssertionKind::WordBoundary
        | AssertionKind::NotWordBoundary => Ok(()),
        AssertionKind::StartText => {
            Err("`pattern` uses `\\A`, which ECMA-262 does not have: write `^`".to_owned())
        }
        AssertionKind::EndText => {
            Err("`pattern` uses `\\z`, which ECMA-262 does not have: write `$`".to_owned())
        }
        _ => Err(
            "`pattern` uses a word-boundary assertion ECMA-262 does not have (`\\b{start}`, \
             `\\<`, `\\>`, ...): write `\\b`"
                .to_owned(),
        ),
    }
}

/// A bracketed class: literals, ranges and `\d`-like classes only.
fn set_differs(set: &ClassSet) -> Result<(), String> {
    match set {
        ClassSet::BinaryOp(_) => Err(
            "`pattern` uses a class operation (`&&`, `--`, `~~`), which ECMA-262 does not have: \
             list the characters the class keeps, or check the rest in the tool's `check`"
                .to_owned(),
        ),
        ClassSet::Item(item) => item_differs(item),
    }
}

fn item_differs(item: &ClassSetItem) -> Result<(), String> {
    match item {
        ClassSetItem::Empty(_) | ClassSetItem::Perl(_) => Ok(()),
        ClassSetItem::Literal(literal) => literal_differs(&literal.kind),
        ClassSetItem::Range(range) => {
            literal_differs(&range.start.kind)?;
            literal_differs(&range.end.kind)
        }
        ClassSetItem::Ascii(_) => Err(
            "`pattern` uses a POSIX class (`[[:alpha:]]`), which ECMA-262 reads as the characters \
             `[:alph` and a `]`: write the ranges, `[A-Za-z]`"
                .to_owned(),
        ),
        ClassSetItem::Unicode(_) => Err(UNICODE_CLASS.to_owned()),
        ClassSetItem::Bracketed(_) => Err(
            "`pattern` nests a class in a class (`[a[bc]]`), where ECMA-262 reads `[` as a \
             character: write one class, `[abc]`, or `\\[` for the character"
                .to_owned(),
        ),
        ClassSetItem::Union(union) => union.items.iter().try_for_each(item_differs),
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn patterns_both_read_alike_are_accepted() {
        for pattern in [
            r"^ORD-[0-9]{4}$",
            r"^[A-Z]{3}$",
            r"^\d+(\.\d{1,2})?$",
            r"\bword\b",
            r"^(?:a|b)*?c.$",
            r"^(?<id>[a-z_]\w*)$",
            r"[\s\S]",
            r"\u0041\u{1F600}\x41\/\.\[\]",
            r"[a\-z]",
            "",
        ] {
            assert_eq!(check(pattern), Ok(()), "{pattern}");
        }
    }

    #[test]
    fn each_construct_read_differently_is_refused_with_its_fix() {
        for (pattern, says) in [
            (r"^(?i)svc-[a-z]+$", "[Ss][Vv][Cc]"),
            (r"(?i:svc)", "spell the cases out"),
            (r"\p{L}+", "list the characters"),
            (r"[\pL]", "list the characters"),
            (r"(?P<id>a)", "write `(?<id>...)`"),
            (r"\Aabc\z", "write `^`"),
            (r"abc\z", "write `$`"),
            (r"[[:alpha:]]", "`[A-Za-z]`"),
            (r"[a-z&&[^x]]", "class operation"),
            (r"[a[bc]]", "one class"),
            (r"\x{41}", "`\\u{...}`"),
            (r"\U00000041", "`\\u{...}`"),
            (r"\a", "`\\x07`"),
            (r"\b{start}x", "write `\\b`"),
            (r"a]", "JSON Schema's dialect"),
            (r"\#", "JSON Schema's dialect"),
            (r"x{2}{3}", "JSON Schema's dialect"),
            (r"(?=a)", "lookaround"),
            (r"(a)\1", "backreferences"),
            (r"[^]", "`[\\s\\S]`"),
        ] {
            let message = check(pattern).expect_err(pattern);
            assert!(message.contains(says), "{pattern}: {message}");
        }
    }
}
