//! Walks over the shards' keys, in steps: the one mechanism of RESP's SCAN, KEYS and RANDOMKEY
//! (`resp/cmd/scan.rs`) and of the native scan operation (`native/scan.rs`), issue 20. A step
//! is a request to one shard, run on that shard's thread, and its answer; the commands are
//! coordinators that decide which step comes next.
//!
//! ```text
//!  cursor   bit 63 ... 48 | 47 .............. 16 | 15 ........... 0      (`ScanPosition`, one
//!           shard         | main bucket          | entries of it sent      encoding for both)
//!
//!  coordinator (a connection's task, the UDP thread, or a held transaction)
//!    Step { at, buckets, keys_max, bytes_soft, bytes_hard, prefix } ──> the shard `at.shard`
//!      here: `ShardCtx::scan_step`; another shard: `Job::Scan`; a shard parked by a
//!      transaction: `exclusive::Msg::Scan`
//!                             walk: main bucket `at.bucket` with its chain (the engine's unit
//!                             of a scan), then the next, ... while fewer than `buckets` were
//!                             visited, `keys_max` keys or `bytes_soft` bytes found
//!    <── Step { at: where to go on, ended: this shard's index is done, keys, visited }
//!  next_cursor: ended ─> the next shard's first bucket, or 0 after the last shard
//! ```
//!
//! Why a key present for a whole walk is found at least once: the engine's index never
//! resizes and a key never leaves its main bucket's chain (`Engine::scan`), a step visits each
//! bucket with its chain in one synchronous stretch of the shard's thread, and the cursor
//! moves over main buckets in order; a key added or removed meanwhile may or may not be seen,
//! and none is seen twice in one pass. Only a bucket whose keys alone pass `bytes_hard` (the
//! native result's hard limit: thousands of keys in one chain, which only a hash-flooding
//! client makes) is cut mid-bucket, its entries sent counted in the cursor; a key removed from
//! it between two steps may then make the walk miss another of its keys. Keys whose deadline
//! passed are skipped (not removed: a walk is a read). A shard without keys ends at once, so an
//! empty shard costs one step whatever its index's size.
//!
//! Limits: a step visits at most `scan_step_buckets` main buckets, whatever it asks (enforced
//! here, for every protocol: a step delays the shard's other requests by that much, about a
//! millisecond by default), and holds at most `bytes_hard` bytes of keys.

use directkv_engine::Engine;
use directkv_proto::native::{ScanPosition, SCAN_CURSOR_SKIP_MAX};
use tokio::sync::{mpsc, oneshot};

use super::{Job, ShardCtx};

/// One step of a walk over one shard's keys: the request, and after it ran, the answer.
#[derive(Debug)]
pub(crate) struct Step {
    /// The shard to run on and where to start; after the step, where to go on (unless
    /// `ended`).
    pub(crate) at: ScanPosition,
    /// Main buckets to visit at most (at least one is, unless the shard has no key).
    pub(crate) buckets: u64,
    /// Stop at the end of a bucket once this many keys were found.
    pub(crate) keys_max: usize,
    /// Stop at the end of a bucket once the keys found take this many bytes (in `keys`).
    pub(crate) bytes_soft: usize,
    /// Never hold more bytes of keys than this: a bucket that would pass it is cut.
    pub(crate) bytes_hard: usize,
    /// Only keys that start with it (empty: every key).
    pub(crate) prefix: Vec<u8>,
    /// The live keys found, each a length byte and its bytes (keys are at most 255 bytes):
    /// the native scan result's layout.
    pub(crate) keys: Vec<u8>,
    /// Main buckets visited.
    pub(crate) visited: u64,
    /// The walk reached the end of this shard's index (or the shard has no key).
    pub(crate) ended: bool,
    /// Not even the first key from `at` fits `bytes_hard`: no progress is possible.
    pub(crate) too_large: bool,
}

impl Step {
    /// A step from `at` with no byte limit but `bytes_soft` and no prefix.
    pub(crate) fn new(at: ScanPosition, buckets: u64, keys_max: usize, bytes_soft: usize) -> Step {
        Step {
            at,
            buckets,
            keys_max,
            bytes_soft,
            bytes_hard: usize::MAX,
            prefix: Vec::new(),
            keys: Vec::new(),
            visited: 0,
            ended: false,
            too_large: false,
        }
    }

