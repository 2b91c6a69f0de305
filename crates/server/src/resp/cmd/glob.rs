//! Redis's glob patterns, the one matcher of the server: CONFIG GET and COMMAND LIST FILTERBY
//! PATTERN match names without regard to case, KEYS and SCAN MATCH match keys byte for byte.
//!
//! ```text
//!  *        any run of bytes (consecutive stars are one)
//!  ?        any one byte
//!  [abc]    one of a, b, c      [a-z] a range (either order)    [^...] none of them
//!  \x       the byte x, also inside a class; a trailing \ is itself
//! ```
//!
//! Semantics are Redis 7.0's `stringmatchlen`, edge cases included: a class that is not closed
//! runs to the end of the pattern (`[a-` matches `a` and `-`), `[a-]` is the range from `a` to
//! `]`, an escape inside a class compares case-sensitively even when the match does not, and an
//! empty string matches only the empty pattern. Redis recurses at every star; here a mismatch
//! goes back to the last star only (every other token consumes exactly one byte, so a later
//! star subsumes an earlier one): time is linear in the string per star and never exponential.
//! The caller bounds the pattern's length (`match_pattern_bytes_max` for keys).

/// Whether `s` matches `pattern` (`nocase`: ASCII letters compare without regard to case).
pub(crate) fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    if s.is_empty() {
        return pattern.is_empty();
    }
    let (mut p, mut n) = (0usize, 0usize);
    // The pattern index after the last star, and the string index it was tried at.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() && pattern[p] == b'*' {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            if p == pattern.len() {
                return true;
            }
            star = Some((p, n));
            continue;
        }
        if p == pattern.len() && n == s.len() {
            return true;
        }
        if p < pattern.len() && n < s.len() {
            if let Some(next) = token(pattern, p, s[n], nocase) {
                p = next;
                n += 1;
                continue;
            }
        }
        // A mismatch: the last star takes one more byte, if there is one to take.
        match star {
            Some((sp, sn)) if sn < s.len() => {
                star = Some((sp, sn + 1));
                p = sp;
                n = sn + 1;
            }
            _ => return false,
        }
    }
}

/// Whether the token at `pattern[p]` (not a star) matches `c`: the index after the token, or
/// None.
fn token(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    let eq = |a: u8, b: u8| a == b || (nocase && a.eq_ignore_ascii_case(&b));
    match pattern[p] {
        b'?' => Some(p + 1),
        b'[' => class(pattern, p, c, nocase),
        b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], c).then_some(p + 2),
        lit => eq(lit, c).then_some(p + 1),
    }
}

/// The class starting at `pattern[start]` (`[`) against `c`: the index after it when `c` is
/// in it (not in it, for `[^`), else None. Follows Redis's loop step by step.
fn class(pattern: &[u8], start: usize, c: u8, nocase: bool) -> Option<usize> {
    let len = pattern.len();
    let lower = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let mut i = start + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    loop {
        if i < len && pattern[i] == b'\\' && len - i >= 2 {
            i += 1;
            hit |= pattern[i] == c;
        } else if i < len && pattern[i] == b']' {
            break;
        } else if i >= len {
            // Not closed: the class ends with the pattern.
            i = len - 1;
            break;
        } else if len - i >= 3 && pattern[i + 1] == b'-' {
            let (mut lo, mut hi) = (lower(pattern[i]), lower(pattern[i + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            hit |= (lo..=hi).contains(&lower(c));
            i += 2;
        } else {
            hit |= lower(pattern[i]) == lower(c);
        }
        i += 1;
    }
    (hit != negate).then_some(i + 1)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn names_match_without_case_as_config_get_does() {
        for (pat, name, want) in [
            ("*", "maxmemory", true),
            ("maxmemory*", "maxmemory-clients", true),
            ("MAXMEM*", "maxmemory", true),
            ("max?lients", "maxclients", true),
            ("max[a-c]lients", "maxclients", true),
            ("max[^c]lients", "maxclients", false),
            ("*memory*", "maxmemory-policy", true),
            ("*memory", "maxmemory-policy", false),
            ("time\\*", "time*", true),
            ("time\\*", "timeout", false),
            ("[", "[", false),
            (
                "a*b*c*d*e*f*g*h*z",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
        ] {
            assert_eq!(
                glob_match(pat.as_bytes(), name.as_bytes(), true),
                want,
                "{pat} {name}"
            );
        }
    }

    /// Each case checked against redis-server 7.0.15's KEYS.
    #[test]
    fn keys_match_byte_for_byte_with_redis_edge_cases() {
        for (pat, key, want) in [
            ("A", "a", false),
            ("a", "a", true),
            ("[a-", "a", true),
            ("[a-", "-", true),
            ("[a-", "b", false),
            ("[b", "b", true),
            ("[^a]", "b", true),
            ("[^a]", "a", false),
            ("[^", "x", true),
            ("[\\", "a", false),
            ("a\\", "a\\", true),
            ("a\\", "a", false),
            ("[a-]", "b", false),
            ("[a-]", "_", true),
            ("[]]", "]", false),
            ("[z-a]", "m", true),
            ("h?llo", "hallo", true),
            ("h*llo", "hllo", true),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hillo", false),
            ("*a", "aaab", false),
            ("**a**", "bab", true),
            ("a*", "a", true),
            ("?", "", false),
            ("", "", true),
        ] {
            assert_eq!(
                glob_match(pat.as_bytes(), key.as_bytes(), false),
                want,
                "{pat} {key}"
            );
        }
    }
}
