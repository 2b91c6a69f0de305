//! The arguments and result data of the deadline and keyspace operations (issue 20 item 5):
//! what a client writes into `arg` and reads out of a result, so the server's encoding and the
//! client's decoding are one code.
//!
//! ```text
//!   ttl result     deadline u64 LE | ms_left u64 LE            both 0: the key has no deadline
//!   scan arg       cursor u64 LE | count u32 LE                (12 bytes; key = prefix filter)
//!   scan result    next_cursor u64 LE | (key_len u8 | key)*    next_cursor 0: the scan is done
//!   scan cursor    bit 63..48 shard | 47..16 main bucket | 15..0 entries of it already sent
//!   type result    the type name: "string"
//! ```
//!
//! A scan visits one shard's index bucket by bucket (a bucket with the buckets chained behind
//! it is the unit the engine visits), then goes on to the next shard; the cursor says where.
//! A client sends each scan operation to the shard in its cursor's top 16 bits, so a
//! shard-aware client's scan costs no hop. The server's RESP SCAN cursors are the same
//! numbers (`shard/scan.rs` in the server: one walk, one cursor encoding for every protocol).
//! The index never resizes, so every key present for the whole scan is returned at least once;
//! keys added or removed meanwhile may or may not be (as Redis's SCAN).
//!
//! Goals: fixed-width fields, every length bounded: a scan result holds at most
//! `SCAN_COUNT_MAX` keys and stops before `SCAN_REPLY_BYTES_MAX` bytes.
//! Non-goals: MATCH patterns (a prefix is what a key-value client filters on), types other than
//! strings (there are none yet).

/// Bytes of a scan operation's argument.
pub const SCAN_ARGS_LEN: usize = 12;
/// Keys a scan result returns at most, whatever count the client asks for.
pub const SCAN_COUNT_MAX: u32 = 4096;
/// Bytes of scan result data at which the server stops adding keys (it ends the step at a
/// bucket, or mid-bucket with the entries sent counted in the cursor).
pub const SCAN_REPLY_BYTES_MAX: usize = 64 << 10;
/// Main buckets a scan step visits per key asked for (empty buckets are most of a sparse
/// index), as Redis's SCAN visits at most ten times COUNT empty buckets.
pub const SCAN_BUCKETS_PER_KEY: u64 = 10;
/// The type name of every value (`OpCode::Type`).
pub const TYPE_STRING: &[u8] = b"string";

/// Bits of a scan cursor below the shard.
const CURSOR_SHARD_SHIFT: u32 = 48;
/// Bits of a scan cursor below the bucket (the entries of the bucket already sent).
const CURSOR_BUCKET_SHIFT: u32 = 16;
/// Largest bucket number a cursor holds (2^32 buckets of 64 bytes: a 256 GiB index per shard).
pub const SCAN_CURSOR_BUCKET_MAX: u64 = (1 << (CURSOR_SHARD_SHIFT - CURSOR_BUCKET_SHIFT)) - 1;
/// Largest count of entries of one bucket a cursor holds.
pub const SCAN_CURSOR_SKIP_MAX: u64 = (1 << CURSOR_BUCKET_SHIFT) - 1;

/// The argument of a scan operation.
pub const fn scan_args(cursor: u64, count: u32) -> [u8; SCAN_ARGS_LEN] {
    let c = cursor.to_le_bytes();
    let n = count.to_le_bytes();
    [
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], n[0], n[1], n[2], n[3],
    ]
}

/// Decodes [`scan_args`]: None unless `arg` is 12 bytes.
pub fn parse_scan_args(arg: &[u8]) -> Option<(u64, u32)> {
    let a: &[u8; SCAN_ARGS_LEN] = arg.try_into().ok()?;
    let (cursor, count) = a.split_at(8);
    Some((
        u64::from_le_bytes(cursor.try_into().ok()?),
        u32::from_le_bytes(count.try_into().ok()?),
    ))
}

/// Where a scan cursor points: the shard, its main bucket and the entries of that bucket
/// (with its chain) already sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanPosition {
    pub shard: u16,
    pub bucket: u64,
    pub skip: u64,
}

impl ScanPosition {
    /// The cursor of this position; `bucket` and `skip` are cut to their fields' widths.
    pub const fn cursor(self) -> u64 {
        ((self.shard as u64) << CURSOR_SHARD_SHIFT)
            | ((self.bucket & SCAN_CURSOR_BUCKET_MAX) << CURSOR_BUCKET_SHIFT)
            | (self.skip & SCAN_CURSOR_SKIP_MAX)
    }

    /// The position of `cursor`.
    pub const fn of(cursor: u64) -> ScanPosition {
        ScanPosition {
            shard: (cursor >> CURSOR_SHARD_SHIFT) as u16,
            bucket: (cursor >> CURSOR_BUCKET_SHIFT) & SCAN_CURSOR_BUCKET_MAX,
            skip: cursor & SCAN_CURSOR_SKIP_MAX,
        }
    }
}

