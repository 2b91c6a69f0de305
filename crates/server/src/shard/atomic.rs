//! Atomic plans: multi-key commands that run all or nothing and are never seen half applied
//! (issue 19 item 9: at out-of-memory an MSET once answered `-OOM` but stored 10 of its 20
//! keys). MSET uses it today; MSETNX, COPY and MULTI/EXEC (issue 20) are meant to: a command
//! plans its operations into a `dispatch::Plan` as usual and runs it with [`execute`] instead
//! of `dispatch::execute`; a multi-key read that must not see a cross-shard write half done
//! (MGET) runs with [`read`]. A MULTI/EXEC transaction runs with [`execute_tx`]: the same
//! holding of shards and commit step, without the all-or-nothing check (its commands fail one
//! by one, as in Redis), and with its watched keys' shards held too while WATCH decides.
//!
//! ```text
//!  execute(plan)  one shard, this one:   check + execute in one synchronous step
//!                 one shard, another:    Job::Atomic, which does the same on that shard's thread
//!                 several shards:        CROSS_SHARD lock (one cross-shard write at a time)
//!                   ├─ Job::Hold to every other involved shard, ascending: it checks its part
//!                   │  (Engine::check_atomic), answers "fits" and parks its thread on a std
//!                   │  channel: none of its tasks or jobs runs until the decision
//!                   ├─ every answer "fits" ─> this shard checks its own part, then, with no
//!                   │  await in between: EPOCH odd, own part executed, Commit sent to each
//!                   │  parked shard (which executes its part first thing), EPOCH even
//!                   └─ any refusal, error or dropped coordinator ─> the decision senders are
//!                      dropped: every parked shard wakes, executes nothing, goes on
//!  read(plan)     EPOCH sampled (even) ─> dispatch::execute ─> EPOCH unchanged? done : retry
//!                 (after READ_TRIES_MAX tries: under the CROSS_SHARD lock, where no write runs)
//! ```
//!
//! Why all or nothing: every shard's part passes `Engine::check_atomic` (limits, then a trial
//! allocation of every block its writes may need) and is executed with nothing else run on that
//! engine in between: a parked shard's thread runs nothing, and the coordinator's own check and
//! execute are one synchronous step. So no part runs out of memory, and either every part
//! executes or none does. The commit step cannot be cancelled half way: it has no await. Before
//! it, dropping the coordinator's future (its client left, the server stops, a panic) drops the
//! decision senders, which every parked shard reads as Abort; a `Hold` still queued finds its
//! `ready` receiver gone and does not park.
//!
//! Why no other client sees it half applied: once a shard answered "fits" it runs nothing else
//! until it has executed its part, so any later operation on it sees the new values; the
//! coordinator's part appears in one synchronous step. A multi-key read (MGET) that touches
//! several shards can still straddle a write: its read of a parked shard's key from before the
//! park, of the coordinator's after the commit. [`read`] detects it as a seqlock does: EPOCH is
//! odd exactly during a commit step, so a read that saw any part of a commit finds EPOCH moved
//! (the commit's increment happens-before, through the shard queues and reply channels, every
//! read that observed its values), and runs again.
//!
//! Why no deadlock: a shard's thread blocks synchronously only while parked in a `Hold`, and
//! only the holder of CROSS_SHARD sends Holds, so at most one coordinator parks shards, and it
//! never parks its own shard. What that coordinator awaits: (1) the lock; (2) room in an
//! involved shard's bounded queue and its "fits" answer: that shard is not parked (by anyone
//! else, since only the lock holder parks, and not yet by us), and its job loop runs each job
//! synchronously without waiting on another shard, so it drains its queue and reaches the
//! Hold, even when its own connections are waiting for room in a parked shard's queue (they
//! wait asynchronously, so the thread keeps running jobs); (3) after the commit, each shard's
//! results, which it sends right after executing. The coordinator's own thread never blocks,
//! so the shards parked for it, and the other shards' tasks waiting on those, wait for nothing
//! but the coordinator. Threads outside the shards (UDP, OCSM, metrics) that block on a parked
//! shard wait for its commit; nothing the coordinator waits for depends on them.
//!
//! Costs: a plan on one shard costs a check (a few slab allocations and frees per write) on
//! top of the batch; a cross-shard plan costs the lock and two messages per other shard, and
//! parks those shards for one round trip. CROSS_SHARD and EPOCH are process-wide (one server
//! per process in production; servers in one test process merely share them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;

