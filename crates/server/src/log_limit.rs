//! A rate limit on log lines that hostile clients can cause (issue 19 item 16): one malformed
//! connection costs a client a few bytes and used to cost the server a WARN line, so a loop of
//! them could write about a megabyte of log a second.
//!
//! Goals: at most `PROTOCOL_ERROR_LOG_LINES_PER_SEC_MAX` protocol-error lines per second for
//! the whole process, whatever the protocol and the shard; the lines dropped are counted
//! (`protocol_error_logs_suppressed`) and announced by one "suppressed K" line before the next
//! line that is written. Non-goals: per-client fairness, limits on other log lines.
//!
//! ```text
//!   error ──> admit(now_secs) ── same second, lines < max ──> log the line
//!                 │            └─ same second, lines = max ──> count as suppressed
//!                 └─ new second: window restarts; the first line written is preceded by
//!                    "suppressed K protocol-error log lines" when K > 0
//! ```
//!
//! Time enters as a number of seconds (`admit(now_secs)`), so tests drive the clock.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

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
}

static PROTOCOL_ERROR_LOG: LogLimit = LogLimit::new(PROTOCOL_ERROR_LOG_LINES_PER_SEC_MAX);

/// Seconds since the first call in this process.
fn now_secs() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs()
}

/// Runs `log` (which writes one protocol-error line) unless the rate limit drops it.
pub(crate) fn protocol_error(stats: &ServerStats, log: impl FnOnce()) {
    match PROTOCOL_ERROR_LOG.admit(now_secs()) {
        Verdict::Log { suppressed_before } => {
            if suppressed_before > 0 {
                tracing::warn!(
                    suppressed = suppressed_before,
                    "suppressed {suppressed_before} protocol-error log lines (at most {PROTOCOL_ERROR_LOG_LINES_PER_SEC_MAX} a second)"
                );
            }
            log();
        }
        Verdict::Suppress => {
            stats
                .protocol_error_logs_suppressed
                .fetch_add(1, Ordering::Relaxed);
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
}
