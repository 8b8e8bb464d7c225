//! Lower-case hex of bytes: the text of keys, digests and ids, and the
//! `\u00xx` escapes of canonical JSON.

/// Lower-case hex digits.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    push_hex(&mut hex, bytes);
    hex
}

/// Appends the lower-case hex of `bytes` to `out`.
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    for &byte in bytes {
        out.extend(hex_pair(byte).map(char::from));
    }
}

/// Every byte's two lower-case hex digits: a byte is one load (every key's
/// 64 digits are written as it is made).
const PAIRS: [[u8; 2]; 256] = {
    let mut pairs = [[0u8; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [HEX_DIGITS[byte >> 4], HEX_DIGITS[byte & 0xf]];
        byte += 1;
    }
    pairs
};

/// The two lower-case hex digits of `byte`.
pub fn hex_pair(byte: u8) -> [u8; 2] {
    PAIRS[usize::from(byte)]
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_byte_is_its_two_lower_case_digits() {
        for byte in 0..=u8::MAX {
            let pair = super::hex_pair(byte);
            assert_eq!(
                std::str::from_utf8(&pair),
                Ok(format!("{byte:02x}").as_str())
            );
        }
        assert_eq!(super::hex(&[0x00, 0x9f, 0xff]), "009fff");
    }
}
