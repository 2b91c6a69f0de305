//! SCAN, KEYS, RANDOMKEY (issue 20 item 3) with Redis 7.0's replies and error texts, over the
//! shards' key walks (`shard/scan.rs`). All three are barriers: the commands before them in
//! the batch run first, then they walk the shards in steps.
//!
//! ```text
//!  SCAN cursor ──> cursor = shard << 48 | main bucket of that shard's index
//!                  steps on that shard, then the next shards, until COUNT live keys were
//!                  visited, scan_step_buckets buckets were, or the reply reached
//!                  results_bytes_max ──> MATCH and TYPE filter them ──> [next cursor, keys]
//!  KEYS pattern ─> every shard, step by step, matches encoded straight into the reply; more
//!                  than results_bytes_max of them: an error that points to SCAN
//!  RANDOMKEY ────> a shard and a bucket from a seeded sequence, the first live key from
//!                  there on (wrapping round that shard's index, then the next shards)
//! ```
//!
//! Guarantees, as Redis's: a full SCAN iteration (cursor 0 back to 0) returns every key that
//! was present for the whole iteration at least once, whatever is added or removed meanwhile
//! (the index never resizes, so a cursor stays valid; `shard/scan.rs` says why a bucket is
//! seen whole), and a key that was not present all along may or may not be returned. COUNT
//! is a hint, as in Redis. What directkv adds: a SCAN call visits at most `scan_step_buckets`
//! main buckets, so a sparse index may answer an empty page with a cursor that is not 0 (as
//! Redis may), and an empty shard costs one step. KEYS answers in bounded memory: the reply
//! stops at `results_bytes_max` (64 MiB by default, 2-3 million short keys), past which it is
//! an error rather than a reply that could take the server's memory. Patterns longer than
//! `match_pattern_bytes_max` are refused (a match costs the pattern's length times the key's).
//! RANDOMKEY is deterministic given the server's history (a counter, not an entropy source),
//! and favours keys after long runs of empty buckets, as Redis's bucket sampling does.

use std::sync::atomic::{AtomicU64, Ordering};

use directkv_proto::resp::{self, RespWriter, Version};

use super::glob::glob_match;
use super::{arity, parse_int, Name, Planned};
use crate::resp::reply::Pending;
use crate::shard::scan::{self, Step};
use crate::shard::ShardCtx;

/// Where a SCAN cursor keeps the shard: the bits above a shard's bucket cursor (an index has
/// far fewer than 2^48 main buckets; shards are at most 2^16).
const SHARD_SHIFT: u32 = 48;
const BUCKET_MASK: u64 = (1 << SHARD_SHIFT) - 1;
/// SCAN's COUNT when none is given (Redis's).
const COUNT_DEFAULT: usize = 10;
const ERR_INVALID_CURSOR: &str = "ERR invalid cursor";
const ERR_UNAVAILABLE: &str = "ERR shard unavailable";

/// RANDOMKEY's sequence (see the module comment).
static RANDOM_NEXT: AtomicU64 = AtomicU64::new(0);

pub fn plan(p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) -> Option<Planned> {
    let n = a.len();
    Some(match name {
        b"scan" if n >= 2 => Planned::Barrier,
        b"keys" if n == 2 => Planned::Barrier,
        b"randomkey" if n == 1 => Planned::Barrier,
        b"scan" | b"keys" | b"randomkey" => arity(p, v, name),
        _ => return None,
    })
}

/// Runs SCAN, KEYS or RANDOMKEY (`plan` answered `Planned::Barrier`, arity checked) and
/// appends its reply to `out`.
pub(crate) async fn barrier(ctx: &ShardCtx, v: Version, a: &[&[u8]], out: &mut Vec<u8>) {
    let name = Name::lower(a[0]);
    let r = match name.as_bytes() {
        b"scan" => scan(ctx, v, a, out).await,
        b"keys" => keys(ctx, v, a[1], out).await,
        _ => randomkey(ctx, v, out).await,
    };
    if let Err(e) = r {
        RespWriter::new(out, v).error(&e);
    }
}

/// Whether `name` (lower case) is one of this file's commands.
pub(crate) fn is_walk(name: &[u8]) -> bool {
    matches!(name, b"scan" | b"keys" | b"randomkey")
}

