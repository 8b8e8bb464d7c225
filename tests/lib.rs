//! Integration tests of toolcall live in `tests/*.rs` beside this file.
