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
struct Shard(Mutex<Counts>);

// The lock, the inline key and its count, and the overflow's pointer: one
// line, or the inline slot saves nothing.
const _: () = assert!(std::mem::size_of::<Shard>() == 64);

/// A key as the count holds it: its digest's 32 bytes, hashed as one write
/// (a [`Key`] also carries its 64 hex digits, which the count never reads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Digest([u8; 32]);

impl Hash for Digest {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(&self.0);
    }
}

/// One shard's counts. A shard mostly holds one key at a time, or none
/// (sixteen shards, a few calls in flight), so that key is counted in the
/// shard's own cache line, beside its lock: a call then touches one line
/// to enter and one to leave, where a map's header, control bytes and
/// bucket were three, cold by the time the shard's next call comes. The
/// other keys of a crowded shard are in `more`. A key is counted in one
/// place only: in `first` while its count there is above 0, else in `more`.
#[derive(Debug, Default)]
struct Counts {
    /// The key counted inline, and its count (0: the slot is free).
    first: (Digest, usize),
    /// Every other key with calls in flight. Boxed, so that the shard
    /// stays one line (a map's header is 32 bytes, beside the slot's 40);
    /// made the first time two keys share the shard.
    #[allow(clippy::box_collection)]
    more: Option<Box<HashMap<Digest, usize, KeyHasher>>>,
}

impl Counts {
    /// One more call of `key`.
    fn add(&mut self, key: Digest) {
        let (first, count) = &mut self.first;
        if *count > 0 && *first == key {
            *count += 1;
            return;
        }
        let in_more = self.more.as_mut().and_then(|more| more.get_mut(&key));
        match in_more {
            Some(n) => *n += 1,
            None if *count == 0 => self.first = (key, 1),
            None => {
                *self.more.get_or_insert_default().entry(key).or_insert(0) += 1;
            }
        }
    }

    /// One call of `key` fewer; a key with none left is forgotten.
    fn remove(&mut self, key: &Digest) {
        let (first, count) = &mut self.first;
        if *count > 0 && first == key {
            *count -= 1;
            return;
        }
        if let Some(more) = self.more.as_mut()
            && let Some(n) = more.get_mut(key)
        {
            *n -= 1;
            if *n == 0 {
                more.remove(key);
            }
        }
    }

    /// How many calls of `key` are counted.
    fn get(&self, key: &Digest) -> usize {
        let (first, count) = &self.first;
        if *count > 0 && first == key {
            return *count;
        }
        self.more
            .as_ref()
            .and_then(|more| more.get(key).copied())
            .unwrap_or(0)
    }

    /// Whether no key is counted.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.first.1 == 0 && self.more.as_ref().is_none_or(|more| more.is_empty())
    }
}

impl Twins {
    /// The counts of `key`'s shard, locked. (Bits 32 and up pick the
    /// shard; a crowded shard's map hashes its keys with a seed of its own.)
    fn counts(&self, key: &Digest) -> MutexGuard<'_, Counts> {
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
        self.counts(&key).get(&key) > 0
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
        self.twins.counts(&self.key).remove(&self.key);
    }

    /// Counts this call again: it decides, or runs.
    pub fn rejoin(&mut self) {
        if self.counted {
            return;
        }
        self.counted = true;
        self.twins.counts(&self.key).add(self.key);
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::{Counts, Digest, Twins};
    use crate::store::Key;

    proptest! {
        /// A shard's counts, its inline slot and its overflow map together,
        /// answer as one plain map of counts would, through any order of
        /// calls entering and leaving over a few keys (all in one shard:
        /// the slot is taken, freed and taken by another key while the
        /// first still has calls counted in the map).
        #[test]
        fn a_shard_counts_as_a_map_would(
            steps in prop::collection::vec((0u8..4, any::<bool>()), 0..64)
        ) {
            let mut counts = Counts::default();
            let mut model: HashMap<u8, usize> = HashMap::new();
            for (k, enters) in steps {
                let key = Digest([k; 32]);
                let n = model.entry(k).or_insert(0);
                if enters {
                    *n += 1;
                    counts.add(key);
                } else if *n > 0 {
                    // A call leaves only once it entered (`Active`).
                    *n -= 1;
                    counts.remove(&key);
                }
                for k in 0u8..4 {
                    let expected = model.get(&k).copied().unwrap_or(0);
                    prop_assert_eq!(counts.get(&Digest([k; 32])), expected, "key {}", k);
                }
            }
            let open: usize = model.values().sum();
            prop_assert_eq!(counts.is_empty(), open == 0);
        }
    }

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