/// SCAN's options.
struct Options<'a> {
    count: usize,
    /// None: every key (no MATCH, or MATCH *).
    pattern: Option<&'a [u8]>,
    /// TYPE names a type directkv's keys have (every value is a string).
    typed_out: bool,
}

/// The cursor as Redis's `strtoul` reads it: an optional sign and decimal digits, nothing
/// after them (up to a NUL byte, where C stops), no space first; a negative number wraps;
/// an empty argument is 0.
fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let arg = arg.split(|&b| b == 0).next().unwrap_or_default();
    if arg.is_empty() {
        return Some(0);
    }
    if matches!(arg[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return None;
    }
    let (negative, digits) = match arg[0] {
        b'-' => (true, &arg[1..]),
        b'+' => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n = 0u64;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative { n.wrapping_neg() } else { n })
}

/// SCAN's options after the cursor, in Redis's order of checks.
fn parse_options<'a>(ctx: &ShardCtx, a: &[&'a [u8]]) -> Result<Options<'a>, String> {
    let mut o = Options {
        count: COUNT_DEFAULT,
        pattern: None,
        typed_out: false,
    };
    let mut i = 0;
    while i < a.len() {
        let (opt, value) = match a.get(i + 1) {
            Some(v) => (a[i], *v),
            None => return Err(resp::err_syntax().into()),
        };
        if opt.eq_ignore_ascii_case(b"count") {
            match parse_int(value) {
                Some(c) if c >= 1 => o.count = usize::try_from(c).unwrap_or(usize::MAX),
                Some(_) => return Err(resp::err_syntax().into()),
                None => return Err(resp::err_not_integer().into()),
            }
        } else if opt.eq_ignore_ascii_case(b"match") {
            o.pattern = (value != b"*").then_some(value);
        } else if opt.eq_ignore_ascii_case(b"type") {
            o.typed_out = !value.eq_ignore_ascii_case(b"string");
        } else {
            return Err(resp::err_syntax().into());
        }
        i += 2;
    }
    if let Some(p) = o.pattern {
        check_pattern(ctx, p)?;
    }
    Ok(o)
}