    /// The keys found, in the order visited.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut at = 0usize;
        std::iter::from_fn(move || {
            let n = usize::from(*self.keys.get(at)?);
            let key = &self.keys[at + 1..at + 1 + n];
            at += 1 + n;
            Some(key)
        })
    }

    /// The cursor after this step in a server of `shards` shards: where it stopped, or the
    /// next shard's first bucket when this shard's index is done, or 0 after the last shard.
    pub(crate) fn next_cursor(&self, shards: usize) -> u64 {
        if !self.ended {
            return self.at.cursor();
        }
        next_shard(self.at.shard, shards).map_or(0, ScanPosition::cursor)
    }
}

/// The first position of the shard after `shard`, None after the last one.
pub(crate) fn next_shard(shard: u16, shards: usize) -> Option<ScanPosition> {
    let next = usize::from(shard) + 1;
    (next < shards).then(|| start_of(next as u16))
}

/// The first position of `shard`.
pub(crate) const fn start_of(shard: u16) -> ScanPosition {
    ScanPosition {
        shard,
        bucket: 0,
        skip: 0,
    }
}

/// Runs `step` on `e` (the shard's engine, its time set): see the module comment.
pub(crate) fn walk(e: &Engine, step: &mut Step) {
    step.keys.clear();
    step.visited = 0;
    step.ended = false;
    step.too_large = false;
    if e.counts().keys == 0 || step.at.bucket >= e.scan_buckets() {
        step.ended = true;
        return;
    }
    let (mut bucket, mut skip) = (step.at.bucket, step.at.skip);
    let mut found = 0usize;
    loop {
        let (mut seen, mut cut) = (0u64, None);
        let (keys, prefix, hard) = (&mut step.keys, &step.prefix, step.bytes_hard);
        let next = e.scan(bucket, 1, |k, _, _| {
            let position = seen;
            seen += 1;
            if cut.is_some() || position < skip || !k.starts_with(prefix) {
                return;
            }
            if keys.len() + 1 + k.len() > hard {
                cut = Some(position);
                return;
            }
            keys.push(k.len() as u8);
            keys.extend_from_slice(k);
            found += 1;
        });
        step.visited += 1;
        if let Some(position) = cut {
            // Not even the step's first key fits alone, or the cursor cannot hold the position.
            step.too_large = step.keys.is_empty() || position > SCAN_CURSOR_SKIP_MAX;
            step.at.bucket = bucket;
            step.at.skip = position;
            return;
        }
        skip = 0;
        if next == 0 {
            step.ended = true;
            return;
        }
        bucket = next;
        if step.visited >= step.buckets
            || found >= step.keys_max
            || step.keys.len() >= step.bytes_soft
        {
            step.at.bucket = bucket;
            step.at.skip = 0;
            return;
        }
    }
}

/// Runs `step` on its shard (`step.at.shard`): here when it is this one, else as a
/// `Job::Scan` on its thread. `None` when that shard did not answer (it stopped, or panicked).
pub(crate) async fn run(ctx: &ShardCtx, mut step: Step) -> Option<Step> {
    let shard = usize::from(step.at.shard);
    if shard == ctx.id {
        ctx.scan_step(&mut step);
        return Some(step);
    }
    let (reply, answer) = oneshot::channel();
    ctx.peers
        .get(shard)?
        .send(Job::Scan { step, reply })
        .await
        .ok()?;
    answer.await.ok()
}