/// The shard a scan operation with this cursor goes to.
pub const fn scan_cursor_shard(cursor: u64) -> u16 {
    ScanPosition::of(cursor).shard
}

/// Starts a scan result in `out`: the next cursor, patched by [`scan_reply_finish`].
pub fn scan_reply_begin(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; 8]);
    at
}

/// Appends one key to a scan result (keys are at most 255 bytes: `key_len_max` is a u8).
pub fn scan_reply_key(out: &mut Vec<u8>, key: &[u8]) {
    debug_assert!(key.len() <= usize::from(u8::MAX));
    out.push(key.len() as u8);
    out.extend_from_slice(key);
}

/// Bytes one key takes in a scan result.
pub const fn scan_reply_key_len(key: &[u8]) -> usize {
    1 + key.len()
}

/// Writes the next cursor into the result begun at `at`.
pub fn scan_reply_finish(out: &mut [u8], at: usize, next_cursor: u64) {
    out[at..at + 8].copy_from_slice(&next_cursor.to_le_bytes());
}

/// A decoded scan result: the next cursor and the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanReply<'a> {
    pub next_cursor: u64,
    keys: &'a [u8],
}

impl<'a> ScanReply<'a> {
    /// Decodes a scan result; None if it is malformed (shorter than 8 bytes, a key running
    /// past the end).
    pub fn parse(data: &'a [u8]) -> Option<ScanReply<'a>> {
        let (cursor, keys) = data.split_first_chunk::<8>()?;
        let reply = ScanReply {
            next_cursor: u64::from_le_bytes(*cursor),
            keys,
        };
        let mut rest = keys;
        while let Some((&n, tail)) = rest.split_first() {
            rest = tail.get(usize::from(n)..)?;
        }
        Some(reply)
    }

    /// The keys, in the order the server visited them.
    pub fn keys(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let mut rest = self.keys;
        std::iter::from_fn(move || {
            let (&n, tail) = rest.split_first()?;
            let (key, after) = tail.split_at(usize::from(n));
            rest = after;
            Some(key)
        })
    }
}

/// A decoded ttl result: the deadline (ms since the Unix epoch; 0: the key has none) and the
/// milliseconds left; None if the data is not 16 bytes.
pub fn parse_ttl_reply(data: &[u8]) -> Option<(u64, u64)> {
    let d: &[u8; 16] = data.try_into().ok()?;
    let (deadline, left) = d.split_first_chunk::<8>()?;
    let left: &[u8; 8] = left.try_into().ok()?;
    Some((u64::from_le_bytes(*deadline), u64::from_le_bytes(*left)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_keep_the_shard_in_the_top_bits() {
        let p = ScanPosition {
            shard: 4095,
            bucket: SCAN_CURSOR_BUCKET_MAX,
            skip: 7,
        };
        assert_eq!(ScanPosition::of(p.cursor()), p);
        assert_eq!(scan_cursor_shard(p.cursor()), 4095);
        assert_eq!(p.cursor() >> 48, 4095);
        let start = ScanPosition {
            shard: 0,
            bucket: 0,
            skip: 0,
        };
        assert_eq!(start.cursor(), 0);
        let args = scan_args(p.cursor(), 100);
        assert_eq!(parse_scan_args(&args), Some((p.cursor(), 100)));
        assert_eq!(parse_scan_args(&args[..11]), None);
    }

    #[test]
    fn scan_replies_decode_and_reject_overruns() {
        let mut out = vec![0xEE];
        let at = scan_reply_begin(&mut out);
        scan_reply_key(&mut out, b"a");
        scan_reply_key(&mut out, b"");
        scan_reply_key(&mut out, b"key:2");
        scan_reply_finish(&mut out, at, 42);
        let r = ScanReply::parse(&out[1..]).unwrap();
        assert_eq!(r.next_cursor, 42);
        let keys: Vec<&[u8]> = r.keys().collect();
        assert_eq!(keys, [&b"a"[..], b"", b"key:2"]);
        assert_eq!(ScanReply::parse(&out[1..out.len() - 1]), None);
        assert_eq!(ScanReply::parse(&[0; 7]), None);
        assert_eq!(ScanReply::parse(&[0; 8]).unwrap().keys().count(), 0);
    }

    #[test]
    fn ttl_replies() {
        let mut d = [0u8; 16];
        assert_eq!(parse_ttl_reply(&d), Some((0, 0)));
        d[..8].copy_from_slice(&1000u64.to_le_bytes());
        d[8..].copy_from_slice(&250u64.to_le_bytes());
        assert_eq!(parse_ttl_reply(&d), Some((1000, 250)));
        assert_eq!(parse_ttl_reply(&d[..15]), None);
    }
}
