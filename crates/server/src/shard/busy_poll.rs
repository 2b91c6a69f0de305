//! Adaptive busy polling: after a shard reads a request it keeps polling its sockets without
//! sleeping for up to `busy_poll_us`, so the next request is picked up at once instead of after
//! a wake-up, but only while that pays: it stops as soon as its core is wanted by another
//! thread, and then sleeps in epoll for a back-off that doubles while the contention lasts.
//!
//! ```text
//!   request read ──> Activity::touch ──(parked? notify)──┐
//!                                                        v
//!   poller task: loop { yield to the runtime (epoll with a zero timeout)
//!                       a request since the last poll? ──> poll again
//!                       none for busy_poll_us? ──> park until the next touch       (idle)
//!                       every CONTENTION_CHECK_POLLS polls: the thread lost its core
//!                         since the spin began? ──> sleep `backoff` (1 ms, doubling up to
//!                         128 ms while it keeps happening), then spin again if requests
//!                         came meanwhile, else park                                (wanted)
//!                       otherwise sched_yield, poll again }
//! ```
//!
//! Why poll: on this kind of VM a thread that sleeps in epoll costs tens of microseconds per
//! round trip (the idle core halts, the sender's wake-up is an interrupt to it): one connection
//! with one 64-operation batch in flight ran 0.83 M ops/s blocking and 2.87 M ops/s polling
//! (BENCHMARKS "Busy polling"). While the poller task is runnable, the current-thread runtime
//! polls the I/O driver with a zero timeout instead of blocking; the poller itself only yields.
//!
//! Why adapt (issue 20 item 6): polling pays only while the core would otherwise sit idle. A
//! shard that spins while a co-located client wants its core takes CPU the client needs (a
//! Java YCSB client with 8 threads on this 2-core machine ran at 0.28x Redis's rate against
//! fixed 100 us polling, because with requests always arriving the window never ended). The
//! signal used is the thread's involuntary context switches (`ru_nivcsw` of
//! `getrusage(RUSAGE_THREAD)`, one system call of well under a microsecond, read every
//! `CONTENTION_CHECK_POLLS` polls): the count grows exactly when the scheduler took the core
//! from a runnable shard (preemption) or a `sched_yield` between empty polls handed it to a
//! waiting thread. Either way another thread was waiting for this core, so the shard stops
//! spinning and sleeps in epoll as redis-server does, serving requests by wake-ups. Sleeping
//! in epoll makes the switches voluntary, so the signal does not feed on itself. Other signals
//! considered: `/proc/loadavg` (machine-wide and averaged over a minute, far too slow) and
//! `run_delay` of `/proc/thread-self/schedstat` (needs an open, a read and a parse per check,
//! several microseconds, for the same information).
//!
//! Our own sync thread is not contention (issue 22): under `appendfsync always` it wakes a few
//! times per group of batches (asked for a round, each fdatasync's write and flush done) and
//! takes the core from a shard polling on it each time, which read as a wanted core turned
//! polling off for good (back-offs of up to 128 ms) and left the core to halt during every
//! fdatasync, each round then paying the halted core's wake-ups: 0.95-1.10 M ops/s against
//! 1.14-1.16 M with the switches ignored, and 1.25-1.28 M polling through the wait as well
//! (`scripts/persist/always-stats.sh`, BENCHMARKS "Session 20"). So the sync thread publishes
//! its waits (`Store::sync_thread_waits`), and a spin counts as wanted only when its
//! preemptions exceed what those waits explain (`PREEMPTIONS_PER_SYNC_WAIT` each, counting
//! `SYNC_WAITS_LAG` waits of a round in progress not yet published). And while a reply waits for its round (`Activity::awaiting`), the
//! window is at least `DURABLE_WAIT_WINDOW`: the round's end is as sure to come as a request.
//!
//! The back-off starts at `BACKOFF_MIN` and doubles at each contended spin up to
//! `BACKOFF_MAX`; a spin that ends because requests stopped (the window passed) resets it. So
//! under steady contention a shard spins for a few hundred polls every 128 ms, well under 1% of
//! its time, and on an otherwise idle machine it polls exactly as before. `busy_poll_us` stays
//! the upper bound of a spin without requests, and 0 turns polling off.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::stats::ServerStats;

