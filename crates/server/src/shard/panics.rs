//! Panic containment: a panic while serving one request ends only what was serving it, never a
//! thread, a connection slot or the process (issue 19 item 5: a request once panicked the UDP
//! thread for good, and a connection task without releasing its slot).
//!
//! ```text
//!  connection task  accept::serve ── contain(sniff + protocol) ──> slot released either way
//!  shard job        job_loop ── contain_blocking(engine batch) ──> no reply: "shard unavailable"
//!  UDP / OCSM       receive loop ── contain_blocking(one datagram) ──> next datagram
//!  shard tasks      run() ── contain(task) ──> logged and counted (a task is not restarted)
//! ```
//!
//! Every contained panic is logged at ERROR with its message and counted in
//! `ServerStats::panics` (INFO `panics`, /metrics `directkv_panics_total`). No request is
//! expected to panic: this is defence in depth, and the count says a bug was hit. The release
//! profile unwinds (`panic = "unwind"`), which is what makes containment possible.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use crate::stats::ServerStats;

/// Runs `f`; a panic in it is logged, counted and returned as `None`.
pub(crate) fn contain_blocking<T>(
    what: &'static str,
    stats: &ServerStats,
    f: impl FnOnce() -> T,
) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(payload) => {
            record(what, stats, payload.as_ref());
            None
        }
    }
}

/// Runs `fut` to completion; a panic in one of its polls ends it there (its state is dropped,
/// closing whatever sockets it held) and is logged, counted and returned as `None`.
pub(crate) async fn contain<F: Future>(
    what: &'static str,
    stats: &ServerStats,
    fut: F,
) -> Option<F::Output> {
    let caught = CatchUnwind {
        fut: Some(Box::pin(fut)),
    }
    .await;
    match caught {
        Ok(v) => Some(v),
        Err(payload) => {
            record(what, stats, payload.as_ref());
            None
        }
    }
}

/// A future that catches a panic of the future it wraps (boxed, so pinning needs no unsafe).
struct CatchUnwind<F> {
    fut: Option<Pin<Box<F>>>,
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let fut = this
            .fut
            .as_mut()
            .expect("CatchUnwind polled after it completed");
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                this.fut = None;
                Poll::Ready(Ok(v))
            }
            Err(payload) => {
                // The panicked future is dropped here, not polled again.
                this.fut = None;
                Poll::Ready(Err(payload))
            }
        }
    }
}

fn record(what: &'static str, stats: &ServerStats, payload: &(dyn Any + Send)) {
    stats.panics.fetch_add(1, Ordering::Relaxed);
    tracing::error!(
        what,
        panic = message(payload),
        "a panic ended this {what}; the server keeps serving (a bug: please report it)"
    );
}

/// The text of a panic payload (`panic!` with a literal or a formatted message).
fn message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a panic payload that is not text)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_future_is_contained_counted_and_its_state_dropped() {
        struct Dropped<'a>(&'a std::cell::Cell<bool>);
        impl Drop for Dropped<'_> {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let stats = ServerStats::default();
        let dropped = std::cell::Cell::new(false);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out = rt.block_on(contain("test", &stats, async {
            let _held = Dropped(&dropped);
            tokio::task::yield_now().await;
            if stats.panics.load(Ordering::Relaxed) == 0 {
                panic!("injected panic {}", 7);
            }
        }));
        assert_eq!(out, None);
        assert!(dropped.get(), "the future's state is dropped");
        assert_eq!(stats.panics.load(Ordering::Relaxed), 1);
        assert_eq!(rt.block_on(contain("test", &stats, async { 5 })), Some(5));
        assert_eq!(stats.panics.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_panicking_call_is_contained_and_counted() {
        let stats = ServerStats::default();
        assert_eq!(contain_blocking("test", &stats, || 3), Some(3));
        let r: Option<()> = contain_blocking("test", &stats, || panic!("injected"));
        assert_eq!(r, None);
        assert_eq!(stats.panics.load(Ordering::Relaxed), 1);
        assert_eq!(message(&"text"), "text");
        assert_eq!(message(&String::from("owned")), "owned");
        assert_eq!(message(&5u8), "(a panic payload that is not text)");
    }
}
