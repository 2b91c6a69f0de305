//! The protocol-neutral core of every request path: operations grouped into one batch per
//! shard, executed (this shard's on its engine, the others' over their queues), and read back
//! in the order they were planned. RESP, native TCP and UDP, and OCSM all plan into a [`Plan`]
//! and call one of the two `execute` functions here; none of them touches an engine or a shard
//! queue by itself.
//!
//! ```text
//!  protocol ──Plan::op──> Plan { per-shard OwnedBatch, (shard, index) of every op }
//!           ──execute (a shard's task) / execute_blocking (a thread outside the shards)──>
//!           per-shard Results ──Plan::result(op)──> protocol's reply encoder
//! ```
//!
//! Why here and not in a protocol file: a new protocol (memcached) or a proxy plans into the
//! same `Plan` and gets cross-shard forwarding, its counters and the one door to the engine
//! (`ShardCtx::execute`) without importing another protocol's connection code.

use std::sync::atomic::Ordering;

use directkv_engine::{Op, OpError, Results, Status};
use directkv_proto::native::shard_of_hash;
use tokio::sync::{mpsc, oneshot};

use super::batch::OwnedBatch;
use super::{Job, ShardCtx};

/// The shard that owns a key: the protocol's shard rule (`directkv_proto::native`'s
/// `shard_of_hash`, the one the shard map tells clients) over the engine's key hash, so a
/// shard-aware client and the server cannot disagree.
#[inline]
pub(crate) fn shard_of(key: &[u8], shards: usize) -> usize {
    if shards == 1 {
        return 0;
    }
    debug_assert!(
        shards <= usize::from(u16::MAX),
        "the shard map counts shards in a u16"
    );
    usize::from(shard_of_hash(directkv_engine::key_hash(key), shards as u16))
}

/// Operations grouped by shard, and where each landed.
#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) batches: Vec<OwnedBatch>,
    /// Per shard: the results of its last executed batch (`None`: the shard did not answer).
    /// Kept between plans so their buffers are reused; only the shards that had operations
    /// in this plan are read.
    results: Vec<Option<Results>>,
    /// (shard, index in that shard's batch) of every operation, in plan order.
    locs: Vec<(usize, usize)>,
    /// Cap on each shard's results data below the engine's `results_bytes_max` (0: none).
    results_cap: usize,
}

impl Plan {
    pub(crate) fn new(shards: usize) -> Plan {
        Plan {
            batches: (0..shards).map(|_| OwnedBatch::default()).collect(),
            results: (0..shards).map(|_| None).collect(),
            locs: Vec::new(),
            results_cap: 0,
        }
    }

    /// Caps the results data of each shard's batch at `bytes` (0: the engine's
    /// `results_bytes_max` alone): past it, operations get `ReplyTooLarge` and the buffers stay
    /// that small (UDP: a reply is never larger than its request).
    pub(crate) fn set_results_cap(&mut self, bytes: usize) {
        self.results_cap = bytes;
    }

    /// Bytes the plan holds allocated (copied operations and results), for the accounting of
    /// client memory. A few loads per shard: called once per batch, not per operation.
    pub(crate) fn capacity_bytes(&self) -> usize {
        let batches: usize = self.batches.iter().map(OwnedBatch::capacity_bytes).sum();
        let results: usize = self
            .results
            .iter()
            .flatten()
            .map(Results::capacity_bytes)
            .sum();
        batches + results + self.locs.capacity() * size_of::<(usize, usize)>()
    }

