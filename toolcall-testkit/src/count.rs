//! The body of a tool whose backend only counts what reached it: the tests
//! check that count, never the answer's wording.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use serde_json::Value;

/// A count of the calls that reached a backend.
pub trait Count {
    /// One more.
    fn one_more(&self);
}

impl Count for AtomicU32 {
    fn one_more(&self) {
        self.fetch_add(1, Ordering::SeqCst);
    }
}

impl Count for AtomicU64 {
    fn one_more(&self) {
        self.fetch_add(1, Ordering::SeqCst);
    }
}

impl Count for AtomicUsize {
    fn one_more(&self) {
        self.fetch_add(1, Ordering::SeqCst);
    }
}

/// One more call on `count`, answered with `answer`.
pub fn counted<E>(count: &impl Count, answer: Value) -> Result<Value, E> {
    count.one_more();
    Ok(answer)
}