/// Polls between two readings of the thread's involuntary context switches: at one to a few
/// microseconds per poll, a check every 64 polls costs well under 1% of a spinning shard and
/// notices contention within about 100 us.
pub(crate) const CONTENTION_CHECK_POLLS: u64 = 64;
/// The first sleep after a spin that found its core wanted.
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(1);
/// The longest sleep between spins while the core stays wanted.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_millis(128);
/// Preemptions a sync thread's wait may bring: its own wake-up, and one of a kernel thread
/// working for it (the block layer's worker dispatching an fdatasync's flush on this core).
pub(crate) const PREEMPTIONS_PER_SYNC_WAIT: u64 = 2;
/// The sync thread's waits that may have woken it (and preempted this shard) before it
/// published them: an fdatasync waits for its write and for its flush, and a lock may make it
/// wait once more.
pub(crate) const SYNC_WAITS_LAG: u64 = 4;
/// The least window of a spin while a reply waits for a sync round (`appendfsync always`):
/// an fdatasync here takes 0.1-0.25 ms; a disk slower than this is waited for asleep.
pub(crate) const DURABLE_WAIT_WINDOW: Duration = Duration::from_millis(1);

/// Requests seen by one shard, and the wake-up of its parked poller.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    touches: Cell<u64>,
    parked: Cell<bool>,
    wake: Notify,
    /// Replies waiting for a sync round now (`awaiting`).
    awaiting: Cell<u32>,
}

/// A reply waiting for its sync round, until dropped (`Activity::awaiting`).
pub(crate) struct Awaiting<'a>(&'a Activity);

impl Drop for Awaiting<'_> {
    fn drop(&mut self) {
        self.0.awaiting.set(self.0.awaiting.get() - 1);
    }
}

impl Activity {
    /// A request was read: restarts the polling window (and wakes a parked poller).
    #[inline]
    pub(crate) fn touch(&self) {
        self.touches.set(self.touches.get().wrapping_add(1));
        self.unpark();
    }

    /// A reply waits for a sync round until the guard drops: spins meanwhile keep polling for
    /// at least `DURABLE_WAIT_WINDOW` (the round's end wakes its waiters like a request),
    /// and one already parked is woken to poll.
    pub(crate) fn awaiting(&self) -> Awaiting<'_> {
        self.awaiting.set(self.awaiting.get() + 1);
        self.unpark();
        Awaiting(self)
    }

    /// Wakes the poller if it is parked.
    #[inline]
    fn unpark(&self) {
        if self.parked.get() {
            self.parked.set(false);
            self.wake.notify_one();
        }
    }

    /// How long a spin polls without a request: `window`, stretched while a reply waits.
    fn idle_window(&self, window: Duration) -> Duration {
        if self.awaiting.get() > 0 {
            window.max(DURABLE_WAIT_WINDOW)
        } else {
            window
        }
    }
}

/// Why a spin ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpinEnd {
    /// No request for the whole window.
    Idle,
    /// The thread lost its core to another thread while spinning.
    Wanted,
}

/// Where the involuntary context switches of the calling thread come from, and the waits of
/// the server's own sync thread (whose wake-ups preempt it too): the kernel, or a test's script.
pub(crate) trait SwitchCounter {
    fn involuntary_switches(&mut self) -> u64;
    /// The sync thread's waits so far; None without one.
    fn sync_thread_waits(&mut self) -> Option<u64>;
}

