//! A shard's snapshot task (issue 22 item 2; the steps are `persistence/snapshot.rs`'s): a
//! local task on the shard's thread that waits for a round (BGSAVE, SAVE, SHUTDOWN SAVE) or
//! for its log to pass `auto_snapshot_log_bytes`, then rotates the log and writes the image a
//! step at a time, yielding to the shard's connections between steps.
//!
//! ```text
//!   serve(ctx) loop:
//!     wait: asked for a round, or AUTO_CHECK_INTERVAL (then check the log's size, and
//!           the CPU budget: auto_not_before the last snapshot's start and work; both
//!           settings live, CONFIG SET)
//!     snapshot():  begin (rotate + ImageWriter::begin)      one borrow of the engine
//!                  step, step, ... for SNAPSHOT_SLICE        SNAPSHOT_STEP_BUCKETS each,
//!                  then SNAPSHOT_PAUSE if commands ran since the last slice, else a yield
//!                  finish (trailer, fdatasync, manifest, old files removed) on a blocking
//!                  thread: the waits for the disk stay off the shard
//! ```
//!
//! The engine is borrowed only inside a step, never across an await, so batches run between
//! slices as usual; the engine copies a bucket before its first write, which keeps the image at
//! its instant. Non-goals: the file steps themselves (`persistence/snapshot.rs`).

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use directkv_sys::cpu::thread_cpu_time;

use super::ShardCtx;
use crate::persistence::snapshot::{self as snap, Running, SnapshotFailed, Why};

/// How long a snapshot steps back to back (a slice, without yielding), and how long it then
/// pauses if clients were served since its last slice: a busy shard gives its snapshot about
/// a sixth of its core at most (tokio's timer rounds the pause up to 1-2 ms, so nearer a
/// tenth), an idle one all of it. A slice delays the batches that arrive during it by up to
/// its length.
pub const SNAPSHOT_SLICE: Duration = Duration::from_micros(200);
pub const SNAPSHOT_PAUSE: Duration = Duration::from_millis(1);

/// After a failed automatic snapshot, the shard waits this long before it tries again (a
/// full disk would otherwise be retried every check).
pub const AUTO_RETRY_INTERVAL: Duration = Duration::from_secs(10);

/// While the store is failed, how long a shard waits before its first repair (a snapshot into
/// new files: `persistence` module comment), and the most it waits between two: the wait
/// doubles after each repair that fails (a disk still full is not rewritten every second
/// with a whole image).
pub const LOG_REPAIR_INTERVAL: Duration = Duration::from_secs(1);
pub const LOG_REPAIR_INTERVAL_MAX: Duration = Duration::from_secs(60);

/// How many times the size rule's bytes (`auto_snapshot_log_bytes`, or the last image if
/// larger) a log may grow to while automatic snapshots wait for their CPU budget: then one
/// starts anyway.
pub const LOG_GROWTH_OVER_BUDGET: u64 = 4;

/// When the next automatic snapshot may begin after one that began at `began` and took the
/// shard `work` on its own thread (`auto_snapshot_cpu_percent`): automatic snapshots then take
/// at most `percent` of the shard's time. `percent` 0: at once (no limit).
pub(crate) fn auto_not_before(began: Instant, work: Duration, percent: u32) -> Instant {
    match percent {
        0 => began,
        p => began + work * 100 / p,
    }
}

/// Whether the CPU budget lets an automatic snapshot begin `now` (the size rule is checked
/// apart): its wait (`budget_after`) is over, or the log (`log_bytes`) has grown meanwhile to
/// `LOG_GROWTH_OVER_BUDGET` times what the size rule asks (`limit`, or the last image `base`
/// if larger), so disk and restart time stay bounded whatever the store's size and write rate.
pub(crate) fn budget_over(
    now: Instant,
    budget_after: Instant,
    log_bytes: u64,
    limit: u64,
    base: u64,
) -> bool {
    now >= budget_after
        || (limit > 0 && log_bytes >= limit.max(base).saturating_mul(LOG_GROWTH_OVER_BUDGET))
}

