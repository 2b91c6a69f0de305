//! Exclusive sections: a multi-key command that must read before it writes, on keys of several
//! shards, with no other client's command on those shards in between (RENAME, RENAMENX, COPY,
//! MSETNX; issue 20 item 3), and a transaction that holds one, or a command that needs every
//! shard (SCAN, KEYS, RANDOMKEY, DBSIZE, FLUSHALL, FLUSHDB, INFO: `resp/multi.rs`). `atomic.rs`
//! runs writes planned in advance all or nothing; a
//! RENAME cannot be planned in advance (its write carries the value it reads), so it runs here:
//! every other involved shard is parked, and the command's reads and writes run in one
//! synchronous stretch of the coordinator's thread.
//!
//! ```text
//!  run(ctx, shards, f)   all on this shard:  f(held) now, synchronously (no other task runs)
//!                        otherwise:          atomic's CROSS_SHARD lock
//!                          ├─ Job::Park to every other involved shard, ascending; each answers
//!                          │  "parked" and then runs only this coordinator's messages (Run a
//!                          │  batch, Check a batch, Scan a step, Count its keys, Flush its
//!                          │  engine, Report for INFO) until its sender is dropped
//!                          └─ EPOCH odd ─> f(held): reads, decision, writes, each a blocking
//!                             round trip to a parked shard or a direct call on this one ─>
//!                             EPOCH even ─> senders dropped: the shards go on
//! ```
//!
//! Why no other command comes between: a parked shard's thread runs nothing but this
//! coordinator's batches, and the coordinator's own thread runs `f` without an await, so none of
//! its other tasks runs either. Writes that must be all or nothing go through
//! [`Held::run_atomic`]: every part checked (`Engine::check_atomic`) before any is executed,
//! with nothing else run on those engines in between. A multi-key read (MGET, `atomic::read`)
//! that straddles the section sees EPOCH odd or moved and runs again.
//!
//! Why no deadlock: the same argument as `atomic.rs` (only the holder of CROSS_SHARD parks
//! shards, and it never parks its own), plus: the coordinator blocks its own thread only after
//! every other involved shard is parked, and a parked shard answers each message without
//! waiting on anything. The blocking stretch is a few round trips to parked shards: it delays
//! the coordinator's own shard by that much, which is what running the command costs anyway.

use std::sync::mpsc as std_mpsc;

use directkv_engine::{OpError, Report, Results};
use tokio::sync::oneshot;

use super::atomic::{CommitStep, CROSS_SHARD};
use super::batch::OwnedBatch;
use super::dispatch::Plan;
use super::panics;
use super::scan::Step;
use super::{Job, ShardCtx};

/// A shard that did not answer (its queue closed: the server stops, or it panicked).
const UNAVAILABLE: OpError = OpError::UserFunction("shard unavailable");

/// What a coordinator asks a parked shard.
pub(crate) enum Msg {
    /// Execute the batch into the results and send both back.
    Run(OwnedBatch, Results),
    /// Whether the batch would be stored whole (`Engine::check_atomic`); the batch comes back.
    Check(OwnedBatch),
    /// One step of a walk over the shard's keys (`scan.rs`: SCAN, KEYS or RANDOMKEY inside a
    /// transaction).
    Scan(Step),
    /// The number of keys stored (DBSIZE inside a transaction).
    Count,
    /// Remove every key, through `ShardCtx::flush` (FLUSHALL, FLUSHDB inside a transaction).
    Flush,
    /// The engine's report (INFO inside a transaction).
    Report,
}

/// A parked shard's answers, in the order of the messages.
pub(crate) enum Answer {
    Ran(OwnedBatch, Results),
    Checked(OwnedBatch, Result<(), OpError>),
    Scanned(Step),
    Counted(u64),
    /// The shard was emptied (false: refused, its log failed).
    Flushed(bool),
    Reported(Box<Report>),
}

/// A `Park` job's channels.
pub(crate) struct ParkChannels {
    pub(crate) parked: oneshot::Sender<()>,
    pub(crate) msgs: std_mpsc::Receiver<Msg>,
    pub(crate) answers: std_mpsc::Sender<Answer>,
}