use directkv_engine::{OpError, Results};
use tokio::sync::oneshot;

use super::batch::OwnedBatch;
use super::dispatch::{self, Plan};
use super::panics;
use super::{Job, ShardCtx};

/// One cross-shard atomic plan at a time, and none while a multi-key read falls back to
/// reading under it.
pub(crate) static CROSS_SHARD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Odd while a cross-shard plan's commit step runs; +2 per commit.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Tries of a multi-key read before it takes the CROSS_SHARD lock (so a stream of cross-shard
/// writes cannot starve it).
const READ_TRIES_MAX: usize = 8;

/// A shard that did not answer (its queue closed: the server stops, or it panicked).
const UNAVAILABLE: OpError = OpError::UserFunction("shard unavailable");

/// What a shard parked by a `Hold` is told.
pub(crate) enum Decision {
    Commit,
}

/// A `Hold`'s channels: "fits" (or the refusal) on `ready`, then the decision (a dropped sender
/// is Abort), then the results on `done`.
pub(crate) struct HoldChannels {
    /// Whether the part is checked (`Engine::check_atomic`) before "fits": not for a
    /// transaction, whose commands fail one by one as they would outside it.
    pub(crate) check: bool,
    pub(crate) ready: oneshot::Sender<Result<(), OpError>>,
    pub(crate) decision: std_mpsc::Receiver<Decision>,
    pub(crate) done: oneshot::Sender<(OwnedBatch, Results)>,
}

/// Runs the plan's operations all or nothing, with its results in the plan on `Ok`. On `Err`
/// (the first limit error, `OutOfMemory`, or a shard unavailable) nothing was stored, and the
/// plan's results are not to be read.
pub(crate) async fn execute(ctx: &ShardCtx, p: &mut Plan) -> Result<(), OpError> {
    let mut involved = (0..ctx.shards()).filter(|&s| !p.batches[s].is_empty());
    let (Some(first), second) = (involved.next(), involved.next()) else {
        return Ok(());
    };
    if second.is_some() {
        ctx.stats.atomic_cross_shard.fetch_add(1, Ordering::Relaxed);
        return refused(ctx, execute_cross(ctx, p).await);
    }
    let (batch, mut results) = p.take_for_execution(first);
    if first == ctx.id {
        let r = ctx.execute_atomic(&batch.ops(), &mut results);
        p.executed(first, batch, results);
        return refused(ctx, r);
    }
    let (tx, rx) = oneshot::channel();
    let job = Job::Atomic {
        batch,
        results,
        reply: tx,
    };
    if ctx.peers[first].send(job).await.is_err() {
        return Err(UNAVAILABLE);
    }
    let Ok((batch, results, r)) = rx.await else {
        return Err(UNAVAILABLE);
    };
    p.executed(first, batch, results);
    refused(ctx, r)
}

