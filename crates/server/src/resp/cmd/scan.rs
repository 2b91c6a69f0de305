//! SCAN, KEYS, RANDOMKEY (issue 20 item 3) with Redis 7.0's replies and error texts, over the
//! shards' key walks (`shard/scan.rs`, the one walk the native scan uses too). All three are
//! barriers: the commands before them in the batch run first, then they walk the shards in
//! steps. Inside MULTI they run in the transaction's atomic section instead (`resp/multi.rs`):
//! every shard held, the same steps run one after another with no other command between.
//!
//! ```text
//!  SCAN cursor ──> cursor = shard << 48 | main bucket << 16 (`ScanPosition`, the native one)
//!                  steps on that shard, then the next shards, until COUNT live keys were
//!                  visited, the keyspace ended (cursor 0) or the reply reached
//!                  results_bytes_max ──> MATCH and TYPE filter them ──> [next cursor, keys]
//!  KEYS pattern ─> every shard, step by step, matches encoded straight into the reply; more
//!                  than results_bytes_max of them: an error that points to SCAN
//!  RANDOMKEY ────> a shard and a bucket from a seeded sequence, the first live key from
//!                  there on (wrapping round that shard's index, then the next shards)
//!
//!  each command is a `Walk`: a pure state machine (which step next, what to do with its
//!  answer), driven by `drive` (a step at a time, the shard's other tasks run between) or by
//!  `drive_held` (inside a transaction, every shard held)
//! ```
//!
//! Guarantees, as Redis's: a full SCAN iteration (cursor 0 back to 0) returns every key that
//! was present for the whole iteration at least once, whatever is added or removed meanwhile
//! (the index never resizes, so a cursor stays valid; `shard/scan.rs` says why a bucket is
//! seen whole), and a key that was not present all along may or may not be returned. COUNT
//! is a hint, as in Redis. A SCAN call goes on step after step until it has visited COUNT keys
//! or the keyspace ended, so a small keyspace is one call with cursor 0, as with Redis, even
//! though directkv's index is sized for the arena, not for the keys (an empty shard is passed
//! at once, a sparse one costs its index's walk, as KEYS does). A step visits at most
//! `scan_step_buckets` main buckets, and outside a transaction the shard's other requests run
//! between steps; inside MULTI every shard is held for the whole walk (as Redis's one thread
//! is for KEYS), so a KEYS there stalls the server for a full index walk, some tens of
//! milliseconds per GiB of arena. KEYS answers in bounded memory: the reply stops at
//! `results_bytes_max` (64 MiB by default, 2-3 million short keys), past which it is an error
//! rather than a reply that could take the server's memory. Patterns longer than
//! `match_pattern_bytes_max` are refused (a match costs the pattern's length times the key's).
//! RANDOMKEY is deterministic given the server's history (a counter, not an entropy source),
//! and favours keys after long runs of empty buckets, as Redis's bucket sampling does.

use std::sync::atomic::{AtomicU64, Ordering};

use directkv_proto::native::ScanPosition;
use directkv_proto::resp::{self, RespWriter, Version};

use super::glob::glob_match;
use super::{arity, parse_int, Name, Planned};
use crate::resp::reply::Pending;
use crate::shard::exclusive::Held;
use crate::shard::scan::{self, next_shard, start_of, Step};
use crate::shard::ShardCtx;
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
/// appends its reply to `out`: a step at a time, the shard's other tasks running between.
pub(crate) async fn barrier(ctx: &ShardCtx, v: Version, a: &[&[u8]], out: &mut Vec<u8>) {
    let mut w = match Walk::start(ctx, a, out.len()) {
        Ok(w) => w,
        Err(e) => return RespWriter::new(out, v).error(&e),
    };
    let ran = drive(ctx, &mut w, v, out).await;
    w.finish(ran, v, out);
}

/// [`barrier`] inside a transaction (`resp/multi.rs`), with every shard held: the steps run
/// one after another with no other command between them.
pub(crate) fn in_transaction(
    ctx: &ShardCtx,
    held: &mut Held<'_>,
    v: Version,
    a: &[&[u8]],
    out: &mut Vec<u8>,
) {
    let mut w = match Walk::start(ctx, a, out.len()) {
        Ok(w) => w,
        Err(e) => return RespWriter::new(out, v).error(&e),
    };
    let ran = drive_held(held, &mut w, v, out);
    w.finish(ran, v, out);
}

/// A shard did not answer a step (it stopped, or panicked).
struct Unavailable;

