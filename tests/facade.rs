//! The facade names each of its exports: a glob would hand applications
//! every name toolcall-core adds, and `public-api/toolcall.txt` would stop
//! stating the user's API.

#[test]
fn the_facade_re_exports_by_name_only() {
    let source = include_str!("../toolcall/src/lib.rs");
    // Top-level re-exports only: `__private`, what `#[tool]` expands to,
    // is hidden and no API.
    let globs: Vec<&str> = source
        .lines()
        .filter(|line| line.starts_with("pub use") && line.contains("::*"))
        .collect();
    assert!(globs.is_empty(), "glob re-exports in the facade: {globs:?}");
    // A multi-line `pub use a::{...}` with a `*` inside is a glob too.
    let mut in_use = false;
    for line in source.lines() {
        if line.starts_with("pub use") {
            in_use = !line.ends_with(';');
        } else if in_use {
            assert!(!line.contains('*'), "a glob in a re-export list: {line}");
            in_use = !line.ends_with(';');
        }
    }
}

#[test]
fn what_an_application_uses_is_named_by_the_facade() {
    // Each of these is a compile error if the facade drops it.
    use toolcall::{
        Approvals, AuditRecord, AuditSink, BuildError, Call, Caller, Code, Ctx, Decision,
        Dispatcher, DispatcherBuilder, JsonLinesAudit, MemoryAudit, Policy, Registry, Rejection,
        Settings, Taint, ToolError, ToolResult, providers, store, tool, tools,
    };
    let _ = (
        std::any::type_name::<Approvals>(),
        std::any::type_name::<AuditRecord>(),
        std::any::type_name::<dyn AuditSink>(),
        std::any::type_name::<BuildError>(),
        std::any::type_name::<Call<'static>>(),
        std::any::type_name::<Caller>(),
        std::any::type_name::<Code>(),
        std::any::type_name::<Ctx<()>>(),
        std::any::type_name::<Decision<'static>>(),
        std::any::type_name::<Dispatcher<()>>(),
        std::any::type_name::<DispatcherBuilder<()>>(),
        std::any::type_name::<JsonLinesAudit>(),
        std::any::type_name::<MemoryAudit>(),
        std::any::type_name::<Policy>(),
        std::any::type_name::<Registry>(),
        std::any::type_name::<Rejection>(),
        std::any::type_name::<Settings>(),
        std::any::type_name::<Taint>(),
        std::any::type_name::<ToolError>(),
        std::any::type_name::<ToolResult>(),
        std::any::type_name::<store::MemoryStore>(),
        std::any::type_name::<providers::export::Format>(),
    );
    /// Says hello.
    #[tool]
    fn hello() -> Result<String, Rejection> {
        Ok("hello".to_owned())
    }
    assert_eq!(tools![hello].unwrap().len(), 1);
}

/// README's first program is `compile/ui/pass/first-program.rs`, which the `ui`
/// test compiles and runs (its `main` checks the three answers): the
/// program a newcomer copies first builds and says what README says.
#[test]
fn readme_s_first_program_is_the_one_that_compiles_and_runs() {
    let readme = include_str!("../README.md");
    let program = include_str!("compile/ui/pass/first-program.rs");
    let first = readme
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README shows a Rust program");
    assert_eq!(
        first, program,
        "README's first Rust block and tests/compile/ui/pass/first-program.rs differ"
    );
    assert!(
        program.lines().count() <= 30,
        "the first program stays short"
    );
}
