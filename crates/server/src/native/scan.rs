//! The native scan operation (issue 20 item 5): one step of a walk over every shard's index
//! (`shard/scan.rs`, the mechanism RESP's SCAN, KEYS and RANDOMKEY use too), answered around
//! the engine (it is not an engine operation: it reads many keys, none named).
//!
//! ```text
//!   scan arg (cursor, count) ──> Step on the cursor's shard: live keys starting with the
//!     prefix, stopping at a bucket boundary once `count` keys are in, after
//!     `count * SCAN_BUCKETS_PER_KEY` buckets, or past `SCAN_REPLY_BYTES_MAX` bytes
//!   <── result: next cursor (the next shard's start at the end of a shard's index, 0 after
//!       the last shard), then the keys as the step holds them (key_len u8 | key)*
//! ```
//!
//! A step never crosses shards, so a page may be empty; what a full scan guarantees is in
//! `shard/scan.rs`. The result's hard limit (`value_len_max` over TCP, what the datagram can
//! still carry over UDP) is the step's `bytes_hard`: only a bucket whose keys alone pass it is
//! sent in parts; a scan whose first key does not fit fails with "reply too large".
//!
//! Bounds: a step visits at most `SCAN_COUNT_MAX * SCAN_BUCKETS_PER_KEY` buckets (and at most
//! `scan_step_buckets`) and holds at most its result.

use directkv_proto::native::{
    parse_scan_args, scan_reply_begin, scan_reply_finish, status, ScanPosition,
    SCAN_BUCKETS_PER_KEY, SCAN_COUNT_MAX, SCAN_REPLY_BYTES_MAX,
};
use tokio::sync::mpsc;

use crate::shard::scan::{self, Step};
use crate::shard::{Job, ShardCtx};

/// The status of a scan whose argument or cursor is malformed.
const BAD_ARGUMENT: u8 = status::error(status::ERR_BAD_ARGUMENT);
/// The status of a scan whose first key would not fit the result's hard limit.
const TOO_LARGE: u8 = status::error(status::ERR_REPLY_TOO_LARGE);
/// The status of a scan whose shard did not answer (the server stops, or a panic).
const UNAVAILABLE: u8 = status::error(status::ERR_UNAVAILABLE);
/// Bytes of a result before its keys: the next cursor.
const CURSOR_BYTES: usize = 8;

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
        let shards = ctx.shards();
        let status = match request(prefix, arg, shards, bytes_max.min(ctx.cfg.value_len_max)) {
            Err(status) => status,
            Ok(step) => self.take(scan::run(ctx, step).await, shards),
        };
        self.finish(status, no_return)
    }

    /// [`Scans::run`] from a thread outside the shards (the UDP thread); `value_len_max` is
    /// the server's.
    pub(crate) fn run_blocking(
        &mut self,
        peers: &[mpsc::Sender<Job>],
        prefix: &[u8],
        arg: &[u8],
        bytes_max: usize,
        value_len_max: usize,
        no_return: bool,
    ) -> usize {
        let shards = peers.len();
        let status = match request(prefix, arg, shards, bytes_max.min(value_len_max)) {
            Err(status) => status,
            Ok(step) => self.take(scan::run_blocking(peers, step), shards),
        };
        self.finish(status, no_return)
    }

    /// Appends a step's result (next cursor, keys) as the next result's data; its status.
    fn take(&mut self, answer: Option<Step>, shards: usize) -> u8 {
        let Some(step) = answer else {
            return UNAVAILABLE;
        };
        if step.too_large {
            return TOO_LARGE;
        }
        let at = scan_reply_begin(&mut self.data);
        self.data.extend_from_slice(&step.keys);
        scan_reply_finish(&mut self.data, at, step.next_cursor(shards));
        status::OK
    }

    /// Records the result that starts after the last one: its data is dropped unless it is
    /// OK and wanted.
    fn finish(&mut self, status: u8, no_return: bool) -> usize {
        let start = self.results.last().map_or(0, |&(_, _, end)| end);
        if status != status::OK || no_return {
            self.data.truncate(start);
        }
        self.results.push((status, start, self.data.len()));
        self.results.len() - 1
    }
}

/// The step a scan operation asks for, with a result of at most `hard` bytes, or the status
/// of why it is not one.
fn request(prefix: &[u8], arg: &[u8], shards: usize, hard: usize) -> Result<Step, u8> {
    let (cursor, count) = parse_scan_args(arg).ok_or(BAD_ARGUMENT)?;
    let at = ScanPosition::of(cursor);
    if usize::from(at.shard) >= shards {
        return Err(BAD_ARGUMENT);
    }
    // Not even the next cursor fits.
    let hard = hard.checked_sub(CURSOR_BYTES).ok_or(TOO_LARGE)?;
    let count = count.clamp(1, SCAN_COUNT_MAX);
    let mut step = Step::new(
        at,
        u64::from(count) * SCAN_BUCKETS_PER_KEY,
        count as usize,
        hard.min(SCAN_REPLY_BYTES_MAX - CURSOR_BYTES),
    );
    step.bytes_hard = hard;
    step.prefix = prefix.to_vec();
    Ok(step)
}