/// Runs `w`'s steps, yielding after each one on this shard so its other tasks run.
async fn drive(
    ctx: &ShardCtx,
    w: &mut Walk<'_>,
    v: Version,
    out: &mut Vec<u8>,
) -> Result<(), Unavailable> {
    while let Some(step) = w.next() {
        let here = usize::from(step.at.shard) == ctx.id;
        let step = scan::run(ctx, step).await.ok_or(Unavailable)?;
        w.take(step, v, out);
        if here {
            tokio::task::yield_now().await;
        }
    }
    Ok(())
}

/// Runs `w`'s steps on held shards, without an await.
fn drive_held(
    held: &mut Held<'_>,
    w: &mut Walk<'_>,
    v: Version,
    out: &mut Vec<u8>,
) -> Result<(), Unavailable> {
    while let Some(step) = w.next() {
        let step = held.scan(step).ok_or(Unavailable)?;
        w.take(step, v, out);
    }
    Ok(())
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

/// A walk command in progress: see the module comment.
enum Walk<'a> {
    Scan(ScanWalk<'a>),
    Keys(KeysWalk<'a>),
    Random(RandomWalk),
}

impl<'a> Walk<'a> {
    /// The walk of command `a` (arity checked), or its argument error. `start` is where its
    /// reply begins in the output.
    fn start(ctx: &ShardCtx, a: &[&'a [u8]], start: usize) -> Result<Walk<'a>, String> {
        let shards = ctx.shards();
        let name = Name::lower(a[0]);
        Ok(match name.as_bytes() {
            b"scan" => {
                let cursor = parse_cursor(a[1]).ok_or(ERR_INVALID_CURSOR)?;
                let o = parse_options(ctx, &a[2..])?;
                let at = ScanPosition::of(cursor);
                Walk::Scan(ScanWalk {
                    shards,
                    at: (usize::from(at.shard) < shards).then_some(at),
                    o,
                    visited: 0,
                    bytes: 0,
                    bytes_max: ctx.cfg.results_bytes_max,
                    found: Vec::new(),
                    n: 0,
                })
            }
            b"keys" => {
                check_pattern(ctx, a[1])?;
                Walk::Keys(KeysWalk {
                    shards,
                    at: Some(start_of(0)),
                    pattern: (a[1] != b"*").then_some(a[1]),
                    bytes_max: ctx.cfg.results_bytes_max,
                    start,
                    n: 0,
                    too_large: false,
                })
            }
            _ => {
                let r = next_random();
                // Every shard's index has the same number of buckets (the same engine
                // configuration).
                let buckets = ctx.index_buckets().max(1);
                let from = (r >> 16) % buckets;
                Walk::Random(RandomWalk {
                    shards,
                    first: r as usize,
                    i: 0,
                    buckets,
                    from,
                    wrapped: false,
                    bucket: from,
                    key: None,
                })
            }
        })
    }

    /// The next step to run, `None` once the reply is ready.
    fn next(&self) -> Option<Step> {
        match self {
            Walk::Scan(w) => w.next(),
            Walk::Keys(w) => w.next(),
            Walk::Random(w) => w.next(),
        }
    }

    /// Takes a step's answer (KEYS encodes its matches into `out` at once).
    fn take(&mut self, step: Step, v: Version, out: &mut Vec<u8>) {
        match self {
            Walk::Scan(w) => w.take(&step),
            Walk::Keys(w) => w.take(&step, v, out),
            Walk::Random(w) => w.take(&step),
        }
    }

    /// Writes the reply, or the error of a walk that could not end.
    fn finish(self, ran: Result<(), Unavailable>, v: Version, out: &mut Vec<u8>) {
        let start = match &self {
            Walk::Keys(w) => w.start,
            _ => out.len(),
        };
        if ran.is_err() {
            out.truncate(start);
            return RespWriter::new(out, v).error(ERR_UNAVAILABLE);
        }
        match self {
            Walk::Scan(w) => w.finish(v, out),
            Walk::Keys(w) => w.finish(v, out),
            Walk::Random(w) => w.finish(v, out),
        }
    }
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
struct ScanWalk<'a> {
    shards: usize,
    /// Where the next step starts; `None` once the keyspace ended (cursor 0).
    at: Option<ScanPosition>,
    o: Options<'a>,
    /// Keys visited (COUNT counts them before MATCH and TYPE, as Redis does) and their bytes.
    visited: usize,
    bytes: usize,
    bytes_max: usize,
    /// The keys that passed the filters, each a length byte and its bytes.
    found: Vec<u8>,
    n: usize,
}

impl ScanWalk<'_> {
    fn next(&self) -> Option<Step> {
        let at = self.at?;
        if self.visited >= self.o.count || self.bytes >= self.bytes_max {
            return None;
        }
        let (keys_max, bytes_max) = (self.o.count - self.visited, self.bytes_max - self.bytes);
        Some(Step::new(at, u64::MAX, keys_max, bytes_max))
    }

    fn take(&mut self, step: &Step) {
        for k in step.keys() {
            self.visited += 1;
            self.bytes += k.len();
            if self.o.typed_out || self.o.pattern.is_some_and(|p| !glob_match(p, k, false)) {
                continue;
            }
            self.found.push(k.len() as u8);
            self.found.extend_from_slice(k);
            self.n += 1;
        }
        self.at = if step.ended {
            next_shard(step.at.shard, self.shards)
        } else {
            Some(step.at)
        };
    }

    fn finish(self, v: Version, out: &mut Vec<u8>) {
        let next = self.at.map_or(0, ScanPosition::cursor);
        let mut w = RespWriter::new(out, v);
        w.array_len(2);
        w.bulk(next.to_string().as_bytes());
        w.array_len(self.n);
        let mut at = 0;
        while at < self.found.len() {
            let len = usize::from(self.found[at]);
            w.bulk(&self.found[at + 1..at + 1 + len]);
            at += 1 + len;
        }
    }
}

/// KEYS pattern: every matching key, encoded into the reply as it is found.
struct KeysWalk<'a> {
    shards: usize,
    at: Option<ScanPosition>,
    /// None: every key (`*`).
    pattern: Option<&'a [u8]>,
    bytes_max: usize,
    /// Where the reply begins in the output (its array header goes there at the end).
    start: usize,
    n: usize,
    /// The reply passed `bytes_max`: what was written is dropped and the walk stops.
    too_large: bool,
}

impl KeysWalk<'_> {
    fn next(&self) -> Option<Step> {
        if self.too_large {
            return None;
        }
        Some(Step::new(self.at?, u64::MAX, usize::MAX, self.bytes_max))
    }

    fn take(&mut self, step: &Step, v: Version, out: &mut Vec<u8>) {
        let mut w = RespWriter::new(out, v);
        for k in step.keys() {
            if self.pattern.is_none_or(|p| glob_match(p, k, false)) {
                w.bulk(k);
                self.n += 1;
            }
        }
        if out.len() - self.start > self.bytes_max {
            out.truncate(self.start);
            self.too_large = true;
        }
        self.at = if step.ended {
            next_shard(step.at.shard, self.shards)
        } else {
            Some(step.at)
        };
    }

    fn finish(self, v: Version, out: &mut Vec<u8>) {
        if self.too_large {
            return RespWriter::new(out, v).error(&format!(
                "ERR KEYS reply larger than results_bytes_max ({} bytes): iterate with SCAN",
                self.bytes_max
            ));
        }
        // The array's header goes before the keys, now that their number is known.
        let mut header = Vec::new();
        RespWriter::new(&mut header, v).array_len(self.n);
        out.splice(self.start..self.start, header);
    }
}

/// RANDOMKEY: from bucket `from` of one shard to the end of its index, then from its start
/// back to `from`, then the same on the next shards, until a live key is found.
struct RandomWalk {
    shards: usize,
    /// The first shard (modulo the shard count) and how many were passed.
    first: usize,
    i: usize,
    buckets: u64,
    from: u64,
    /// The walk of this shard went past the end of its index and goes on from bucket 0.
    wrapped: bool,
    bucket: u64,
    key: Option<Vec<u8>>,
}

impl RandomWalk {
    /// Where this part of the shard's walk stops.
    fn end(&self) -> u64 {
        if self.wrapped {
            self.from
        } else {
            self.buckets
        }
    }

    fn next(&self) -> Option<Step> {
        if self.key.is_some() || self.i >= self.shards {
            return None;
        }
        let at = ScanPosition {
            shard: (self.first.wrapping_add(self.i) % self.shards) as u16,
            bucket: self.bucket,
            skip: 0,
        };
        Some(Step::new(at, self.end() - self.bucket, 1, usize::MAX))
    }

    fn take(&mut self, step: &Step) {
        if let Some(k) = step.keys().next() {
            self.key = Some(k.to_vec());
            return;
        }
        if !step.ended {
            self.bucket = step.at.bucket;
        }
        if step.ended && step.visited == 0 {
            // A shard without keys.
            self.next_shard();
        } else if step.ended || self.bucket >= self.end() {
            if self.wrapped || self.from == 0 {
                self.next_shard();
            } else {
                self.wrapped = true;
                self.bucket = 0;
            }
        }
    }

    fn next_shard(&mut self) {
        self.i += 1;
        self.wrapped = false;
        self.bucket = self.from;
    }

    fn finish(self, v: Version, out: &mut Vec<u8>) {
        match self.key {
            Some(k) => RespWriter::new(out, v).bulk(&k),
            None => RespWriter::new(out, v).null(),
        }
    }
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
