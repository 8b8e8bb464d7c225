//! Misdeclared tools fail to compile, with a message that says the fix.
//! Each case is `ui/<area>-<misuse>.rs` with its expected `.stderr`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/*.rs");
}