/// [`run`] from a thread outside the shards (the UDP thread).
pub(crate) fn run_blocking(peers: &[mpsc::Sender<Job>], step: Step) -> Option<Step> {
    let (reply, answer) = oneshot::channel();
    peers
        .get(usize::from(step.at.shard))?
        .blocking_send(Job::Scan { step, reply })
        .ok()?;
    answer.blocking_recv().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    use directkv_engine::{EngineConfig, Op, Results};

    fn engine_with(keys: usize) -> Engine {
        let mut e = Engine::new(EngineConfig::with_memory(
            directkv_engine::engine::MEMORY_BYTES_MIN,
        ))
        .unwrap();
        let names: Vec<String> = (0..keys).map(|i| format!("key:{i}")).collect();
        let ops: Vec<Op> = names.iter().map(|k| Op::put(k.as_bytes(), b"v")).collect();
        e.execute(&ops, &mut Results::default());
        e
    }

    /// Every key once, whatever the steps' limits.
    #[test]
    fn steps_of_any_size_visit_every_key_once() {
        let e = engine_with(1000);
        for (buckets, keys_max, hard) in [
            (1, usize::MAX, usize::MAX),
            (7, 3, usize::MAX),
            (1 << 20, 10, usize::MAX),
            (u64::MAX, 1, usize::MAX),
            (u64::MAX, usize::MAX, 20),
        ] {
            let mut seen = std::collections::HashMap::new();
            let mut step = Step::new(start_of(0), buckets, keys_max, usize::MAX);
            step.bytes_hard = hard;
            loop {
                walk(&e, &mut step);
                assert!(!step.too_large);
                assert!(step.visited >= 1 && step.visited <= buckets);
                for k in step.keys() {
                    *seen.entry(k.to_vec()).or_insert(0) += 1;
                }
                if step.next_cursor(1) == 0 {
                    break;
                }
            }
            assert_eq!(seen.len(), 1000, "{buckets} {keys_max} {hard}");
            assert!(seen.values().all(|&n| n == 1));
        }
    }

    #[test]
    fn an_empty_engine_ends_at_once_and_expired_keys_are_skipped() {
        let e = engine_with(0);
        let mut step = Step::new(start_of(0), 10, 10, usize::MAX);
        walk(&e, &mut step);
        assert!(step.ended);
        assert_eq!((step.visited, step.keys.len()), (0, 0));
        let mut e = engine_with(10);
        e.set_now(1_000);
        let args = directkv_engine::expire_args(2_000, directkv_engine::cond::ANY);
        e.execute(
            &[Op::put_expire(b"gone", b"v", &args)],
            &mut Results::default(),
        );
        e.set_now(2_000);
        let mut step = Step::new(start_of(0), u64::MAX, usize::MAX, usize::MAX);
        walk(&e, &mut step);
        assert!(step.ended);
        assert_eq!(step.keys().count(), 10);
        assert!(step.keys().all(|k| k != b"gone"));
    }

    #[test]
    fn a_step_stops_at_its_bytes_and_a_prefix_filters() {
        let e = engine_with(100);
        let mut step = Step::new(start_of(0), u64::MAX, usize::MAX, 20);
        walk(&e, &mut step);
        assert!(!step.ended);
        assert!(step.keys.len() >= 20 && step.keys.len() < 20 + 10 * 8);
        let mut step = Step::new(start_of(0), u64::MAX, usize::MAX, usize::MAX);
        step.prefix = b"key:1".to_vec();
        walk(&e, &mut step);
        // key:1, key:10..19
        assert_eq!(step.keys().count(), 11);
        let mut step = Step::new(start_of(0), u64::MAX, usize::MAX, usize::MAX);
        step.bytes_hard = 3;
        walk(&e, &mut step);
        assert!(step.too_large);
    }

    /// Issue 20: the cursor after a shard's last bucket is the next shard's first, and 0
    /// after the last shard's, whether the step covered the whole index or ended on it.
    #[test]
    fn cursors_cross_shard_boundaries_and_end_at_zero() {
        let e = engine_with(5);
        let buckets = e.scan_buckets();
        for shards in [1usize, 2, 3] {
            for shard in 0..shards as u16 {
                let last = shard as usize + 1 == shards;
                let after = if last {
                    0
                } else {
                    start_of(shard + 1).cursor()
                };
                // One step over the whole index.
                let mut whole = Step::new(start_of(shard), u64::MAX, usize::MAX, usize::MAX);
                walk(&e, &mut whole);
                assert_eq!(whole.keys().count(), 5);
                assert_eq!(whole.next_cursor(shards), after, "{shards} {shard}");
                // A step of only the last bucket.
                let at = ScanPosition {
                    shard,
                    bucket: buckets - 1,
                    skip: 0,
                };
                let mut tail = Step::new(at, 1, usize::MAX, usize::MAX);
                walk(&e, &mut tail);
                assert!(tail.ended);
                assert_eq!(tail.next_cursor(shards), after, "{shards} {shard}");
                // A step that stops one bucket short points at the last bucket.
                let short = ScanPosition {
                    bucket: buckets - 2,
                    ..at
                };
                let mut short = Step::new(short, 1, usize::MAX, usize::MAX);
                walk(&e, &mut short);
                assert!(!short.ended);
                assert_eq!(short.next_cursor(shards), at.cursor());
            }
        }
        // A shard with no key ends at once, from anywhere.
        let empty = engine_with(0);
        let mut step = Step::new(start_of(1), 1, 1, 1);
        walk(&empty, &mut step);
        assert_eq!(step.next_cursor(3), start_of(2).cursor());
        assert_eq!(step.next_cursor(2), 0);
    }
}