fn check_pattern(ctx: &ShardCtx, pattern: &[u8]) -> Result<(), String> {
    let max = ctx.cfg.match_pattern_bytes_max;
    if pattern.len() > max {
        return Err(format!(
            "ERR pattern of {} bytes longer than match_pattern_bytes_max ({max})",
            pattern.len()
        ));
    }
    Ok(())
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
async fn scan(ctx: &ShardCtx, v: Version, a: &[&[u8]], out: &mut Vec<u8>) -> Result<(), String> {
    let cursor = parse_cursor(a[1]).ok_or(ERR_INVALID_CURSOR)?;
    let o = parse_options(ctx, &a[2..])?;
    let shards = ctx.shards();
    let mut shard = (cursor >> SHARD_SHIFT) as usize;
    let mut bucket = cursor & BUCKET_MASK;
    let mut budget = ctx.cfg.scan_step_buckets as u64;
    let bytes_max = ctx.cfg.results_bytes_max;
    let (mut visited, mut bytes) = (0usize, 0usize);
    let mut found: Vec<u8> = Vec::new();
    let mut n = 0usize;
    // Out of budget at the start of a shard, a step of no bucket still passes over it when it
    // is empty, so that a call over a small keyspace ends with cursor 0 as Redis's does.
    while shard < shards && visited < o.count && bytes < bytes_max {
        if budget == 0 && bucket != 0 {
            break;
        }
        let want = Step::new(bucket, budget, o.count - visited, bytes_max - bytes);
        let step = scan::run(ctx, shard, want).await.ok_or(ERR_UNAVAILABLE)?;
        if budget == 0 && !step.ended {
            break;
        }
        budget = budget.saturating_sub(step.visited);
        for k in step.keys() {
            visited += 1;
            bytes += k.len();
            if o.typed_out || o.pattern.is_some_and(|p| !glob_match(p, k, false)) {
                continue;
            }
            found.push(k.len() as u8);
            found.extend_from_slice(k);
            n += 1;
        }
        if step.ended {
            shard += 1;
            bucket = 0;
        } else {
            bucket = step.cursor;
        }
    }
    let next = if shard >= shards {
        0
    } else {
        ((shard as u64) << SHARD_SHIFT) | bucket
    };
    let mut w = RespWriter::new(out, v);
    w.array_len(2);
    w.bulk(next.to_string().as_bytes());
    w.array_len(n);
    let mut at = 0;
    while at < found.len() {
        let len = usize::from(found[at]);
        w.bulk(&found[at + 1..at + 1 + len]);
        at += 1 + len;
    }
    Ok(())
}

/// KEYS pattern: every matching key, encoded into `out` as it is found.
async fn keys(ctx: &ShardCtx, v: Version, pattern: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    check_pattern(ctx, pattern)?;
    let pattern = (pattern != b"*").then_some(pattern);
    let bytes_max = ctx.cfg.results_bytes_max;
    let start = out.len();
    let mut n = 0usize;
    for shard in 0..ctx.shards() {
        let mut bucket = 0;
        loop {
            let budget = ctx.cfg.scan_step_buckets as u64;
            let left = bytes_max.saturating_sub(out.len() - start);
            let step =
                match scan::run(ctx, shard, Step::new(bucket, budget, usize::MAX, left)).await {
                    Some(step) => step,
                    None => {
                        out.truncate(start);
                        return Err(ERR_UNAVAILABLE.into());
                    }
                };
            let mut w = RespWriter::new(out, v);
            for k in step.keys() {
                if pattern.is_none_or(|p| glob_match(p, k, false)) {
                    w.bulk(k);
                    n += 1;
                }
            }
            if out.len() - start > bytes_max {
                out.truncate(start);
                return Err(format!(
                    "ERR KEYS reply larger than results_bytes_max ({bytes_max} bytes): \
                     iterate with SCAN"
                ));
            }
            if step.ended {
                break;
            }
            bucket = step.cursor;
            // Let the shard's other tasks run between steps.
            tokio::task::yield_now().await;
        }
    }
    // The array's header goes before the keys, now that their number is known.
    let mut header = Vec::new();
    RespWriter::new(&mut header, v).array_len(n);
    out.splice(start..start, header);
    Ok(())
}

/// splitmix64 of a counter: RANDOMKEY's (shard, bucket) sequence.
fn next_random() -> u64 {
    let mut z = RANDOM_NEXT
        .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// RANDOMKEY: a live key, or null when there is none.
async fn randomkey(ctx: &ShardCtx, v: Version, out: &mut Vec<u8>) -> Result<(), String> {
    let r = next_random();
    let shards = ctx.shards();
    // Every shard's index has the same number of buckets (the same engine configuration).
    let buckets = ctx.index_buckets().max(1);
    let from = (r >> 16) % buckets;
    let budget = ctx.cfg.scan_step_buckets as u64;
    'shards: for i in 0..shards {
        let shard = (r as usize).wrapping_add(i) % shards;
        // From `from` to the end of the index, then from its start back to `from`.
        for (mut bucket, end) in [(from, buckets), (0, from)] {
            while bucket < end {
                let step = Step::new(bucket, budget.min(end - bucket), 1, usize::MAX);
                let step = scan::run(ctx, shard, step).await.ok_or(ERR_UNAVAILABLE)?;
                if let Some(k) = step.keys().next() {
                    RespWriter::new(out, v).bulk(k);
                    return Ok(());
                }
                if step.ended && step.visited == 0 {
                    // A shard without keys.
                    continue 'shards;
                }
                if step.ended {
                    break;
                }
                bucket = step.cursor;
            }
        }
    }
    RespWriter::new(out, v).null();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_cursor;

    /// Each case checked against redis-server 7.0.15's SCAN.
    #[test]
    fn cursors_parse_as_redis_strtoul() {
        for (arg, want) in [
            ("0", Some(0)),
            ("", Some(0)),
            ("00", Some(0)),
            ("+5", Some(5)),
            ("-1", Some(u64::MAX)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            (" 5", None),
            ("5 ", None),
            ("x", None),
            ("-", None),
            ("+", None),
            ("0x10", None),
        ] {
            assert_eq!(parse_cursor(arg.as_bytes()), want, "{arg:?}");
        }
        assert_eq!(parse_cursor(b"7\0junk"), Some(7));
    }
}
