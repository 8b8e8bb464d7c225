//! Nothing: the cases are under `ui/`, run by `ui.rs` (trybuild).
