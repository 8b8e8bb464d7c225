//! Misdeclared tools, as an application snapshots their compile errors: the
//! expected output names lines of this crate only, so a toolcall release
//! that moves its own lines leaves it as it is.
//!
//! The cases under `tests/ui` are the workspace's own (its `tests/compile/ui`), so
//! that a case is written once: this crate keeps only its expected output,
//! which differs from the workspace's in what an application can see.

use std::path::Path;

#[test]
fn ui() {
    copy_workspace_cases(Path::new("tests/ui"), Path::new("../../../tests/compile/ui"));
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}

/// Puts beside each expected output of `here` the workspace's case of the
/// same name; an expected output with no case in the workspace fails the
/// test (trybuild would otherwise pass over it in silence).
fn copy_workspace_cases(here: &Path, workspace: &Path) {
    let mut copied = 0;
    for entry in std::fs::read_dir(here).expect("tests/ui is readable") {
        let expected = entry.expect("tests/ui lists").path();
        if expected.extension().is_none_or(|ext| ext != "stderr") {
            continue;
        }
        let name = expected.with_extension("rs");
        let name = name.file_name().expect("a case has a name");
        let case = workspace.join(name);
        assert!(
            case.is_file(),
            "{} has no case: the workspace has no {}",
            expected.display(),
            case.display()
        );
        std::fs::copy(&case, here.join(name)).expect("the case is copied");
        copied += 1;
    }
    assert!(copied > 0, "no expected output under {}", here.display());
}

/// The application itself runs: its tools dispatch.
#[test]
fn dispatches() {
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_outside-app"))
        .status()
        .expect("the application runs");
    assert!(status.success());
}
