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
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use crate::audit::lock;
use crate::store::{Key, KeyHasher};

/// Locks of the count, so that threads running different calls rarely
/// share one (every call takes its key's lock twice).
const SHARDS: usize = 16;

/// How many calls of each key are deciding or running, in this dispatcher.
/// Keys are digests: the store's seeded fold hashes them, not SipHash.
#[derive(Debug, Default)]
pub(super) struct Twins {
    shards: [Shard; SHARDS],
    hasher: KeyHasher,
}

/// One lock's keys, on a cache line of its own, so that two threads
/// taking two locks do not contend for one line.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Shard(Mutex<HashMap<Digest, usize, KeyHasher>>);

/// A key as the count holds it: its digest's 32 bytes, hashed as one write
/// (a [`Key`] also carries its 64 hex digits, which the count never reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Digest([u8; 32]);

impl Hash for Digest {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(&self.0);
    }
}

impl Twins {
    /// The counts of `key`'s shard, locked. (Bits 32 and up pick the
    /// shard: the shard's map places keys by the low bits of its own hash.)
    fn counts(&self, key: &Digest) -> MutexGuard<'_, HashMap<Digest, usize, KeyHasher>> {
        lock(&self.shards[((self.hasher.hash_one(key) >> 32) as usize) % SHARDS].0)
    }

    /// Counts a call of `key` as active until the returned guard leaves or
    /// is dropped (the call answered, or was cancelled).
    pub fn enter(&self, key: &Key) -> Active<'_> {
        let mut active = Active {
            twins: self,
            key: Digest(*key.digest()),
            counted: false,
        };
        active.rejoin();
        active
    }

    /// Whether any call of `key` is active.
    pub fn any_active(&self, key: &Key) -> bool {
        let key = Digest(*key.digest());
        self.counts(&key).get(&key).is_some_and(|n| *n > 0)
    }
}

/// One call of a key, counted as active while it is.
#[derive(Debug)]
pub(super) struct Active<'a> {
    twins: &'a Twins,
    key: Digest,
    counted: bool,
}

impl Active<'_> {
    /// Stops counting this call: it waits for its twins.
    pub fn leave(&mut self) {
        if !self.counted {
            return;
        }
        self.counted = false;
        let mut active = self.twins.counts(&self.key);
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
        *self.twins.counts(&self.key).entry(self.key).or_insert(0) += 1;
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::Twins;
    use crate::store::Key;

    fn key(text: &str) -> Key {
        Key::sha256(text)
    }

    #[test]
    fn a_key_is_active_while_any_of_its_calls_is() {
        let twins = Twins::default();
        let k = key("k");
        let mut first = twins.enter(&k);
        let second = twins.enter(&k);
        assert!(twins.any_active(&k) && !twins.any_active(&key("other")));
        first.leave();
        first.leave();
        assert!(twins.any_active(&k), "the second is still active");
        drop(second);
        assert!(!twins.any_active(&k));
        first.rejoin();
        assert!(twins.any_active(&k));
        drop(first);
        assert!(!twins.any_active(&k));
        assert!(
            twins.shards.iter().all(|s| super::lock(&s.0).is_empty()),
            "nothing is kept"
        );
    }

    #[test]
    fn keys_spread_over_the_locks_and_each_is_counted_apart() {
        let twins = Twins::default();
        // Digests that differ in their last bytes only.
        let keys: Vec<Key> = (0..256)
            .map(|i| format!("{i:064x}").parse().expect("a key"))
            .collect();
        let guards: Vec<_> = keys.iter().map(|k| twins.enter(k)).collect();
        let used = twins
            .shards
            .iter()
            .filter(|s| !super::lock(&s.0).is_empty())
            .count();
        // 256 keys over 16 locks: all are used but for a poor spread.
        assert!(used >= 12, "{used} of 16 locks used");
        assert!(keys.iter().all(|k| twins.any_active(k)));
        drop(guards);
        assert!(keys.iter().all(|k| !twins.any_active(k)));
    }
}
