//! The record format of the protocol test vectors (`crates/proto/tests/vectors/*.txt`,
//! explained in `docs/protocol.md`), read by the proto, server and client tests alike so that
//! the files have one reader.
//!
//! ```text
//!   # a comment line                 (skipped)
//!   name: get-one                    key ": " value, in file order
//!   request: d7 01 ...               hex values may span spaces
//!   op: GET key=6b                   any other key: kept with its whole line
//!                                    a blank line ends a record
//! ```

/// One line of a record: `key` before the first colon, `value` after it (trimmed), and the
/// whole `line` as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub key: String,
    pub value: String,
    pub line: String,
}

/// The lines of one record, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub fields: Vec<Field>,
}

impl Record {
    /// The value of the first field named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.key == key)
            .map(|f| f.value.as_str())
    }
}

/// Splits `text` into records at blank lines, skipping `#` comments. A line without a colon
/// is a field named by the whole (trimmed) line with an empty value.
pub fn records(text: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let mut cur = Record::default();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            if !cur.fields.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let (key, value) = line.split_once(':').unwrap_or((line, ""));
        cur.fields.push(Field {
            key: key.trim().to_string(),
            value: value.trim().to_string(),
            line: line.to_string(),
        });
    }
    if !cur.fields.is_empty() {
        out.push(cur);
    }
    out
}

/// Bytes from hex digits; whitespace between digits is ignored. Panics on odd or non-hex input.
pub fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len().is_multiple_of(2), "odd hex: {s}");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// Lower-case hex digits of `b`, no separators.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_split_at_blank_lines_and_keep_order() {
        let text = "# c\nname: a\nrequest: 0a 0B\nop: GET k\n\n\nname: b\nresponse:\n";
        let r = records(text);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].get("name"), Some("a"));
        assert_eq!(unhex(r[0].get("request").unwrap()), vec![0x0a, 0x0b]);
        assert_eq!(r[0].fields[2].line, "op: GET k");
        assert_eq!(r[1].get("response"), Some(""));
        assert_eq!(r[1].get("request"), None);
    }

    #[test]
    fn hex_round_trips() {
        let b: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&b)), b);
    }
}
