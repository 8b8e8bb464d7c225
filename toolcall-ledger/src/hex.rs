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

/// The two lower-case hex digits of `byte`.
pub fn hex_pair(byte: u8) -> [u8; 2] {
    [
        HEX_DIGITS[usize::from(byte >> 4)],
        HEX_DIGITS[usize::from(byte & 0xf)],
    ]
}