/// The calling thread's count from the kernel, and the sync thread's as it publishes it.
pub(crate) struct ThreadSwitches {
    pub(crate) sync_waits: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

impl SwitchCounter for ThreadSwitches {
    fn involuntary_switches(&mut self) -> u64 {
        directkv_sys::cpu::thread_involuntary_switches()
    }
    fn sync_thread_waits(&mut self) -> Option<u64> {
        self.sync_waits.as_ref().map(|w| w.load(Ordering::Relaxed))
    }
}

/// Whether the preemptions since a spin began (`switches`) say another thread wants the core:
/// any at all, or with a sync thread, more than its waits (`sync_waits` since then, and
/// `SYNC_WAITS_LAG` not yet published) explain at `PREEMPTIONS_PER_SYNC_WAIT` each.
fn wanted(switches: u64, sync_waits: Option<u64>) -> bool {
    match sync_waits {
        None => switches > 0,
        Some(w) => {
            switches
                > w.saturating_add(SYNC_WAITS_LAG)
                    .saturating_mul(PREEMPTIONS_PER_SYNC_WAIT)
        }
    }
}

/// The next back-off after a spin that ended in `end`, given the current one.
fn next_backoff(end: SpinEnd, backoff: Duration) -> Duration {
    match end {
        SpinEnd::Idle => BACKOFF_MIN,
        SpinEnd::Wanted => (backoff * 2).min(BACKOFF_MAX),
    }
}

/// Polls until `window` passes without a touch (then parks until the next touch) or the
/// thread's core is wanted (then sleeps a back-off, and parks unless requests came meanwhile);
/// and so on. Counts polls, parks and back-offs in `stats` (`busy_polls`, `busy_poll_sleeps`,
/// `busy_poll_backoffs`).
pub(crate) async fn run(
    activity: &Activity,
    window: Duration,
    stats: &ServerStats,
    mut switches: ThreadSwitches,
) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let seen_before = activity.touches.get();
        let end = spin(activity, window, stats, &mut switches).await;
        match end {
            SpinEnd::Idle => {
                stats.busy_poll_sleeps.fetch_add(1, Ordering::Relaxed);
                activity.parked.set(true);
                // A touch between here and the await stores a permit, so none is missed.
                activity.wake.notified().await;
            }
            SpinEnd::Wanted => {
                stats.busy_poll_backoffs.fetch_add(1, Ordering::Relaxed);
                // The shard sleeps in epoll (with this timer) and serves requests by wake-ups.
                tokio::time::sleep(backoff).await;
                if activity.touches.get() == seen_before {
                    stats.busy_poll_sleeps.fetch_add(1, Ordering::Relaxed);
                    activity.parked.set(true);
                    activity.wake.notified().await;
                }
            }
        }
        backoff = next_backoff(end, backoff);
    }
}

