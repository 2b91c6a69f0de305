//! Time and active expiry for a shard's engine (issue 20 item 1).
//!
//! ```text
//!  ShardCtx::execute ── set_now(wall clock ms) ──> Engine::execute   (lazy: a lookup drops
//!                                                                     an expired key)
//!  sweep task (this file, one per shard, on the shard's thread):
//!     pass: cursor 0 ─ step (expire_sweep_buckets main buckets) ─ yield ─ step ─ ... ─ 0
//!     rest expire_sweep_interval_ms, skip the pass while no key has a deadline
//! ```
//!
//! A step runs between the shard's batches (the task yields after each one, so requests
//! waiting behind it run first) and a pass visits every main bucket with its chain once, so a
//! key is reclaimed at the latest one rest and one pass after its deadline, however idle the
//! shard. The wall clock is milliseconds since the Unix epoch, as Redis's absolute
//! EXPIREAT/PEXPIREAT deadlines are.

use std::rc::Rc;
use std::time::Duration;

use super::{panics, ShardCtx};

/// Milliseconds since the Unix epoch (the engine's `now`); 0 on a clock before 1970.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The sweep of one shard: runs until the shard's runtime stops.
pub(crate) async fn sweep(ctx: Rc<ShardCtx>) {
    let rest = Duration::from_millis(ctx.cfg.expire_sweep_interval_ms);
    let buckets = ctx.cfg.expire_sweep_buckets as u64;
    let mut cursor = 0u64;
    loop {
        if cursor == 0 {
            tokio::time::sleep(rest).await;
            if ctx.expiring_keys() == 0 {
                continue;
            }
        }
        // A panic in a step is a bug: counted and logged, and the pass starts over.
        cursor = panics::contain_blocking("expiry sweep", &ctx.stats, || {
            ctx.sweep_step(cursor, buckets)
        })
        .unwrap_or(0);
        tokio::task::yield_now().await;
    }
}
