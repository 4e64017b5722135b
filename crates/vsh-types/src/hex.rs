//! Lower-case hexadecimal: the one text form of ids, digests and keys, written
//! once here for every crate.

/// The lower-case hex digits of `bytes`, two per byte.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    text
}

/// The 32 bytes that exactly 64 hex digits (either case) spell, or `None`.
pub fn decode32(text: &[u8]) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0_u8; 32];
    for (index, pair) in text.chunks_exact(2).enumerate() {
        out[index] = (value(pair[0])? << 4) | value(pair[1])?;
    }
    Some(out)
}

/// Whether `text` is made only of lower-case hex digits (the form vsh writes).
pub fn is_lower(text: &[u8]) -> bool {
    text.iter().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

fn value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_through_lower_case_hex_and_nothing_else_decodes() {
        assert_eq!(encode(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(encode(&[]), "");
        let bytes: [u8; 32] = std::array::from_fn(|index| u8::try_from(index * 8).unwrap());
        let text = encode(&bytes);
        assert_eq!(text.len(), 64);
        assert!(is_lower(text.as_bytes()));
        assert_eq!(decode32(text.as_bytes()), Some(bytes));
        assert_eq!(decode32(text.to_uppercase().as_bytes()), Some(bytes), "either case decodes");
        assert!(!is_lower(text.to_uppercase().as_bytes()) && !is_lower(b"0g"));
        for bad in [&text.as_bytes()[..63], b"zz", &[b'0'; 66][..]] {
            assert_eq!(decode32(bad), None);
        }
        let mut wrong = text.clone().into_bytes();
        wrong[10] = b'g';
        assert_eq!(decode32(&wrong), None);
    }
}
