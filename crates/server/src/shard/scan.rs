//! Walks over the keys of a shard's index, in steps, for SCAN, KEYS and RANDOMKEY (issue 20
//! item 3; the commands are in `resp/cmd/scan.rs`). Protocol-neutral: a step is a request to
//! one shard, run on that shard's thread, and its answer.
//!
//! ```text
//!  coordinator (a connection's task)            the shard that owns the keys
//!    Step { cursor, buckets, keys_max, ... } ──> walk: main bucket `cursor`, with its chain,
//!      (own shard: a call; other: Job::Scan)       then the next, ... until `buckets` were
//!                                                  visited, `keys_max` keys or `bytes_max`
//!    <── Step { cursor: where to go on (0: the      bytes found, or the index ended
//!               index ended), keys, visited }
//! ```
//!
//! Why a key present for a whole walk is found at least once: the engine's index never
//! resizes and a key never leaves its main bucket's chain (`Engine::scan`), a step visits each
//! bucket with its chain in one synchronous stretch of the shard's thread, and the cursor
//! moves over main buckets in order; a key added or removed meanwhile may or may not be seen,
//! and none is seen twice in one pass. Keys whose deadline passed are skipped (not removed: a
//! walk is a read). A shard without keys answers at once, so an empty shard costs one step
//! whatever its index's size.
//!
//! Limits: a step visits at most `scan_step_buckets` main buckets (a step delays the shard's
//! other requests by that much, about a millisecond by default) and holds at most `bytes_max`
//! bytes of keys, which the caller sets from `results_bytes_max`.

use directkv_engine::Engine;
use tokio::sync::oneshot;

use super::{Job, ShardCtx};

/// One step of a walk over one shard's keys: the request, and after it ran, the answer.
#[derive(Debug, Default)]
pub(crate) struct Step {
    /// The main bucket to start from; after the step, the one to continue from (0: the end of
    /// the index was reached).
    pub(crate) cursor: u64,
    /// Main buckets to visit at most. 0 visits none: the step only tells whether the shard is
    /// empty (`ended`), so a walk out of budget can still pass over empty shards.
    pub(crate) buckets: u64,
    /// Stop at the end of a bucket once this many keys were found.
    pub(crate) keys_max: usize,
    /// Stop at the end of a bucket once the keys found take this many bytes.
    pub(crate) bytes_max: usize,
    /// The live keys found, each a length byte and its bytes (keys are at most 255 bytes).
    pub(crate) keys: Vec<u8>,
    /// Main buckets visited.
    pub(crate) visited: u64,
    /// The walk reached the end of this shard's index (it has no key at all, or `cursor` is 0
    /// after visiting buckets).
    pub(crate) ended: bool,
}

impl Step {
    pub(crate) fn new(cursor: u64, buckets: u64, keys_max: usize, bytes_max: usize) -> Step {
        Step {
            cursor,
            buckets,
            keys_max,
            bytes_max,
            ..Default::default()
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
}

/// Runs `step` on `e` (the shard's engine, its time set): see the module comment.
pub(crate) fn walk(e: &Engine, step: &mut Step) {
    step.keys.clear();
    step.visited = 0;
    step.ended = false;
    if e.counts().keys == 0 {
        step.cursor = 0;
        step.ended = true;
        return;
    }
    if step.buckets == 0 {
        return;
    }
    let mut found = 0usize;
    let mut cursor = step.cursor;
    loop {
        let keys = &mut step.keys;
        cursor = e.scan(cursor, 1, |k, _, _| {
            keys.push(k.len() as u8);
            keys.extend_from_slice(k);
            found += 1;
        });
        step.visited += 1;
        if cursor == 0
            || step.visited >= step.buckets
            || found >= step.keys_max
            || step.keys.len() >= step.bytes_max
        {
            break;
        }
    }
    step.cursor = cursor;
    step.ended = cursor == 0;
}

/// Runs `step` on shard `shard`: here when it is this one, else as a `Job::Scan` on its
/// thread. `None` when that shard did not answer (it stopped, or panicked).
pub(crate) async fn run(ctx: &ShardCtx, shard: usize, mut step: Step) -> Option<Step> {
    if shard == ctx.id {
        ctx.scan_step(&mut step);
        return Some(step);
    }
    let (reply, answer) = oneshot::channel();
    ctx.peers[shard]
        .send(Job::Scan { step, reply })
        .await
        .ok()?;
    answer.await.ok()
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
        for (buckets, keys_max) in [(1, usize::MAX), (7, 3), (1 << 20, 10), (u64::MAX, 1)] {
            let mut seen = std::collections::HashMap::new();
            let mut step = Step::new(0, buckets, keys_max, usize::MAX);
            loop {
                walk(&e, &mut step);
                assert!(step.visited >= 1 && step.visited <= buckets);
                for k in step.keys() {
                    *seen.entry(k.to_vec()).or_insert(0) += 1;
                }
                if step.cursor == 0 {
                    break;
                }
            }
            assert_eq!(seen.len(), 1000, "{buckets} {keys_max}");
            assert!(seen.values().all(|&n| n == 1));
        }
    }

    #[test]
    fn an_empty_engine_ends_at_once_and_expired_keys_are_skipped() {
        let e = engine_with(0);
        let mut step = Step::new(0, 10, 10, usize::MAX);
        walk(&e, &mut step);
        assert_eq!((step.cursor, step.visited, step.keys.len()), (0, 0, 0));
        let mut e = engine_with(10);
        e.set_now(1_000);
        let args = directkv_engine::expire_args(2_000, directkv_engine::cond::ANY);
        e.execute(
            &[Op::put_expire(b"gone", b"v", &args)],
            &mut Results::default(),
        );
        e.set_now(2_000);
        let mut step = Step::new(0, u64::MAX, usize::MAX, usize::MAX);
        walk(&e, &mut step);
        assert_eq!(step.cursor, 0);
        assert_eq!(step.keys().count(), 10);
        assert!(step.keys().all(|k| k != b"gone"));
    }

    #[test]
    fn a_step_stops_at_its_bytes() {
        let e = engine_with(100);
        let mut step = Step::new(0, u64::MAX, usize::MAX, 20);
        walk(&e, &mut step);
        assert_ne!(step.cursor, 0);
        assert!(step.keys.len() >= 20 && step.keys.len() < 20 + 10 * 8);
    }
}
