//! How [`MemoryStore`](super::MemoryStore) hashes the keys it keeps:
//! the [`Slot`] of a [`Key`] and the seeded [`KeyHasher`].

use std::hash::{BuildHasher, Hash, Hasher};

use crate::store::Key;

/// A key of the maps of calls, records and resource locks: the [`Key`]'s
/// 32 bytes, hashed as one write (the digest is already uniform).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot([u8; 32]);

impl Slot {
    pub(super) fn of(key: &Key) -> Slot {
        Slot(*key.digest())
    }
}

impl Hash for Slot {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(&self.0);
    }
}

/// The hash of the maps keyed by idempotency and resource keys, of the
/// shard choice, and of the dispatcher's count of identical calls in
/// flight: SHA-256 digests the dispatcher computed, so a few
/// multiplications by a key drawn per map spread them as well as SipHash
/// does, at a fraction of its cost. Whoever picks a call's arguments cannot
/// aim at a bucket without the seed.
#[derive(Clone, Debug)]
pub struct KeyHasher {
    seed: u64,
}

impl KeyHasher {
    pub(crate) fn new() -> Self {
        use std::hash::BuildHasher as _;
        // The standard library's random keys, drawn once per store.
        KeyHasher {
            seed: std::collections::hash_map::RandomState::new().hash_one(0x746f_6f6c_u64) | 1,
        }
    }
}

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher::new()
    }
}

impl BuildHasher for KeyHasher {
    type Hasher = Folded;

    fn build_hasher(&self) -> Folded {
        Folded(self.seed)
    }
}

/// [`KeyHasher`]'s state: the bytes folded eight at a time.
pub struct Folded(u64);

impl std::hash::Hasher for Folded {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            self.0 = (self.0 ^ word).wrapping_mul(K).rotate_left(29);
        }
        for &byte in chunks.remainder() {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(K).rotate_left(29);
        }
        // The length too: a word of zeros folds as one zero byte does.
        self.0 = (self.0 ^ bytes.len() as u64)
            .wrapping_mul(K)
            .rotate_left(29);
    }

    fn finish(&self) -> u64 {
        // A last mix so the high bits (hashbrown's tags) depend on every byte.
        let h = self.0 ^ (self.0 >> 32);
        h.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ (h >> 29)
    }
}