/// Counts a refusal.
fn refused(ctx: &ShardCtx, r: Result<(), OpError>) -> Result<(), OpError> {
    if r.is_err() {
        ctx.stats.atomic_refused.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// A shard parked by a `Hold`: the sender of its decision (dropping it aborts) and where its
/// results come back.
struct Parked {
    shard: usize,
    decide: std_mpsc::Sender<Decision>,
    done: oneshot::Receiver<(OwnedBatch, Results)>,
}

/// Sends each of `shards` (ascending, not this one) a `Hold` of its part of `p` and waits
/// until every one answered "fits" (`check`: after `Engine::check_atomic`). Dropping the
/// answer (an early return, or the future dropped) aborts every shard parked so far.
async fn park(
    ctx: &ShardCtx,
    p: &mut Plan,
    shards: impl Iterator<Item = usize>,
    check: bool,
) -> Result<Vec<Parked>, OpError> {
    let mut held = Vec::new();
    let mut answers = Vec::new();
    for s in shards {
        let (batch, results) = p.take_for_execution(s);
        let (ready_tx, ready) = oneshot::channel();
        let (decide, decision) = std_mpsc::channel();
        let (done_tx, done) = oneshot::channel();
        let channels = HoldChannels {
            check,
            ready: ready_tx,
            decision,
            done: done_tx,
        };
        let job = Job::Hold {
            batch,
            results,
            channels,
        };
        if ctx.peers[s].send(job).await.is_err() {
            return Err(UNAVAILABLE);
        }
        held.push(Parked {
            shard: s,
            decide,
            done,
        });
        answers.push(ready);
    }
    for ready in answers {
        match ready.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(UNAVAILABLE),
        }
    }
    Ok(held)
}

/// Tells every parked shard to commit (part of the commit step: no await).
fn commit(held: &[Parked]) {
    for h in held {
        // A parked shard keeps its receiver until it decides; a send cannot fail before.
        let _ = h.decide.send(Decision::Commit);
    }
}

/// After the commit: collects every parked shard's results into the plan.
async fn collect(p: &mut Plan, held: Vec<Parked>) -> Result<(), OpError> {
    let mut answered = true;
    for h in held {
        match h.done.await {
            Ok((batch, results)) => p.executed(h.shard, batch, results),
            Err(_) => answered = false,
        }
    }
    if answered {
        Ok(())
    } else {
        Err(UNAVAILABLE)
    }
}

/// A plan over several shards (see the module comment).
async fn execute_cross(ctx: &ShardCtx, p: &mut Plan) -> Result<(), OpError> {
    let _one_at_a_time = CROSS_SHARD.lock().await;
    let others: Vec<usize> = (0..ctx.shards())
        .filter(|&s| s != ctx.id && !p.batches[s].is_empty())
        .collect();
    let held = park(ctx, p, others.into_iter(), true).await?;
    // The commit step: no await from the own check to the last Commit sent.
    let (batch, mut results) = p.take_for_execution(ctx.id);
    let own_ops = batch.ops();
    if !own_ops.is_empty() {
        if let Err(e) = ctx.check_atomic(&own_ops) {
            drop(own_ops);
            p.executed(ctx.id, batch, results);
            return Err(e);
        }
    }
    let committing = CommitStep::begin();
    if !own_ops.is_empty() {
        ctx.execute(&own_ops, &mut results);
    }
    commit(&held);
    drop(committing);
    drop(own_ops);
    p.executed(ctx.id, batch, results);
    // Every part is committed; what is left is collecting the other shards' results.
    collect(p, held).await
}

/// EPOCH odd from `begin` to drop: the even increment happens even if the step unwinds (a
/// panic in it is a bug, but must not leave every multi-key read retrying for good).
pub(crate) struct CommitStep;

impl CommitStep {
    pub(crate) fn begin() -> CommitStep {
        EPOCH.fetch_add(1, Ordering::SeqCst);
        CommitStep
    }
}

impl Drop for CommitStep {
    fn drop(&mut self) {
        EPOCH.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs a plan of reads over several shards so that it sees every cross-shard atomic plan
/// either whole or not at all (see the module comment); results land in the plan.
pub(crate) async fn read(ctx: &ShardCtx, p: &mut Plan) {
    for _ in 0..READ_TRIES_MAX {
        let before = EPOCH.load(Ordering::SeqCst);
        if before.is_multiple_of(2) {
            dispatch::execute(ctx, p).await;
            if EPOCH.load(Ordering::SeqCst) == before {
                return;
            }
        }
        ctx.stats
            .atomic_read_retries
            .fetch_add(1, Ordering::Relaxed);
        tokio::task::yield_now().await;
    }
    let _no_writer = CROSS_SHARD.lock().await;
    dispatch::execute(ctx, p).await;
}

/// `Job::Atomic` on the shard that owns every key of the plan: check and execute in one step.
pub(crate) fn run_job(
    ctx: &ShardCtx,
    batch: OwnedBatch,
    mut results: Results,
    reply: oneshot::Sender<(OwnedBatch, Results, Result<(), OpError>)>,
) {
    let ran = panics::contain_blocking("atomic batch", &ctx.stats, || {
        ctx.execute_atomic(&batch.ops(), &mut results)
    });
    // After a panic the results are not trusted: no reply ("shard unavailable").
    if let Some(r) = ran {
        let _ = reply.send((batch, results, r));
    }
}

/// `Job::Hold`: checks this shard's part, answers, and parks this thread until the coordinator
/// commits (execute, send the results) or aborts (a dropped sender).
pub(crate) fn hold(ctx: &ShardCtx, batch: OwnedBatch, mut results: Results, c: HoldChannels) {
    let ops = batch.ops();
    let fits = if c.check {
        let Some(fits) =
            panics::contain_blocking("atomic check", &ctx.stats, || ctx.check_atomic(&ops))
        else {
            return;
        };
        fits
    } else {
        Ok(())
    };
    let refused = fits.is_err();
    if c.ready.send(fits).is_err() || refused {
        return;
    }
    // Parked: nothing else runs on this shard until the coordinator decides.
    let Ok(Decision::Commit) = c.decision.recv() else {
        return;
    };
    let ran = panics::contain_blocking("atomic commit", &ctx.stats, || {
        ctx.execute(&ops, &mut results)
    });
    drop(ops);
    if ran.is_some() {
        let _ = c.done.send((batch, results));
    }
}

/// Runs a transaction's plan (MULTI/EXEC, `resp/multi.rs`) with no other operation in between
/// on any shard it touches, unless `dirty` (a watched key changed) says otherwise once those
/// shards are held. `also` marks the shards to hold besides those with operations (the shards
/// of the watched keys). Returns whether it ran: `Ok(false)` is a transaction discarded for a
/// watched key, with nothing executed.
///
/// Unlike [`execute`], no part is checked first: a command of a transaction that fails (a
/// limit, out of memory) fails alone inside EXEC's reply, as in Redis. One shard, this one:
/// the check of `dirty` and the execution are one synchronous step. One other shard and no
/// watched key: an ordinary forwarded batch, which that shard runs in one step. Otherwise the
/// other shards
/// are held as a cross-shard plan's are, `dirty` is read while they are parked, and the commit
/// step is the same (EPOCH odd, so no multi-key read sees it half done).
pub(crate) async fn execute_tx(
    ctx: &ShardCtx,
    p: &mut Plan,
    also: &[bool],
    dirty: &dyn Fn() -> bool,
) -> Result<bool, OpError> {
    let involved: Vec<usize> = (0..ctx.shards())
        .filter(|&s| !p.batches[s].is_empty() || also.get(s).copied().unwrap_or(false))
        .collect();
    if involved.iter().all(|&s| s == ctx.id) {
        if dirty() {
            return Ok(false);
        }
        if !involved.is_empty() {
            let (batch, mut results) = p.take_for_execution(ctx.id);
            ctx.execute(&batch.ops(), &mut results);
            p.executed(ctx.id, batch, results);
        }
        return Ok(true);
    }
    if involved.len() == 1 && !also.iter().any(|&w| w) {
        // One other shard and no watched key: `dirty` cannot change, and that shard runs the
        // batch in one step like any forwarded batch.
        if dirty() {
            return Ok(false);
        }
        dispatch::execute(ctx, p).await;
        return Ok(true);
    }
    ctx.stats.atomic_cross_shard.fetch_add(1, Ordering::Relaxed);
    let _one_at_a_time = CROSS_SHARD.lock().await;
    // As in `execute_cross`: dropping `held` aborts every shard parked so far.
    let others = involved.iter().copied().filter(|&s| s != ctx.id);
    let held = park(ctx, p, others, false).await?;
    // Every other shard is parked; from here to the last Commit sent, no await.
    if dirty() {
        return Ok(false);
    }
    let (batch, mut results) = p.take_for_execution(ctx.id);
    let committing = CommitStep::begin();
    if !batch.is_empty() {
        ctx.execute(&batch.ops(), &mut results);
    }
    commit(&held);
    drop(committing);
    p.executed(ctx.id, batch, results);
    collect(p, held).await.map(|()| true)
}
