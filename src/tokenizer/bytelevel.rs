//! GPT-2's byte-level alphabet: each of the 256 byte values is shown as one
//! printable character, so a vocabulary of byte strings can be stored as
//! ordinary text (a space is `Ġ`, a newline `Ċ`).
//!
//! Bytes that are already printable and not whitespace (`!`..=`~`,
//! `¡`..=`¬`, `®`..=`ÿ`) stand for themselves; the other 68 take the code
//! points from U+0100 upwards, in byte order.

/// Whether byte `b` is shown as the character with the same code point.
pub(crate) const fn is_direct(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The character each byte is shown as, indexed by byte.
const BYTE_TO_CHAR: [char; 256] = {
    let mut table = ['\0'; 256];
    let mut next = 0x100u32;
    let mut b = 0usize;
    while b < 256 {
        let cp = if is_direct(b as u8) {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        table[b] = match char::from_u32(cp) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    table
};

/// The character byte `b` is shown as.
pub(crate) fn byte_to_char(b: u8) -> char {
    BYTE_TO_CHAR[usize::from(b)]
}

/// The byte that character `c` shows, or `None` if `c` is not one of the 256
/// characters of the alphabet.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    match cp {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => u8::try_from(cp).ok(),
        0x100..=0x143 => {
            // The 68 shifted bytes, in order: 0x00..=0x20, 0x7F..=0xA0, 0xAD.
            let k = cp - 0x100;
            let b = match k {
                0..=32 => k,
                33..=66 => k - 33 + 0x7F,
                _ => 0xAD,
            };
            u8::try_from(b).ok()
        }
        _ => None,
    }
}

/// Decodes byte-level text to the bytes it shows; `None` if a character is
/// outside the alphabet.
pub(crate) fn decode_str(text: &str) -> Option<Vec<u8>> {
    text.chars().map(char_to_byte).collect()
}

/// Shows `bytes` in the byte-level alphabet.
pub(crate) fn encode_bytes(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_to_char(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_and_the_map_is_injective() {
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = byte_to_char(b);
            assert!(seen.insert(c), "byte {b} shares its character");
            assert_eq!(char_to_byte(c), Some(b));
        }
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(char_to_byte('\u{144}'), None);
        assert_eq!(char_to_byte(' '), None);
    }
}