/// One spin: polls until the window passes without a touch or the core is wanted.
async fn spin(
    activity: &Activity,
    window: Duration,
    stats: &ServerStats,
    switches: &mut impl SwitchCounter,
) -> SpinEnd {
    let mut seen = activity.touches.get();
    let mut last = Instant::now();
    let mut polls = 0u64;
    let switches_at_start = switches.involuntary_switches();
    let waits_at_start = switches.sync_thread_waits();
    let end = loop {
        tokio::task::yield_now().await;
        polls += 1;
        if polls.is_multiple_of(CONTENTION_CHECK_POLLS) {
            let preempted = switches
                .involuntary_switches()
                .wrapping_sub(switches_at_start);
            let waits = switches
                .sync_thread_waits()
                .zip(waits_at_start)
                .map(|(now, then)| now.wrapping_sub(then));
            if wanted(preempted, waits) {
                break SpinEnd::Wanted;
            }
        }
        let now = activity.touches.get();
        if now != seen {
            // Requests keep coming: no sched_yield (it costs a pass through the scheduler,
            // about 4% of a saturated shard).
            seen = now;
            last = Instant::now();
        } else if last.elapsed() >= activity.idle_window(window) {
            break SpinEnd::Idle;
        } else {
            // Between empty polls the core goes to any thread waiting for it (which the next
            // check then sees as a switch).
            std::thread::yield_now();
        }
    };
    stats.busy_polls.fetch_add(polls, Ordering::Relaxed);
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count that grows by `step` at every reading after the first `calm` readings.
    struct Scripted {
        readings: u64,
        calm: u64,
        step: u64,
    }

    impl SwitchCounter for Scripted {
        fn involuntary_switches(&mut self) -> u64 {
            self.readings += 1;
            self.readings.saturating_sub(self.calm) * self.step
        }
        fn sync_thread_waits(&mut self) -> Option<u64> {
            None
        }
    }

    /// Preempted `step` times per reading; a sync thread that waited `waits_step` times per
    /// reading.
    struct WithSyncThread {
        readings: u64,
        step: u64,
        waits: u64,
        waits_step: u64,
    }

    impl SwitchCounter for WithSyncThread {
        fn involuntary_switches(&mut self) -> u64 {
            self.readings += 1;
            self.readings * self.step
        }
        fn sync_thread_waits(&mut self) -> Option<u64> {
            self.waits += self.waits_step;
            Some(self.waits)
        }
    }

    #[test]
    fn preemptions_the_sync_threads_waits_explain_are_not_contention() {
        // No sync thread: any preemption is.
        assert!(!wanted(0, None));
        assert!(wanted(1, None));
        // A sync thread: what its waits and the lag of a round in progress bring is its own.
        let p = PREEMPTIONS_PER_SYNC_WAIT;
        assert!(!wanted(0, Some(0)));
        assert!(!wanted(SYNC_WAITS_LAG * p, Some(0)));
        assert!(wanted(SYNC_WAITS_LAG * p + 1, Some(0)));
        assert!(!wanted((100 + SYNC_WAITS_LAG) * p, Some(100)));
        assert!(wanted((100 + SYNC_WAITS_LAG) * p + 1, Some(100)));
    }

    #[test]
    fn a_spin_preempted_only_by_the_sync_thread_goes_on_and_one_preempted_more_ends_wanted() {
        let activity = Activity::default();
        let stats = ServerStats::default();
        // Each reading: preempted twice for each time the sync thread waited: a 1 ms window
        // with no request ends idle, not wanted.
        let mut own = WithSyncThread {
            readings: 0,
            step: 2 * PREEMPTIONS_PER_SYNC_WAIT,
            waits: 0,
            waits_step: 2,
        };
        let end = on_runtime(spin(&activity, Duration::from_millis(1), &stats, &mut own));
        assert_eq!(end, SpinEnd::Idle);
        // Preempted once more per reading than the sync thread's waits explain: the excess
        // passes the lag within a few checks.
        let mut more = WithSyncThread {
            readings: 0,
            step: PREEMPTIONS_PER_SYNC_WAIT + 1,
            waits: 0,
            waits_step: 1,
        };
        let end = on_runtime(spin(&activity, Duration::from_secs(60), &stats, &mut more));
        assert_eq!(end, SpinEnd::Wanted);
    }

    #[test]
    fn a_reply_waiting_for_its_round_stretches_the_window_and_wakes_a_parked_poller() {
        let activity = Activity::default();
        let stats = ServerStats::default();
        let mut calm = Scripted {
            readings: 0,
            calm: u64::MAX,
            step: 1,
        };
        // A 1 us window with a reply waiting lasts at least DURABLE_WAIT_WINDOW.
        let t = Instant::now();
        let guard = activity.awaiting();
        let end = on_runtime(spin(&activity, Duration::from_micros(1), &stats, &mut calm));
        assert_eq!(end, SpinEnd::Idle);
        assert!(t.elapsed() >= DURABLE_WAIT_WINDOW, "{:?}", t.elapsed());
        drop(guard);
        assert_eq!(activity.awaiting.get(), 0);
        // A parked poller is woken by a reply beginning to wait.
        activity.parked.set(true);
        let _guard = activity.awaiting();
        assert!(!activity.parked.get());
    }

    fn on_runtime<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_spin_ends_when_the_core_is_wanted_even_while_requests_keep_coming() {
        let activity = Activity::default();
        let stats = ServerStats::default();
        // Calm for the first reading (the spin's start) and the first check, then switched.
        let mut switches = Scripted {
            readings: 0,
            calm: 2,
            step: 1,
        };
        let end = on_runtime(async {
            let spin = spin(&activity, Duration::from_secs(60), &stats, &mut switches);
            // A request before every poll: the window alone would never end this spin.
            let requests = async {
                loop {
                    activity.touch();
                    tokio::task::yield_now().await;
                }
            };
            tokio::select! {
                end = spin => end,
                _ = requests => unreachable!(),
            }
        });
        assert_eq!(end, SpinEnd::Wanted);
        assert_eq!(
            stats.busy_polls.load(Ordering::Relaxed),
            2 * CONTENTION_CHECK_POLLS
        );
    }

    #[test]
    fn a_spin_without_requests_or_contention_ends_idle() {
        let activity = Activity::default();
        let stats = ServerStats::default();
        let mut switches = Scripted {
            readings: 0,
            calm: u64::MAX,
            step: 1,
        };
        let end = on_runtime(spin(
            &activity,
            Duration::from_micros(200),
            &stats,
            &mut switches,
        ));
        assert_eq!(end, SpinEnd::Idle);
    }

    #[test]
    fn the_backoff_doubles_to_its_cap_and_an_idle_spin_resets_it() {
        let mut b = BACKOFF_MIN;
        for _ in 0..20 {
            b = next_backoff(SpinEnd::Wanted, b);
        }
        assert_eq!(b, BACKOFF_MAX);
        assert_eq!(next_backoff(SpinEnd::Wanted, BACKOFF_MIN), BACKOFF_MIN * 2);
        assert_eq!(next_backoff(SpinEnd::Idle, BACKOFF_MAX), BACKOFF_MIN);
    }
}
