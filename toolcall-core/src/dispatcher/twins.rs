//! Identical calls in flight in this dispatcher, by idempotency key: what
//! the loop guard asks before it says `LOOP_DETECTED`.
//!
//! The store counts every identical call when it reaches stage 4, so that a
//! conversation's count is the same in every process that shares the store.
//! A count over the limit means a loop only when the calls before it have
//! been answered: a call whose twins are still running (sixteen identical
//! calls sent at once) waits for them instead. Calls are counted here from
//! before their store count until their answer, so a twin that is counted
//! is always seen; calls that wait are not counted, so that calls waiting
//! together never wait for each other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::audit::lock;
use crate::store::KeyHasher;

/// How many calls of each key are deciding or running, in this dispatcher.
/// Keys are hex digests: the store's seeded fold hashes them, not SipHash.
#[derive(Debug, Default)]
pub(super) struct Twins {
    active: Mutex<HashMap<Arc<str>, usize, KeyHasher>>,
}

impl Twins {
    /// Counts a call of `key` as active until the returned guard leaves or
    /// is dropped (the call answered, or was cancelled).
    pub fn enter(&self, key: &Arc<str>) -> Active<'_> {
        let mut active = Active {
            twins: self,
            key: Arc::clone(key),
            counted: false,
        };
        active.rejoin();
        active
    }

    /// Whether any call of `key` is active.
    pub fn any_active(&self, key: &str) -> bool {
        lock(&self.active).get(key).is_some_and(|n| *n > 0)
    }
}

/// One call of a key, counted as active while it is.
#[derive(Debug)]
pub(super) struct Active<'a> {
    twins: &'a Twins,
    key: Arc<str>,
    counted: bool,
}

impl Active<'_> {
    /// Stops counting this call: it waits for its twins.
    pub fn leave(&mut self) {
        if !self.counted {
            return;
        }
        self.counted = false;
        let mut active = lock(&self.twins.active);
        if let Some(n) = active.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                active.remove(&self.key);
            }
        }
    }

    /// Counts this call again: it decides, or runs.
    pub fn rejoin(&mut self) {
        if self.counted {
            return;
        }
        self.counted = true;
        *lock(&self.twins.active)
            .entry(self.key.clone())
            .or_insert(0) += 1;
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Twins;

    #[test]
    fn a_key_is_active_while_any_of_its_calls_is() {
        let twins = Twins::default();
        let mut first = twins.enter(&Arc::from("k"));
        let second = twins.enter(&Arc::from("k"));
        assert!(twins.any_active("k") && !twins.any_active("other"));
        first.leave();
        first.leave();
        assert!(twins.any_active("k"), "the second is still active");
        drop(second);
        assert!(!twins.any_active("k"));
        first.rejoin();
        assert!(twins.any_active("k"));
        drop(first);
        assert!(!twins.any_active("k"));
        assert!(super::lock(&twins.active).is_empty(), "nothing is kept");
    }
}