/// `Job::Park`: answers "parked", then runs the coordinator's messages on this thread until it
/// drops its sender (or goes away).
pub(crate) fn park(ctx: &ShardCtx, c: ParkChannels) {
    if c.parked.send(()).is_err() {
        return;
    }
    while let Ok(msg) = c.msgs.recv() {
        let answer = match msg {
            Msg::Run(batch, mut results) => {
                let ran = panics::contain_blocking("exclusive batch", &ctx.stats, || {
                    ctx.execute(&batch.ops(), &mut results)
                });
                // After a panic the results are not trusted: no answer, so the coordinator
                // sees the shard as unavailable.
                if ran.is_none() {
                    return;
                }
                Answer::Ran(batch, results)
            }
            Msg::Check(batch) => {
                let Some(r) = panics::contain_blocking("exclusive check", &ctx.stats, || {
                    ctx.check_atomic(&batch.ops())
                }) else {
                    return;
                };
                Answer::Checked(batch, r)
            }
            Msg::Scan(mut step) => {
                let ran = panics::contain_blocking("exclusive scan step", &ctx.stats, || {
                    ctx.scan_step(&mut step)
                });
                if ran.is_none() {
                    return;
                }
                Answer::Scanned(step)
            }
            m @ (Msg::Count | Msg::Flush | Msg::Report) => {
                let Some(a) =
                    panics::contain_blocking("exclusive whole-shard step", &ctx.stats, || {
                        whole_shard(ctx, &m)
                    })
                else {
                    return;
                };
                a
            }
        };
        if c.answers.send(answer).is_err() {
            return;
        }
    }
}

/// What a whole-shard message (`Count`, `Flush`, `Report`) does on the shard `ctx` owns.
fn whole_shard(ctx: &ShardCtx, msg: &Msg) -> Answer {
    match msg {
        Msg::Count => Answer::Counted(ctx.keys()),
        Msg::Flush => Answer::Flushed(ctx.flush()),
        Msg::Report => Answer::Reported(Box::new(ctx.report())),
        Msg::Run(..) | Msg::Check(_) | Msg::Scan(_) => unreachable!("not a whole-shard message"),
    }
}

/// The shards an exclusive section holds: its own, run directly, and the parked others.
pub(crate) struct Held<'a> {
    ctx: &'a ShardCtx,
    /// (shard, where its messages go, where its answers come from).
    parked: Vec<(usize, std_mpsc::Sender<Msg>, std_mpsc::Receiver<Answer>)>,
}

