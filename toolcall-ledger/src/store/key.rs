//! [`Key`]: what a store keeps a call's record, count and resource lock
//! under.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// The key of a call's count and record (its idempotency key), or of a
/// resource's lock, in a [`Store`](super::Store): a SHA-256 digest.
///
/// The dispatcher makes every key (`toolcall_core::canonical` says
/// how) and hands it to the store as its 32 bytes, so that a store in
/// memory compares and hashes those, with nothing to read back; its text,
/// [`as_str`](Key::as_str), is the 64 lower-case hex digits a store that
/// keeps text (a SQL table) writes, and what a tool's
/// `Ctx::idempotency_key` says.
///
/// ```
/// use toolcall_ledger::store::Key;
///
/// let key: Key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".parse()?;
/// assert_eq!(key.digest()[0], 0x9f);
/// assert_eq!(key.to_string(), key.as_str());
/// assert_eq!(Key::from_digest(*key.digest()), key);
/// # Ok::<(), toolcall_ledger::store::KeyError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Key {
    digest: [u8; 32],
    hex: [u8; 64],
}

impl Key {
    /// The key of a digest.
    pub fn from_digest(digest: [u8; 32]) -> Key {
        let mut hex = [0u8; 64];
        for (pair, &byte) in hex.chunks_exact_mut(2).zip(&digest) {
            pair.copy_from_slice(&crate::hex::hex_pair(byte));
        }
        Key { digest, hex }
    }

    /// The key of `data`: its SHA-256 digest. For a store used directly (a
    /// test, a tool of its own); the dispatcher's keys are the digests
    /// `toolcall_core::canonical` describes.
    pub fn sha256(data: impl AsRef<[u8]>) -> Key {
        use sha2::Digest as _;
        Key::from_digest(sha2::Sha256::digest(data.as_ref()).into())
    }

    /// The digest's 32 bytes.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// The digest as 64 lower-case hex digits.
    pub fn as_str(&self) -> &str {
        // Hex digits are ASCII: always UTF-8.
        std::str::from_utf8(&self.hex).unwrap_or_default()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.digest == other.digest
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The digests' order, which is their texts' order too.
impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        self.digest.cmp(&other.digest)
    }
}

/// The digest's bytes, as one write.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(&self.digest);
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Key").field(&self.as_str()).finish()
    }
}

/// Text that is not a key: anything but 64 hex digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyError {
    len: usize,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a key is 64 hex digits (a SHA-256 digest); this text is {} bytes and is not one",
            self.len
        )
    }
}

impl std::error::Error for KeyError {}

/// Reads 64 hex digits, in either case.
impl FromStr for Key {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<Key, KeyError> {
        let error = || KeyError { len: text.len() };
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return Err(error());
        }
        let mut digest = [0u8; 32];
        for (byte, pair) in digest.iter_mut().zip(bytes.chunks_exact(2)) {
            let high = char::from(pair[0]).to_digit(16).ok_or_else(error)?;
            let low = char::from(pair[1]).to_digit(16).ok_or_else(error)?;
            *byte = (high as u8) << 4 | low as u8;
        }
        Ok(Key::from_digest(digest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn a_key_reads_back_from_its_text(digest in proptest::array::uniform32(0u8..)) {
            let key = Key::from_digest(digest);
            proptest::prop_assert_eq!(key.as_str(), crate::hex::hex(&digest));
            proptest::prop_assert_eq!(key.as_str().parse::<Key>(), Ok(key));
            proptest::prop_assert_eq!(key.as_str().to_uppercase().parse::<Key>(), Ok(key));
        }

        #[test]
        fn keys_order_as_their_texts_do(
            a in proptest::array::uniform32(0u8..),
            b in proptest::array::uniform32(0u8..),
        ) {
            let (a, b) = (Key::from_digest(a), Key::from_digest(b));
            proptest::prop_assert_eq!(a.cmp(&b), a.as_str().cmp(b.as_str()));
        }
    }

    #[test]
    fn only_64_hex_digits_are_a_key() {
        for text in [
            "",
            "k1",
            &"0".repeat(63),
            &"0".repeat(65),
            &"g".repeat(64),
            &"é".repeat(32),
        ] {
            let error = text.parse::<Key>().unwrap_err();
            assert!(
                error.to_string().contains("64 hex digits"),
                "{text:?}: {error}"
            );
        }
    }
}