/// The shard's snapshot task; returns at once with `appendonly no`.
pub(crate) async fn serve(ctx: Rc<ShardCtx>) {
    let Some(store) = ctx.store.clone() else {
        return;
    };
    let snaps = &store.snapshots;
    let live = &ctx.stats.live;
    let mut served = 0u64;
    let mut auto_after = Instant::now();
    // The CPU budget's wait after the last snapshot (`auto_not_before`).
    let mut budget_after = Instant::now();
    let mut repair_wait = LOG_REPAIR_INTERVAL;
    let mut repair_after = Instant::now();
    let mut repairing = false;
    loop {
        let log_bytes = ctx
            .log
            .borrow()
            .as_ref()
            .map_or(0, |l| l.writer.file_bytes());
        snaps.publish_log_bytes(ctx.id, log_bytes);
        // CONFIG SET may change either at any check.
        let limit = live.auto_snapshot_log_bytes();
        let now = Instant::now();
        let base = snaps.last_image_bytes(ctx.id);
        let waited = now >= auto_after && budget_over(now, budget_after, log_bytes, limit, base);
        let auto_limit = if waited { limit } else { 0 };
        let needs_repair = store.needs_repair(ctx.id);
        if needs_repair && !repairing {
            // A new failure: the first repair after LOG_REPAIR_INTERVAL.
            repairing = true;
            repair_wait = LOG_REPAIR_INTERVAL;
            repair_after = Instant::now() + repair_wait;
        }
        repairing &= needs_repair;
        let next = snaps.next(ctx.id, served, log_bytes, auto_limit);
        let Some(why) =
            next.or((repairing && Instant::now() >= repair_after).then_some(Why::Repair))
        else {
            snaps.asked(ctx.id, snap::AUTO_CHECK_INTERVAL).await;
            continue;
        };
        // Whichever asked for it, a snapshot of a failed store is a repair: one shard at a
        // time (the others look again at their next check).
        let turn = repairing && store.take_repair_turn();
        if repairing && !turn {
            snaps.asked(ctx.id, snap::AUTO_CHECK_INTERVAL).await;
            continue;
        }
        if let Why::Round(id) = why {
            served = id;
        }
        snaps.set_running(ctx.id, true);
        let began = Instant::now();
        let (outcome, work) = ctx.snapshot().await;
        snaps.set_running(ctx.id, false);
        budget_after = auto_not_before(began, work, live.auto_snapshot_cpu_percent());
        if turn {
            store.end_repair_turn();
        }
        let c = &ctx.stats.snapshot;
        let image_bytes = match outcome {
            Ok(bytes) => {
                c.done.fetch_add(1, Ordering::Relaxed);
                c.bytes.fetch_add(bytes, Ordering::Relaxed);
                if repairing {
                    tracing::warn!(
                        shard = ctx.id,
                        image_bytes = bytes,
                        "the failed store's files are repaired on this shard: a new snapshot and log"
                    );
                }
                if why == Why::Auto {
                    c.auto.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        shard = ctx.id,
                        log_bytes,
                        image_bytes = bytes,
                        "automatic snapshot done: the log before it is removed"
                    );
                }
                Some(bytes)
            }
            Err(e) => {
                c.failed.fetch_add(1, Ordering::Relaxed);
                if repairing {
                    // Whichever asked for it, the snapshot of a failed store was a repair.
                    repair_after = Instant::now() + repair_wait;
                    tracing::error!(shard = ctx.id, reason = ?why, error = %e, retry_in_s = repair_wait.as_secs(), "repair of the failed store's files failed; writes stay refused");
                    repair_wait = (repair_wait * 2).min(LOG_REPAIR_INTERVAL_MAX);
                } else {
                    tracing::error!(shard = ctx.id, reason = ?why, error = %e, "snapshot failed; the files before it are kept");
                }
                if why == Why::Auto {
                    auto_after = Instant::now() + AUTO_RETRY_INTERVAL;
                }
                None
            }
        };
        let records = store.stats.persist.records.load(Ordering::Relaxed);
        snaps.ended(ctx.id, why, image_bytes, records);
    }
}

impl ShardCtx {
    /// Takes this shard's snapshot: rotates the log and writes the image between batches.
    /// Returns the image's size in bytes, and (whatever the outcome) the CPU time it took:
    /// the rotation and the slices on the shard's thread (not the pauses between them), and
    /// the image's fdatasync on the blocking thread.
    async fn snapshot(&self) -> (Result<u64, SnapshotFailed>, Duration) {
        let mut work = Duration::ZERO;
        let outcome = self.snapshot_worked(&mut work).await;
        (outcome, work)
    }

