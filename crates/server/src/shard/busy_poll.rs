//! Busy polling: after a shard reads a request it keeps polling its sockets without sleeping
//! for `busy_poll_us`, so the next request is picked up at once instead of after a wake-up.
//!
//! ```text
//!   request read ──> Activity::touch ──(parked? notify)──┐
//!                                                        v
//!   poller task: loop { yield to the runtime (epoll with a zero timeout)
//!                       a request since the last poll? ──> poll again
//!                       none for busy_poll_us? ──> park until the next touch
//!                       otherwise sched_yield, poll again }
//! ```
//!
//! On this kind of VM a thread that sleeps in epoll costs tens of microseconds per round trip
//! (the idle core halts, the sender's wake-up is an interrupt to it): one connection with one
//! 64-operation batch in flight ran 0.83 M ops/s blocking and 2.87 M ops/s polling (BENCHMARKS
//! "Busy polling"). While the poller task is runnable, the current-thread runtime polls the
//! I/O driver with a zero timeout instead of blocking; the poller itself only yields. Between
//! polls that found no request it also yields the core (`sched_yield`), so a shard sharing a
//! core with other threads (tests, a load generator) does not hold it for a whole time slice. Once no request has come
//! for the window, the poller parks and the shard sleeps in epoll as without busy polling.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::stats::ServerStats;

/// Requests seen by one shard, and the wake-up of its parked poller.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    touches: Cell<u64>,
    parked: Cell<bool>,
    wake: Notify,
}

impl Activity {
    /// A request was read: restarts the polling window (and wakes a parked poller).
    #[inline]
    pub(crate) fn touch(&self) {
        self.touches.set(self.touches.get().wrapping_add(1));
        if self.parked.get() {
            self.parked.set(false);
            self.wake.notify_one();
        }
    }
}

/// Polls until `window` passes without a touch, parks until the next touch, and so on.
/// Counts polls and parks in `stats` (`busy_polls`, `busy_poll_sleeps`).
pub(crate) async fn run(activity: &Activity, window: Duration, stats: &ServerStats) {
    loop {
        let mut seen = activity.touches.get();
        let mut last = Instant::now();
        let mut polls = 0u64;
        loop {
            tokio::task::yield_now().await;
            polls += 1;
            let now = activity.touches.get();
            if now != seen {
                // Requests keep coming: no sched_yield (it costs a pass through the
                // scheduler, about 4% of a saturated shard).
                seen = now;
                last = Instant::now();
            } else if last.elapsed() >= window {
                break;
            } else {
                std::thread::yield_now();
            }
        }
        stats.busy_polls.fetch_add(polls, Ordering::Relaxed);
        stats.busy_poll_sleeps.fetch_add(1, Ordering::Relaxed);
        activity.parked.set(true);
        // A touch between here and the await stores a permit, so none is missed.
        activity.wake.notified().await;
    }
}
