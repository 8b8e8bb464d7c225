//! Fuzz target: a short conversation of arbitrary calls (tool, approval,
//! session, raw argument bytes) through one dispatcher; see `../harness.rs`
//! for the input format and what is checked.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "../harness.rs"]
mod harness;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime")
    })
}

fuzz_target!(|data: &[u8]| harness::run(data, runtime()));