impl Held<'_> {
    /// Runs every part of `p` (its results land in the plan). `Err` only when a shard did not
    /// answer; the plan's results are then not to be read.
    pub(crate) fn run(&mut self, p: &mut Plan) -> Result<(), OpError> {
        let own = self.ctx.id;
        let mut sent = Vec::new();
        for (s, tx, _) in &self.parked {
            if p.batches[*s].is_empty() {
                continue;
            }
            let (batch, results) = p.take_for_execution(*s);
            tx.send(Msg::Run(batch, results)).map_err(|_| UNAVAILABLE)?;
            sent.push(*s);
        }
        if !p.batches[own].is_empty() {
            let (batch, mut results) = p.take_for_execution(own);
            self.ctx.execute(&batch.ops(), &mut results);
            p.executed(own, batch, results);
        }
        for s in sent {
            match self.answers(s).recv() {
                Ok(Answer::Ran(batch, results)) => p.executed(s, batch, results),
                _ => return Err(UNAVAILABLE),
            }
        }
        Ok(())
    }

    /// Runs `p` all or nothing: every part checked first (limits, then memory), then all run.
    /// On `Err` nothing was stored.
    pub(crate) fn run_atomic(&mut self, p: &mut Plan) -> Result<(), OpError> {
        let own = self.ctx.id;
        for (s, tx, rx) in &self.parked {
            if p.batches[*s].is_empty() {
                continue;
            }
            let batch = std::mem::take(&mut p.batches[*s]);
            tx.send(Msg::Check(batch)).map_err(|_| UNAVAILABLE)?;
            match rx.recv() {
                Ok(Answer::Checked(batch, r)) => {
                    p.batches[*s] = batch;
                    r?;
                }
                _ => return Err(UNAVAILABLE),
            }
        }
        if !p.batches[own].is_empty() {
            self.ctx.check_atomic(&p.batches[own].ops())?;
        }
        self.run(p)
    }

    /// Runs one step of a walk on its shard (`step.at.shard`, held); `None` when that shard
    /// did not answer (or is not held).
    pub(crate) fn scan(&mut self, mut step: Step) -> Option<Step> {
        let shard = usize::from(step.at.shard);
        if shard == self.ctx.id {
            self.ctx.scan_step(&mut step);
            return Some(step);
        }
        let (_, tx, rx) = self.parked.iter().find(|(s, _, _)| *s == shard)?;
        tx.send(Msg::Scan(step)).ok()?;
        match rx.recv() {
            Ok(Answer::Scanned(step)) => Some(step),
            _ => None,
        }
    }

    /// Keys stored in every shard of the server, summed (DBSIZE); `None` when a shard is not
    /// held or did not answer.
    pub(crate) fn count(&mut self) -> Option<u64> {
        let answers = self.every_shard(|| Msg::Count)?;
        answers
            .into_iter()
            .map(|a| match a {
                Answer::Counted(n) => Some(n),
                _ => None,
            })
            .sum()
    }

    /// Empties every shard of the server through `ShardCtx::flush` (FLUSHALL, FLUSHDB), which
    /// tells WATCH; `None` when a shard is not held or did not answer (the shards that did are
    /// empty); `Some(false)` when a shard refused (its log failed).
    pub(crate) fn flush(&mut self) -> Option<bool> {
        let answers = self.every_shard(|| Msg::Flush)?;
        if !answers.iter().all(|a| matches!(a, Answer::Flushed(_))) {
            return None;
        }
        Some(answers.iter().all(|a| matches!(a, Answer::Flushed(true))))
    }

    /// Every shard's engine report, in shard order (INFO); `None` when a shard is not held or
    /// did not answer.
    pub(crate) fn reports(&mut self) -> Option<Vec<Report>> {
        let answers = self.every_shard(|| Msg::Report)?;
        answers
            .into_iter()
            .map(|a| match a {
                Answer::Reported(r) => Some(*r),
                _ => None,
            })
            .collect()
    }

    /// Sends `msg()` to every parked shard, runs it on this one meanwhile, and collects the
    /// answers in shard order. `None` unless every shard of the server is held, and when one
    /// did not answer (every shard that was sent the message has been heard first, so the
    /// next message's answers stay in step).
    fn every_shard(&mut self, msg: impl Fn() -> Msg) -> Option<Vec<Answer>> {
        if self.parked.len() + 1 != self.ctx.shards() {
            return None;
        }
        let sent: Vec<bool> = self
            .parked
            .iter()
            .map(|(_, tx, _)| tx.send(msg()).is_ok())
            .collect();
        let mut answers = vec![(self.ctx.id, Some(whole_shard(self.ctx, &msg())))];
        for ((s, _, rx), sent) in self.parked.iter().zip(sent) {
            answers.push((*s, sent.then(|| rx.recv().ok()).flatten()));
        }
        answers.sort_unstable_by_key(|(s, _)| *s);
        answers.into_iter().map(|(_, a)| a).collect()
    }

    fn answers(&self, s: usize) -> &std_mpsc::Receiver<Answer> {
        &self
            .parked
            .iter()
            .find(|(t, _, _)| *t == s)
            .expect("a parked shard")
            .2
    }
}

/// Runs `f` with `shards` (the shards of the command's keys, in any order, repeats allowed)
/// held: see the module comment. `f` must not await (it cannot: it is not async) and sees
/// no other command on those shards.
pub(crate) async fn run<R>(
    ctx: &ShardCtx,
    shards: &[usize],
    f: impl FnOnce(&mut Held<'_>) -> R,
) -> Result<R, OpError> {
    let mut others: Vec<usize> = shards.iter().copied().filter(|&s| s != ctx.id).collect();
    others.sort_unstable();
    others.dedup();
    let mut held = Held {
        ctx,
        parked: Vec::with_capacity(others.len()),
    };
    if others.is_empty() {
        return Ok(f(&mut held));
    }
    let _one_at_a_time = CROSS_SHARD.lock().await;
    ctx.stats
        .atomic_cross_shard
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut waits = Vec::with_capacity(others.len());
    for &s in &others {
        let (parked, parked_rx) = oneshot::channel();
        let (msgs_tx, msgs) = std_mpsc::channel();
        let (answers, answers_rx) = std_mpsc::channel();
        let job = Job::Park {
            channels: ParkChannels {
                parked,
                msgs,
                answers,
            },
        };
        if ctx.peers[s].send(job).await.is_err() {
            return Err(UNAVAILABLE);
        }
        held.parked.push((s, msgs_tx, answers_rx));
        waits.push(parked_rx);
    }
    for w in waits {
        w.await.map_err(|_| UNAVAILABLE)?;
    }
    // From here to the end of `f`: no await.
    let step = CommitStep::begin();
    let r = f(&mut held);
    drop(step);
    Ok(r)
}