    /// Empties the plan and gives back all but `bytes` of each buffer's capacity, once its
    /// replies are written: a plan that answered a large request does not keep its memory.
    /// Buffers already at most `bytes` are left alone (no reallocation on the fast path).
    pub(crate) fn release(&mut self, bytes: usize) {
        self.clear();
        for b in &mut self.batches {
            if b.capacity_bytes() > bytes {
                b.release(bytes);
            }
        }
        for r in self.results.iter_mut().flatten() {
            if r.capacity_bytes() > bytes {
                r.release(bytes);
            }
        }
        let locs = bytes / size_of::<(usize, usize)>();
        if self.locs.capacity() > locs {
            self.locs.shrink_to(locs);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.batches.iter_mut().for_each(OwnedBatch::clear);
        self.locs.clear();
    }

    /// The number of shards operations are planned over.
    pub(crate) fn shards(&self) -> usize {
        self.batches.len()
    }

    /// Operations planned since the last `clear`.
    pub(crate) fn len(&self) -> usize {
        self.locs.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.locs.is_empty()
    }

    /// Adds an operation; returns its index in the plan.
    #[inline]
    pub(crate) fn op(&mut self, op: &Op) -> usize {
        let shard = shard_of(op.key, self.batches.len());
        let i = self.batches[shard].push(op);
        self.locs.push((shard, i));
        self.locs.len() - 1
    }

    /// Takes shard `s`'s batch and a results buffer to run it into (the last one, reused).
    pub(super) fn take_for_execution(&mut self, s: usize) -> (OwnedBatch, Results) {
        let mut results = self.results[s].take().unwrap_or_default();
        results.set_bytes_cap(self.results_cap);
        (std::mem::take(&mut self.batches[s]), results)
    }

    /// Puts back what `take_for_execution` took, with the results filled in.
    pub(super) fn executed(&mut self, s: usize, batch: OwnedBatch, results: Results) {
        self.batches[s] = batch;
        self.results[s] = Some(results);
    }

    /// Runs this shard's batch on its engine (the caller is a task of shard `ctx.id`).
    fn execute_local(&mut self, ctx: &ShardCtx) {
        let s = ctx.id;
        let mut r = self.results[s].take().unwrap_or_default();
        r.set_bytes_cap(self.results_cap);
        ctx.execute(&self.batches[s].ops(), &mut r);
        self.results[s] = Some(r);
    }

    /// Runs `ops`, whose keys all belong to shard `ctx.id` (the caller's), on its engine as
    /// they are, instead of operations planned with `op`: a protocol whose operations borrow
    /// its input (memcached's gets on one shard) skips copying them into the batch. The plan
    /// must be empty; `result(i)` then answers `ops[i]` until the next `clear`.
    pub(crate) fn execute_direct(&mut self, ctx: &ShardCtx, ops: &[Op<'_>]) {
        debug_assert!(
            self.is_empty(),
            "operations planned with `op` would not run"
        );
        debug_assert!(ops.iter().all(|o| shard_of(o.key, self.shards()) == ctx.id));
        let s = ctx.id;
        let mut r = self.results[s].take().unwrap_or_default();
        r.set_bytes_cap(self.results_cap);
        ctx.execute(ops, &mut r);
        self.results[s] = Some(r);
        // Where `result` finds each answer, as if `op` had planned them.
        self.locs.extend((0..ops.len()).map(|i| (s, i)));
    }

    /// The results of shard `s`'s last batch: after `execute_direct`, operation `i`'s are at
    /// index `i`, so a protocol answering many of them reads them without `result`'s lookup.
    #[inline]
    pub(crate) fn results_of(&self, s: usize) -> Option<&Results> {
        self.results[s].as_ref()
    }

    /// Status and data of planned operation `op`, once its shard's batch ran.
    #[inline]
    pub(crate) fn result(&self, op: usize) -> (Status, &[u8]) {
        let (s, i) = self.locs[op];
        match &self.results[s] {
            Some(r) => (r.status(i), r.data(i)),
            None => (
                Status::Error(OpError::UserFunction("shard unavailable")),
                &[],
            ),
        }
    }
}

/// Executes a plan from a task of shard `ctx.id`: its own batch directly, the others' over
/// their queues (sent first, so they run while the local one does), counted as forwarded.
/// Results land in the plan.
pub(crate) async fn execute(ctx: &ShardCtx, p: &mut Plan) {
    let mut waits = Vec::new();
    for s in 0..ctx.shards() {
        if p.batches[s].is_empty() || s == ctx.id {
            continue;
        }
        let (tx, rx) = oneshot::channel();
        let (batch, results) = p.take_for_execution(s);
        ctx.stats.forwarded_batches.fetch_add(1, Ordering::Relaxed);
        ctx.stats
            .forwarded_ops
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let job = Job::Execute {
            batch,
            results,
            reply: tx,
        };
        if ctx.peers[s].send(job).await.is_ok() {
            waits.push((s, rx));
        }
    }
    if !p.batches[ctx.id].is_empty() {
        p.execute_local(ctx);
    }
    for (s, rx) in waits {
        if let Ok((batch, r)) = rx.await {
            p.executed(s, batch, r);
        }
    }
}

/// Executes a plan from a thread outside the shards (UDP, OCSM's own thread): sends every
/// shard its batch and waits for the results, which land in the plan.
pub(crate) fn execute_blocking(peers: &[mpsc::Sender<Job>], p: &mut Plan) {
    let mut waits = Vec::new();
    for (s, peer) in peers.iter().enumerate() {
        if p.batches[s].is_empty() {
            continue;
        }
        let (tx, rx) = oneshot::channel();
        let (batch, results) = p.take_for_execution(s);
        let job = Job::Execute {
            batch,
            results,
            reply: tx,
        };
        if peer.blocking_send(job).is_ok() {
            waits.push((s, rx));
        }
    }
    for (s, rx) in waits {
        if let Ok((batch, r)) = rx.blocking_recv() {
            p.executed(s, batch, r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_range_evenly() {
        let mut counts = [0usize; 3];
        for i in 0..30_000u32 {
            counts[shard_of(&i.to_le_bytes(), 3)] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn shard_of_is_the_formula_it_replaced() {
        // The rule as the server wrote it before it called the protocol's: bits 52..64 of the
        // key hash, multiply-shift onto the shard count.
        for shards in [2usize, 3, 7, 64] {
            for i in 0..1_000u32 {
                let key = i.to_le_bytes();
                let h = directkv_engine::key_hash(&key);
                assert_eq!(
                    shard_of(&key, shards),
                    (((h >> 52) as usize) * shards) >> 12
                );
            }
        }
    }
}
