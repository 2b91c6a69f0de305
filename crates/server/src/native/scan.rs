//! The native scan operation (issue 20 item 5): one step of a walk over every shard's index,
//! answered around the engine (it is not an engine operation: it reads many keys, none named).
//!
//! ```text
//!   cursor = shard | main bucket | entries of that bucket already sent   (proto keyspace.rs)
//!
//!   step on the cursor's shard (its own thread: directly; another shard's: Job::Call)
//!     bucket by bucket from the cursor's, with the buckets chained behind each (the engine's
//!     unit of a scan), live keys starting with the prefix into the result
//!     stop at a bucket boundary once `count` keys are in, `count * SCAN_BUCKETS_PER_KEY`
//!     buckets were visited or `SCAN_REPLY_BYTES_MAX` bytes are in
//!     end of the shard's index: the next cursor is the next shard's first bucket, 0 after
//!     the last shard
//! ```
//!
//! Why every key present for the whole scan is returned: the index has a fixed bucket count
//! (it never resizes), a key stays in its main bucket's chain, and a step ends at a bucket
//! boundary, so the next step starts with the first bucket not yet visited. Only a bucket whose
//! keys alone pass the result's hard limit (the datagram over UDP, `value_len_max` over TCP:
//! thousands of keys in one chain, which only a hash-flooding client makes) is sent in parts,
//! counted by position in the cursor; a key removed from that bucket between two parts may make
//! the scan miss one of the others. Expired keys are never returned (the engine's scan skips
//! them at the wall clock).
//!
//! Bounds: a step visits at most `SCAN_COUNT_MAX * SCAN_BUCKETS_PER_KEY` buckets and holds at
//! most its result (`SCAN_REPLY_BYTES_MAX` plus one bucket, under the hard limit).

use directkv_proto::native::{
    parse_scan_args, scan_reply_begin, scan_reply_finish, scan_reply_key, scan_reply_key_len,
    status, ScanPosition, SCAN_BUCKETS_PER_KEY, SCAN_COUNT_MAX, SCAN_CURSOR_SKIP_MAX,
    SCAN_REPLY_BYTES_MAX,
};
use tokio::sync::{mpsc, oneshot};

use crate::shard::{Job, ShardCtx};

/// The status of a scan whose argument or cursor is malformed.
const BAD_ARGUMENT: u8 = status::error(status::ERR_BAD_ARGUMENT);
/// The status of a scan whose first key would not fit the result's hard limit.
const TOO_LARGE: u8 = status::error(status::ERR_REPLY_TOO_LARGE);
/// The status of a scan whose shard did not answer (the server stops, or a panic).
const UNAVAILABLE: u8 = status::error(status::ERR_UNAVAILABLE);

/// The results of a frame's scan operations: status and data range each, one data buffer.
#[derive(Default)]
pub(crate) struct Scans {
    results: Vec<(u8, usize, usize)>,
    data: Vec<u8>,
}

impl Scans {
    pub(crate) fn clear(&mut self) {
        self.results.clear();
        self.data.clear();
    }

    /// The result of scan `i` (in the order they were run).
    pub(crate) fn result(&self, i: usize) -> (u8, &[u8]) {
        let (status, start, end) = self.results[i];
        (status, &self.data[start..end])
    }

    /// Bytes held allocated, for the accounting of client memory.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.data.capacity() + self.results.capacity() * size_of::<(u8, usize, usize)>()
    }

    /// Bytes of result data so far (against the request's budget).
    pub(crate) fn data_bytes(&self) -> usize {
        self.data.len()
    }

    /// Gives back a large request's buffer.
    pub(crate) fn shrink(&mut self, bytes: usize) {
        self.clear();
        self.data.shrink_to(bytes);
    }

    /// Runs one scan operation (`prefix`, `arg`) with result data of at most `bytes_max`
    /// (none kept with `no_return`), from a shard's thread; returns its index.
    pub(crate) async fn run(
        &mut self,
        ctx: &ShardCtx,
        prefix: &[u8],
        arg: &[u8],
        bytes_max: usize,
        no_return: bool,
    ) -> usize {
        let start = self.data.len();
        let status = match request(arg, ctx.shards()) {
            Err(status) => status,
            Ok((pos, count)) if usize::from(pos.shard) == ctx.id => {
                step(ctx, prefix, pos, count, bytes_max, &mut self.data)
            }
            Ok((pos, count)) => {
                let (tx, rx) = oneshot::channel();
                let job = call(prefix, pos, count, bytes_max, tx);
                let answer = match ctx.peers[usize::from(pos.shard)].send(job).await {
                    Ok(()) => rx.await.ok(),
                    Err(_) => None,
                };
                self.take(answer)
            }
        };
        self.finish(status, start, no_return)
    }

    /// [`Scans::run`] from a thread outside the shards (the UDP thread).
    pub(crate) fn run_blocking(
        &mut self,
        peers: &[mpsc::Sender<Job>],
        prefix: &[u8],
        arg: &[u8],
        bytes_max: usize,
        no_return: bool,
    ) -> usize {
        let start = self.data.len();
        let status = match request(arg, peers.len()) {
            Err(status) => status,
            Ok((pos, count)) => {
                let (tx, rx) = oneshot::channel();
                let job = call(prefix, pos, count, bytes_max, tx);
                let answer = match peers[usize::from(pos.shard)].blocking_send(job) {
                    Ok(()) => rx.blocking_recv().ok(),
                    Err(_) => None,
                };
                self.take(answer)
            }
        };
        self.finish(status, start, no_return)
    }

    /// Appends another shard's answer; its status.
    fn take(&mut self, answer: Option<(u8, Vec<u8>)>) -> u8 {
        match answer {
            Some((status, data)) => {
                self.data.extend_from_slice(&data);
                status
            }
            None => UNAVAILABLE,
        }
    }

    fn finish(&mut self, status: u8, start: usize, no_return: bool) -> usize {
        if status != status::OK || no_return {
            self.data.truncate(start);
        }
        self.results.push((status, start, self.data.len()));
        self.results.len() - 1
    }
}

