use std::collections::HashSet;
use std::hash::BuildHasher;

use super::{Key, KeyHasher, Slot};

/// A key as the dispatcher makes them: a SHA-256 digest, in hex.
fn hex_key(i: u64) -> String {
    use sha2::Digest as _;
    crate::hex::hex(&sha2::Sha256::digest(format!("c s t {i}").as_bytes()))
}

fn key(hex: &str) -> Key {
    hex.parse().expect("a key's text")
}

#[test]
fn every_byte_and_the_length_count() {
    let hasher = KeyHasher::new();
    let base = hex_key(0);
    let mut seen = HashSet::new();
    assert!(seen.insert(hasher.hash_one(&base)));
    // One digit changed at each of the 64 places.
    for at in 0..base.len() {
        let mut changed = base.clone().into_bytes();
        changed[at] = if changed[at] == b'0' { b'1' } else { b'0' };
        let changed = String::from_utf8(changed).expect("hex");
        assert!(seen.insert(hasher.hash_one(&changed)), "digit {at}");
    }
    // Trailing zero bytes and every length up to two blocks.
    let zeros = "\0".repeat(70);
    for len in 0..=zeros.len() {
        assert!(seen.insert(hasher.hash_one(&zeros[..len])), "{len} zeros");
    }
}

#[test]
fn the_keys_of_one_shard_still_spread_over_its_maps_places_and_tags() {
    // A shard's map places keys by the low bits of the same hash and
    // tags them with the top seven: neither may be what picks the shard.
    let store = super::MemoryStore::default();
    let mut low = vec![HashSet::new(); super::SHARDS];
    let mut top = vec![HashSet::new(); super::SHARDS];
    for i in 0..4_000 {
        let key = hex_key(i);
        // Sessions pick shards by their text, keys of calls by their slot.
        for (hash, shard) in [
            (store.hasher.hash_one(&key), store.shard_of(&key)),
            (
                store.hasher.hash_one(Slot::of(&self::key(&key))),
                store.shard_of_slot(&Slot::of(&self::key(&key))),
            ),
        ] {
            low[shard].insert(hash & 15);
            top[shard].insert(hash >> 57);
        }
    }
    // About 250 keys a shard: all 16 low values and about 110 of the 128
    // tags turn up (the hash is seeded anew each run, so the bounds sit
    // far below that); a shard picked by either would show 1, or 8.
    for shard in 0..super::SHARDS {
        assert!(
            low[shard].len() >= 12,
            "shard {shard}: low bits {:?}",
            low[shard]
        );
        assert!(
            top[shard].len() > 64,
            "shard {shard}: {} tags",
            top[shard].len()
        );
    }
}

#[test]
fn keys_spread_over_buckets_and_tags() {
    let hasher = KeyHasher::new();
    let (mut buckets, mut tags) = (vec![0u32; 1024], vec![0u32; 128]);
    for i in 0..20_000 {
        let h = hasher.hash_one(hex_key(i));
        buckets[(h & 1023) as usize] += 1;
        tags[(h >> 57) as usize] += 1;
    }
    // About 19.5 per bucket and 156 per tag; a poor hash piles them up.
    assert!(
        buckets.iter().all(|&n| n < 50),
        "{:?}",
        buckets.iter().max()
    );
    assert!(tags.iter().all(|&n| n > 80 && n < 260), "{tags:?}");
}