    async fn snapshot_worked(&self, work: &mut Duration) -> Result<u64, SnapshotFailed> {
        let Some(store) = self.store.clone() else {
            return Err(SnapshotFailed("persistence is off".into()));
        };
        let c = &self.stats.snapshot;
        let worked = |work: &mut Duration, cpu: Duration| {
            *work += cpu;
            c.work_us
                .fetch_add(cpu.as_micros() as u64, Ordering::Relaxed);
        };
        let (begun, cpu0) = (Instant::now(), thread_cpu_time());
        let begin = self.snapshot_begin();
        // What the shard's clients waited for: the rotation and the image's file created.
        let begin_us = begun.elapsed().as_micros() as u64;
        worked(work, thread_cpu_time().saturating_sub(cpu0));
        let mut run = begin?;
        c.in_progress.fetch_add(1, Ordering::Relaxed);
        let mut counted = (0u64, 0u64);
        let mut commands = self.stats.commands.load(Ordering::Relaxed);
        let result = loop {
            // A slice: steps back to back, without yielding between them. A yield after each
            // step (as before) had the runtime poll its sockets between steps, so a busy
            // shard read its batches in smaller pieces and paid more system calls per command
            // for as long as the snapshot ran (and it ran for seconds: 16 buckets per turn of
            // the connections).
            let cpu0 = thread_cpu_time();
            let slice_end = Instant::now() + SNAPSHOT_SLICE;
            let stepped = loop {
                match self.snapshot_step(&mut run, &store, &mut counted) {
                    Ok(false) if Instant::now() < slice_end => continue,
                    other => break other,
                }
            };
            worked(work, thread_cpu_time().saturating_sub(cpu0));
            match stepped {
                Ok(true) => break Ok(()),
                Ok(false) => {
                    // Clients were served since the last slice: pause for them, so the
                    // snapshot takes about SLICE / (SLICE + PAUSE) of the core; an idle shard
                    // goes on at once (after one turn of its sockets).
                    let now = self.stats.commands.load(Ordering::Relaxed);
                    if now != commands {
                        tokio::time::sleep(SNAPSHOT_PAUSE).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                    commands = now;
                }
                Err(e) => break Err(e),
            }
        };
        c.buckets_done.fetch_sub(counted.0, Ordering::Relaxed);
        c.buckets_total.fetch_sub(counted.1, Ordering::Relaxed);
        c.in_progress.fetch_sub(1, Ordering::Relaxed);
        match result {
            Ok(()) => {
                let took = run.started.elapsed();
                // The file's fdatasync and the manifest's update wait for the disk (tens of
                // ms for a large image): off the shard's thread, which keeps serving (its
                // records already go to the new log, named and durable since `begin`).
                let (store2, id) = (store.clone(), self.id);
                let (summary, cpu) = tokio::task::spawn_blocking(move || {
                    let cpu0 = thread_cpu_time();
                    let summary = run.finish(&store2, id);
                    (summary, thread_cpu_time().saturating_sub(cpu0))
                })
                .await
                .map_err(|e| SnapshotFailed(format!("the snapshot's last step: {e}")))?;
                // The image's fdatasync writes its pages out from this thread: the kernel's
                // share of the snapshot, on the server's cores all the same.
                worked(work, cpu);
                let summary = summary?;
                tracing::info!(
                    shard = self.id,
                    entries = summary.entries,
                    bytes = summary.file_bytes,
                    took_ms = took.as_millis() as u64,
                    work_ms = work.as_millis() as u64,
                    begin_us,
                    "snapshot written"
                );
                Ok(summary.file_bytes)
            }
            Err(e) => {
                run.abort(&mut self.engine.borrow_mut(), &store);
                Err(e)
            }
        }
    }

    fn snapshot_begin(&self) -> Result<Running, SnapshotFailed> {
        let mut e = self.engine.borrow_mut();
        let mut log = self.log.borrow_mut();
        let Some(log) = log.as_mut() else {
            return Err(SnapshotFailed("persistence is off".into()));
        };
        snap::begin(&mut e, log, self.id)
    }

    /// One step of `run`; keeps the progress counters (`counted`: what this snapshot added
    /// to them) up to date.
    fn snapshot_step(
        &self,
        run: &mut Running,
        store: &crate::persistence::Store,
        counted: &mut (u64, u64),
    ) -> Result<bool, SnapshotFailed> {
        let mut e = self.engine.borrow_mut();
        let Some((_, total, _)) = run.progress(&e) else {
            // FLUSHALL replaced the engine: its snapshot went with it.
            return Err(SnapshotFailed("interrupted by FLUSHALL".into()));
        };
        let done = run.step(&mut e, store)?;
        let c = &self.stats.snapshot;
        let (cursor, extra) = match run.progress(&e) {
            Some((cursor, _, extra)) => (cursor, extra),
            None => (total, 0),
        };
        c.extra_bytes_peak.fetch_max(extra, Ordering::Relaxed);
        c.buckets_done
            .fetch_add(cursor.saturating_sub(counted.0), Ordering::Relaxed);
        c.buckets_total
            .fetch_add(total.saturating_sub(counted.1), Ordering::Relaxed);
        *counted = (cursor.max(counted.0), total.max(counted.1));
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_waits_a_hundred_times_the_work_at_one_percent_unless_the_log_outgrows_it() {
        let began = Instant::now();
        let work = Duration::from_millis(40);
        assert_eq!(
            auto_not_before(began, work, 1),
            began + Duration::from_secs(4)
        );
        assert_eq!(
            auto_not_before(began, work, 5),
            began + Duration::from_millis(800)
        );
        assert_eq!(auto_not_before(began, work, 100), began + work);
        assert_eq!(auto_not_before(began, work, 0), began, "0: no limit");
        let after = auto_not_before(began, work, 1);
        let (limit, mib) = (64 << 20, 1 << 20);
        // During the wait: only a log 4 times the rule's bytes (the limit, or a larger image)
        // ends it.
        let during = began + Duration::from_secs(1);
        assert!(!budget_over(during, after, 255 * mib, limit, 0));
        assert!(budget_over(during, after, 256 * mib, limit, 0));
        assert!(!budget_over(during, after, 300 * mib, limit, 100 * mib));
        assert!(budget_over(during, after, 400 * mib, limit, 100 * mib));
        // With automatic snapshots off the size never ends it (nor matters: no rule).
        assert!(!budget_over(during, after, u64::MAX, 0, 0));
        // After it, any size.
        assert!(budget_over(after, after, 0, limit, 0));
    }
}
