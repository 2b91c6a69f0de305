//! Base64 for meta keys (the `b` flag), as memcached's decoder reads it: characters outside
//! the alphabet are skipped, the rest must come in whole groups of four, and `=` padding ends
//! the key. Decoding writes into a caller's fixed buffer, so it never allocates.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The 6-bit value of an alphabet byte, 0 for `=`, `None` for a byte that is skipped.
fn sextet(byte: u8) -> Option<u8> {
    match byte {
        b'A'..=b'Z' => Some(byte - b'A'),
        b'a'..=b'z' => Some(byte - b'a' + 26),
        b'0'..=b'9' => Some(byte - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// Decodes `src` into `out`; the decoded length, or `None` where memcached says
/// "error decoding key" (nothing decodable, a partial group, bad padding, no room).
pub(crate) fn decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let count = src.iter().filter(|&&b| sextet(b).is_some()).count();
    if count == 0 || count % 4 != 0 || count / 4 * 3 > out.len() {
        return None;
    }
    let mut block = [0u8; 4];
    let mut filled = 0;
    let mut pad = 0;
    let mut len = 0;
    for &byte in src {
        let Some(value) = sextet(byte) else { continue };
        if byte == b'=' {
            pad += 1;
        }
        block[filled] = value;
        filled += 1;
        if filled == 4 {
            out[len] = (block[0] << 2) | (block[1] >> 4);
            out[len + 1] = (block[1] << 4) | (block[2] >> 2);
            out[len + 2] = (block[2] << 6) | block[3];
            len += 3;
            filled = 0;
            if pad > 0 {
                if pad > 2 {
                    return None;
                }
                len -= pad;
                break;
            }
        }
    }
    (len > 0).then_some(len)
}

/// Appends the padded base64 text of `src` (for a `k` return flag on a binary key).
pub fn encode_base64(src: &[u8], out: &mut Vec<u8>) {
    for chunk in src.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(src: &[u8]) -> Option<Vec<u8>> {
        let mut out = [0u8; 64];
        decode(src, &mut out).map(|len| out[..len].to_vec())
    }

    #[test]
    fn decodes_like_memcached() {
        assert_eq!(decoded(b"bWs="), Some(b"mk".to_vec()));
        assert_eq!(decoded(b"Zm9v"), Some(b"foo".to_vec()));
        assert_eq!(decoded(b"Zg=="), Some(b"f".to_vec()));
        assert_eq!(decoded(b"Zm9v!"), Some(b"foo".to_vec()));
        assert_eq!(decoded(b"!!"), None);
        assert_eq!(decoded(b"Zm9"), None);
        assert_eq!(decoded(b"===="), None);
        assert_eq!(decoded(b""), None);
    }

    #[test]
    fn encodes_and_decodes_back() {
        for len in 0..20u8 {
            let src: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37)).collect();
            let mut text = Vec::new();
            encode_base64(&src, &mut text);
            assert_eq!(text.len() % 4, 0);
            if len > 0 {
                assert_eq!(decoded(&text), Some(src));
            }
        }
    }
}
