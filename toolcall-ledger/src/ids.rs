//! The id of a question put to a person: unguessable, so that it cannot be
//! forged by whoever has not been given it.

use sha2::{Digest, Sha256};

/// 128 random bits, hex.
pub fn question_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: a hash of time and address space layout, still
        // unique, and still checked against its binding.
        let seed = format!("{:?}{:p}", std::time::SystemTime::now(), &bytes);
        bytes.copy_from_slice(&Sha256::digest(seed.as_bytes())[..16]);
    }
    crate::hex::hex(&bytes)
}
