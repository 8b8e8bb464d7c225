//! Misdeclared tools, as an application snapshots their compile errors: the
//! expected output names lines of this crate only, so a toolcall release
//! that moves its own lines leaves it as it is.

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}

/// The application itself runs: its tools dispatch.
#[test]
fn dispatches() {
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_outside-app"))
        .status()
        .expect("the application runs");
    assert!(status.success());
}
