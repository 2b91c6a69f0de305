//! `flush_all [delay]`: memcached invalidates every item at once, or, with a delay, every
//! item stored before the time the delay names, when that time comes.
//!
//! directkv flushes through the one door that empties a shard (`Job::Flush` to every shard,
//! as FLUSHALL): at once, or from a timer task started on this shard that sleeps until the
//! time and then flushes. A later `flush_all` replaces a pending one, as memcached keeps one
//! `oldest_live` time: each call takes the next generation number, and a timer whose
//! generation is no longer the latest does nothing.
//!
//! How it differs from memcached: the timer removes what exists when it fires, which is what
//! memcached hides from then on (items written before that time); memcached also hides items
//! written within the same second as the deadline. A timer lives in the process: a server
//! stopped before it fires never flushes (memcached forgets it too on restart).
//!
//! Under a failed persistence log (`Store::is_failed`) a flush is a refused write, as FLUSHALL's
//! MISCONF over RESP: `flush_all` answers false (the connection sends a `SERVER_ERROR` line),
//! starts no timer, and a shard whose flush is refused keeps its items.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::shard::{ask_all, Job, ShardCtx};
use crate::stats::ServerStats;

/// The generation of the latest `flush_all` (a field of `ServerStats`' memcache counters).
#[derive(Debug, Default)]
pub(crate) struct FlushTimer {
    generation: AtomicU64,
}

/// Runs `flush_all` with `delay` (an exptime: seconds, or a Unix time beyond 30 days).
/// False if the persistence log failed: nothing was flushed, or not on every shard.
pub(crate) async fn flush_all(ctx: &ShardCtx, delay: Option<i32>) -> bool {
    if ctx.store.as_ref().is_some_and(|st| st.is_failed()) {
        return false;
    }
    let stats: &Arc<ServerStats> = &ctx.stats;
    let generation = stats
        .memcache_flush
        .generation
        .fetch_add(1, Ordering::Relaxed)
        + 1;
    let now = crate::shard::expiry::now_ms();
    let at = match delay {
        Some(d) if d > 0 => super::exec::deadline(d, now),
        _ => 0,
    };
    if at <= now {
        let done = ask_all(ctx, |reply| Job::Flush { reply }).await;
        return done.iter().all(|ok| *ok);
    }
    let peers = ctx.peers.clone();
    let stats = stats.clone();
    tokio::task::spawn_local(async move {
        tokio::time::sleep(Duration::from_millis(at - now)).await;
        if stats.memcache_flush.generation.load(Ordering::Relaxed) != generation {
            return;
        }
        let mut waits = Vec::with_capacity(peers.len());
        for peer in peers.iter() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            if peer.send(Job::Flush { reply: tx }).await.is_ok() {
                waits.push(rx);
            }
        }
        for w in waits {
            let _ = w.await;
        }
        tracing::debug!("memcached flush_all with a delay: flushed");
    });
    true
}
