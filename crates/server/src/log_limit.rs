//! A rate limit on log lines that hostile clients can cause (issue 19 item 16): one malformed
//! connection costs a client a few bytes and used to cost the server a WARN line, so a loop of
//! them could write about a megabyte of log a second.
//!
//! Goals: at most `PROTOCOL_ERROR_LOG_LINES_PER_SEC_MAX` protocol-error lines per second for
//! the whole process, whatever the protocol and the shard; the lines dropped are counted
//! (`protocol_error_logs_suppressed`) and announced by one "suppressed K" line: before the next
//! line that is written, or, when the flood has stopped, by the `log-limit` thread once the
//! window has ended (so the count is not left unsaid until the next error, maybe days later).
//! Non-goals: per-client fairness, limits on other log lines.
//!
//! ```text
//!   error ──> admit(now_secs) ── same second, lines < max ──> log the line
//!                 │            └─ same second, lines = max ──> count as suppressed, wake the
//!                 │                                            log-limit thread
//!                 └─ new second: window restarts; the first line written is preceded by
//!                    "suppressed K protocol-error log lines" when K > 0
//!   log-limit thread: woken, sleeps to the end of the window, take_ended(now_secs): K > 0
//!                    not yet announced -> "suppressed K ..."; then waits to be woken again
//! ```
//!
//! Time enters as a number of seconds (`admit(now_secs)`, `take_ended(now_secs)`), so tests
//! drive the clock.

use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::stats::ServerStats;

/// Most protocol-error log lines written per second, server-wide.
pub(crate) const PROTOCOL_ERROR_LOG_LINES_PER_SEC_MAX: u32 = 10;

/// What to do with one log line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Write it, after a line announcing `suppressed_before` dropped lines when that is not 0.
    Log { suppressed_before: u64 },
    /// Drop it (it has been counted).
    Suppress,
}

/// A one-second window of admitted lines.
#[derive(Debug)]
pub(crate) struct LogLimit {
    lines_per_sec_max: u32,
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    second: u64,
    lines: u32,
    suppressed: u64,
}

impl LogLimit {
    pub(crate) const fn new(lines_per_sec_max: u32) -> Self {
        Self {
            lines_per_sec_max,
            window: Mutex::new(Window {
                second: 0,
                lines: 0,
                suppressed: 0,
            }),
        }
    }

    /// The verdict on a line at `now_secs` (any monotonic count of seconds).
    pub(crate) fn admit(&self, now_secs: u64) -> Verdict {
        // A poisoned lock only means a panic while logging: the counts are still usable.
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let mut suppressed_before = 0;
        if now_secs != w.second {
            w.second = now_secs;
            w.lines = 0;
        }
        if w.lines >= self.lines_per_sec_max {
            w.suppressed += 1;
            return Verdict::Suppress;
        }
        w.lines += 1;
        std::mem::swap(&mut suppressed_before, &mut w.suppressed);
        Verdict::Log { suppressed_before }
    }

    /// Takes the count of lines suppressed in windows that ended before `now_secs`, to be
    /// announced (0 if none, or if the window still runs: its count is announced later).
    pub(crate) fn take_ended(&self, now_secs: u64) -> u64 {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if w.second < now_secs {
            std::mem::take(&mut w.suppressed)
        } else {
            0
        }
    }
}

static PROTOCOL_ERROR_LOG: LogLimit = LogLimit::new(PROTOCOL_ERROR_LOG_LINES_PER_SEC_MAX);

static START: OnceLock<Instant> = OnceLock::new();

/// Seconds since the first call in this process.
fn now_secs() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_secs()
}

/// Writes the announcement of `suppressed` dropped lines.
fn announce(suppressed: u64) {
    tracing::warn!(
        suppressed,
        "suppressed {suppressed} protocol-error log lines (at most {PROTOCOL_ERROR_LOG_LINES_PER_SEC_MAX} a second)"
    );
}

/// The `log-limit` thread's wake-up: set when a line is suppressed.
static PENDING: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// Wakes the thread that announces suppressed lines once their window ends (started on the
/// first suppression; it then sleeps on `PENDING` while nothing is suppressed).
fn wake_announcer() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("log-limit".into())
            .spawn(announcer);
        if let Err(e) = spawned {
            tracing::warn!("cannot start the log-limit thread: {e}");
        }
    });
    let (pending, woken) = &PENDING;
    *pending.lock().unwrap_or_else(|e| e.into_inner()) = true;
    woken.notify_one();
}

fn announcer() {
    let (pending, woken) = &PENDING;
    loop {
        {
            let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
            while !*p {
                p = woken.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            *p = false;
        }
        // To just past the end of the current window.
        let now = START.get_or_init(Instant::now).elapsed();
        let window_end = Duration::from_secs(now.as_secs() + 1);
        std::thread::sleep(window_end - now + Duration::from_millis(1));
        let suppressed = PROTOCOL_ERROR_LOG.take_ended(now_secs());
        if suppressed > 0 {
            announce(suppressed);
        }
    }
}

/// Runs `log` (which writes one protocol-error line) unless the rate limit drops it.
pub(crate) fn protocol_error(stats: &ServerStats, log: impl FnOnce()) {
    match PROTOCOL_ERROR_LOG.admit(now_secs()) {
        Verdict::Log { suppressed_before } => {
            if suppressed_before > 0 {
                announce(suppressed_before);
            }
            log();
        }
        Verdict::Suppress => {
            stats
                .protocol_error_logs_suppressed
                .fetch_add(1, Ordering::Relaxed);
            wake_announcer();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_limit_and_the_rest_announced() {
        let limit = LogLimit::new(10);
        let logged = (0..1000)
            .filter(|_| limit.admit(5) != Verdict::Suppress)
            .count();
        assert_eq!(logged, 10);
        assert_eq!(
            limit.admit(6),
            Verdict::Log {
                suppressed_before: 990
            }
        );
        assert_eq!(
            limit.admit(6),
            Verdict::Log {
                suppressed_before: 0
            }
        );
        // A quiet stretch then a line: written, nothing to announce.
        assert_eq!(
            limit.admit(100),
            Verdict::Log {
                suppressed_before: 0
            }
        );
    }

    #[test]
    fn suppressed_lines_are_announced_when_their_window_ends() {
        let limit = LogLimit::new(1);
        assert_eq!(
            limit.admit(5),
            Verdict::Log {
                suppressed_before: 0
            }
        );
        assert_eq!(limit.admit(5), Verdict::Suppress);
        assert_eq!(limit.admit(5), Verdict::Suppress);
        // Not while the window runs; once, after it.
        assert_eq!(limit.take_ended(5), 0);
        assert_eq!(limit.take_ended(6), 2);
        assert_eq!(limit.take_ended(7), 0);
        // Announced there, so not again before the next line.
        assert_eq!(
            limit.admit(8),
            Verdict::Log {
                suppressed_before: 0
            }
        );
    }
}
