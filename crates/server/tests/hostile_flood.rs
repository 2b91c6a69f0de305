//! A flood of connections that never send anything (the issue 19 soak's `connection-flood`):
//! each costs the server its socket and a task, not a buffer. Before, every accepted
//! connection allocated a 64 KiB input buffer while it waited for its first byte; the soak's
//! 10 000 silent connections held about 75 KiB of RSS apiece once the heap was recycled
//! (server RSS 1066 MiB against an arena of 256 MiB).
//!
//! The test binary counts the bytes live in the whole process (every thread, the in-process
//! server's included) with a global allocator: it is a test binary of its own (not in
//! `tests/it/`), so that no other test's allocations count.

use directkv_testkit::server as common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::TcpStream;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::{info_field, start, Client};

/// Bytes allocated and not yet freed, by every thread of the process.
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

struct LiveBytes;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds as it does for `System`; the counter is an atomic integer that
// never allocates.
unsafe impl GlobalAlloc for LiveBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: LiveBytes = LiveBytes;

#[test]
fn silent_connections_hold_no_buffers() {
    const SILENT: usize = 300;
    let srv = start(2);
    let mut probe = Client::connect(&srv);
    let before_clients = info_field(&mut probe, "connected_clients");
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let silent: Vec<TcpStream> = (0..SILENT)
        .map(|_| TcpStream::connect(srv.addr()).unwrap())
        .collect();
    // Poll (with a deadline) until the server has taken every one of them.
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut probe, "connected_clients") < before_clients + SILENT as u64 {
        assert!(
            Instant::now() < deadline,
            "the server did not accept them all"
        );
        std::thread::yield_now();
    }
    let grown = LIVE_BYTES.load(Ordering::Relaxed) - before;
    let per_connection = grown / SILENT as i64;
    assert!(
        per_connection < 8 << 10,
        "each silent connection holds {per_connection} bytes ({grown} for {SILENT})"
    );
    // They are real connections: one that speaks is served.
    let mut talker = Client::connect(&srv);
    assert_eq!(
        talker.cmd(&["PING"]),
        directkv_proto::resp::Reply::Simple("PONG".into())
    );
    drop(silent);
    srv.stop();
}
