//! A sync round's fdatasyncs of several shards' logs, made at the same time (issue 22).
//!
//! One round syncs every shard's log that has records not yet durable, and with one sync
//! thread those fdatasyncs ran one after another: with the default of one shard per core and
//! a workload whose batches write to every shard (YCSB-A over 2 shards), each round took two
//! fdatasyncs' time (~2 x 120 us on this machine), and `always` answered 0.60-0.66 M ops/s
//! against 0.86-0.89 M with one shard (BENCHMARKS "Session 22"). fdatasyncs of different files
//! overlap on the disk, so the round's other logs go to helper threads (`log-sync-N`, one per
//! shard after the first) while the sync thread syncs the first itself, and then takes any the
//! helpers have not yet begun: a round with one log to sync wakes no helper, and a round whose
//! helpers are slow to wake is no slower than one after another.
//!
//! ```text
//!   sync thread:  run([0, 1, 2]) ─ hands 1, 2 out ─ syncs 0 ─ takes 2 if still there ─ waits
//!   log-sync-1:   ─────────────── wakes ─ takes 1 ─ syncs 1 ─ done ─────────────────┘
//! ```

use std::sync::{Condvar, Mutex, MutexGuard};

/// Jobs handed out for one round, and the helpers' answers.
#[derive(Debug, Default)]
struct Round {
    /// Jobs not yet taken by a helper or the caller.
    todo: Vec<usize>,
    /// Jobs handed out and not yet finished.
    outstanding: usize,
    /// Whether every finished job succeeded.
    ok: bool,
    stop: bool,
}

/// Helpers that take jobs (a shard's index) of the round in progress.
#[derive(Debug, Default)]
pub(crate) struct Fanout {
    round: Mutex<Round>,
    /// Wakes a helper: a job was handed out, or stop.
    go: Condvar,
    /// Wakes the caller of `run`: the last job handed out finished.
    done: Condvar,
    /// Helpers serving (`serve`); with none, `run` does every job itself.
    helpers: usize,
}

impl Fanout {
    /// A fan-out for `helpers` threads, which must each call `serve`.
    pub(crate) fn new(helpers: usize) -> Fanout {
        Fanout {
            helpers,
            ..Fanout::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Round> {
        self.round.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `job` for every item of `items`, the first on the calling thread and the rest on
    /// helpers (or here, if none has taken one by the time the first is done); returns once
    /// all have finished, whether every one returned true.
    pub(crate) fn run(&self, items: &[usize], job: impl Fn(usize) -> bool) -> bool {
        let Some((&first, rest)) = items.split_first() else {
            return true;
        };
        if self.helpers == 0 || rest.is_empty() {
            // Every job runs, whichever fails.
            let mut ok = true;
            for &i in items {
                ok &= job(i);
            }
            return ok;
        }
        {
            let mut r = self.lock();
            debug_assert!(r.outstanding == 0, "one round at a time");
            r.todo.clear();
            r.todo.extend(rest.iter().rev());
            r.outstanding = rest.len();
            r.ok = true;
        }
        // Notified after the lock is released (a woken helper would block on it at once).
        for _ in 0..rest.len().min(self.helpers) {
            self.go.notify_one();
        }
        let mut ok = job(first);
        let mut r = self.lock();
        while let Some(i) = r.todo.pop() {
            drop(r);
            ok &= job(i);
            r = self.lock();
            r.outstanding -= 1;
        }
        while r.outstanding > 0 {
            r = self.done.wait(r).unwrap_or_else(|e| e.into_inner());
        }
        ok && r.ok
    }

    /// A helper's loop: takes a job of the round in progress, runs it, and so on until `stop`.
    /// `waited` is called after each wait for a job and after each job (which may wait for
    /// the disk), and `job` is the same as `run`'s.
    pub(crate) fn serve(&self, job: impl Fn(usize) -> bool, mut waited: impl FnMut()) {
        loop {
            let i = {
                let mut r = self.lock();
                loop {
                    if r.stop {
                        return;
                    }
                    if let Some(i) = r.todo.pop() {
                        break i;
                    }
                    r = self.go.wait(r).unwrap_or_else(|e| e.into_inner());
                }
            };
            waited();
            let ok = job(i);
            waited();
            let mut r = self.lock();
            r.ok &= ok;
            r.outstanding -= 1;
            let last = r.outstanding == 0;
            drop(r);
            if last {
                self.done.notify_one();
            }
        }
    }

    /// Ends every helper's `serve` (after the round in progress, if any).
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.go.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};
    use std::thread;

    /// A fan-out with `helpers` threads serving `job`, handed to `body` with the same job for
    /// its own `run` calls; the helpers are stopped and joined after it.
    fn with_helpers(
        helpers: usize,
        job: impl Fn(usize) -> bool + Send + Sync + 'static,
        body: impl FnOnce(&Fanout, &dyn Fn(usize) -> bool),
    ) {
        let fan = Arc::new(Fanout::new(helpers));
        let job = Arc::new(job);
        let threads: Vec<_> = (0..helpers)
            .map(|_| {
                let (fan, job) = (fan.clone(), job.clone());
                thread::spawn(move || fan.serve(|i| job(i), || {}))
            })
            .collect();
        body(&fan, &*job);
        fan.stop();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn every_item_runs_once_and_a_failure_is_reported() {
        let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..5).map(|_| AtomicUsize::new(0)).collect());
        let counted = runs.clone();
        let job = move |i: usize| {
            counted[i].fetch_add(1, Ordering::Relaxed);
            i != 3
        };
        with_helpers(3, job, |fan, job| {
            for round in 1..=200 {
                assert!(fan.run(&[0, 1, 2], job), "round {round}");
                assert!(!fan.run(&[0, 3, 4], job), "round {round}: item 3 failed");
                assert!(fan.run(&[4], job));
                assert!(fan.run(&[], job));
            }
        });
        let counts: Vec<usize> = runs.iter().map(|r| r.load(Ordering::Relaxed)).collect();
        assert_eq!(counts, vec![400, 200, 200, 200, 400]);
    }

    #[test]
    fn the_jobs_of_a_round_run_at_the_same_time() {
        // Each job waits at a barrier of three: only three jobs running at once pass it, so
        // run() returns only if the helpers took two while the caller ran one.
        let barrier = Barrier::new(3);
        let job = move |_| {
            barrier.wait();
            true
        };
        with_helpers(2, job, |fan, job| assert!(fan.run(&[0, 1, 2], job)));
    }

    #[test]
    fn without_helpers_the_caller_runs_every_job() {
        let fan = Fanout::new(0);
        let seen = Mutex::new(Vec::new());
        assert!(!fan.run(&[2, 0, 1], |i| {
            seen.lock().unwrap().push(i);
            i != 0
        }));
        assert_eq!(*seen.lock().unwrap(), vec![2, 0, 1]);
    }
}