/// The position and count of a scan argument, or the status of why it is not one.
fn request(arg: &[u8], shards: usize) -> Result<(ScanPosition, u32), u8> {
    let (cursor, count) = parse_scan_args(arg).ok_or(BAD_ARGUMENT)?;
    let pos = ScanPosition::of(cursor);
    if usize::from(pos.shard) >= shards {
        return Err(BAD_ARGUMENT);
    }
    Ok((pos, count))
}

/// A job that runs one step on the position's shard and sends back its status and data.
fn call(
    prefix: &[u8],
    pos: ScanPosition,
    count: u32,
    bytes_max: usize,
    reply: oneshot::Sender<(u8, Vec<u8>)>,
) -> Job {
    let prefix = prefix.to_vec();
    Job::Call {
        f: Box::new(move |ctx: &ShardCtx| {
            let mut data = Vec::new();
            let status = step(ctx, &prefix, pos, count, bytes_max, &mut data);
            let _ = reply.send((status, data));
        }),
    }
}

/// One step of a scan on this shard (`pos.shard` is `ctx.id`): appends the result (next
/// cursor, keys) to `out` and returns its status; on an error `out` may hold a partial result
/// the caller drops.
fn step(
    ctx: &ShardCtx,
    prefix: &[u8],
    pos: ScanPosition,
    count: u32,
    bytes_max: usize,
    out: &mut Vec<u8>,
) -> u8 {
    debug_assert_eq!(usize::from(pos.shard), ctx.id);
    let hard = bytes_max.min(ctx.cfg.value_len_max);
    if hard < 8 {
        // Not even the next cursor fits.
        return TOO_LARGE;
    }
    let soft = hard.min(SCAN_REPLY_BYTES_MAX);
    let count = u64::from(count.clamp(1, SCAN_COUNT_MAX));
    let bucket_budget = count * SCAN_BUCKETS_PER_KEY;
    let buckets = ctx.scan_buckets();
    let at = scan_reply_begin(out);
    let (mut bucket, mut skip) = (pos.bucket, pos.skip);
    let (mut keys, mut visited) = (0u64, 0u64);
    let next = loop {
        if bucket >= buckets {
            break next_shard(pos.shard, ctx.shards());
        }
        // Every step visits at least one bucket, so a scan always moves on.
        if visited > 0 && (keys >= count || visited >= bucket_budget || out.len() - at >= soft) {
            break at_bucket(pos.shard, bucket, 0);
        }
        let mut seen = 0u64;
        let mut cut = None;
        ctx.scan(bucket, 1, |k, _, _| {
            let position = seen;
            seen += 1;
            if cut.is_some() || position < skip || !k.starts_with(prefix) {
                return;
            }
            if out.len() - at + scan_reply_key_len(k) > hard {
                cut = Some(position);
                return;
            }
            scan_reply_key(out, k);
            keys += 1;
        });
        visited += 1;
        if let Some(position) = cut {
            if bucket == pos.bucket && position == pos.skip {
                // Not even this step's first key fits: no progress is possible.
                return TOO_LARGE;
            }
            break at_bucket(pos.shard, bucket, position.min(SCAN_CURSOR_SKIP_MAX));
        }
        bucket += 1;
        skip = 0;
    };
    scan_reply_finish(out, at, next);
    status::OK
}

fn at_bucket(shard: u16, bucket: u64, skip: u64) -> u64 {
    ScanPosition {
        shard,
        bucket,
        skip,
    }
    .cursor()
}

/// The cursor after the last bucket of `shard`: the next shard's start, or 0 (done).
fn next_shard(shard: u16, shards: usize) -> u64 {
    let next = usize::from(shard) + 1;
    if next < shards {
        at_bucket(next as u16, 0, 0)
    } else {
        0
    }
}
