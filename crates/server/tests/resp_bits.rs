//! Byte-range and bit commands over a real socket (GETRANGE SUBSTR SETRANGE GETBIT SETBIT
//! BITCOUNT BITPOS), on one and on several shards: the behaviour a client sees, hostile offsets
//! (huge, negative, not integers, past `value_len_max` or 512 MiB: refused before anything large
//! is allocated, the server still serving), and concurrent SETBIT/SETRANGE on one key with an
//! exact result (their read-modify-write runs in one step).
//!
//! A test binary of its own (not in `tests/it/`): its global allocator watches every thread of
//! the process, which other tests' servers would disturb.

use directkv_testkit::server as common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{bulk, ok, start, start_with, Client};
use directkv_proto::resp::Reply;

/// The system allocator, noting the largest allocation any thread asks for: a hostile offset
/// must not make the server allocate its size.
struct PeakAllocator;

static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the peak is
// a relaxed atomic max that does not allocate.
unsafe impl GlobalAlloc for PeakAllocator {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        PEAK_BYTES.fetch_max(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        PEAK_BYTES.fetch_max(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        PEAK_BYTES.fetch_max(new, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: PeakAllocator = PeakAllocator;

fn int(i: i64) -> Reply {
    Reply::Integer(i)
}

fn err(text: &str) -> Reply {
    Reply::Error(text.into())
}

#[test]
fn ranges_and_bits_behave_as_redis() {
    for shards in [1, 3] {
        let srv = start(shards);
        let mut c = Client::connect(&srv);
        assert_eq!(c.cmd(&["SET", "k", "Hello World"]), ok());
        assert_eq!(c.cmd(&["GETRANGE", "k", "0", "4"]), bulk("Hello"));
        assert_eq!(c.cmd(&["SUBSTR", "k", "-5", "-1"]), bulk("World"));
        assert_eq!(c.cmd(&["GETRANGE", "nope", "0", "-1"]), bulk(""));
        assert_eq!(c.cmd(&["SETRANGE", "k", "6", "Redis"]), int(11));
        assert_eq!(c.cmd(&["GET", "k"]), bulk("Hello Redis"));
        assert_eq!(c.cmd(&["SETRANGE", "pad", "3", "x"]), int(4));
        assert_eq!(c.cmd(&["GET", "pad"]), bulk("\0\0\0x"));
        assert_eq!(c.cmd(&["SETRANGE", "empty", "3", ""]), int(0));
        assert_eq!(c.cmd(&["EXISTS", "empty"]), int(0));
        assert_eq!(c.cmd(&["SETBIT", "b", "1", "1"]), int(0));
        assert_eq!(c.cmd(&["SETBIT", "b", "1", "1"]), int(1));
        assert_eq!(c.cmd(&["GET", "b"]), bulk("@"));
        assert_eq!(c.cmd(&["GETBIT", "b", "1"]), int(1));
        assert_eq!(c.cmd(&["GETBIT", "b", "1000"]), int(0));
        assert_eq!(c.cmd(&["SET", "f", "foobar"]), ok());
        assert_eq!(c.cmd(&["BITCOUNT", "f"]), int(26));
        assert_eq!(c.cmd(&["BITCOUNT", "f", "1", "1"]), int(6));
        assert_eq!(c.cmd(&["BITCOUNT", "f", "5", "30", "BIT"]), int(17));
        assert_eq!(c.cmd(&["SET", "z", "\u{0}\u{ff}"]), ok());
        assert_eq!(c.cmd(&["BITPOS", "b", "1"]), int(1));
        assert_eq!(c.cmd(&["BITPOS", "nope", "0"]), int(0));
        assert_eq!(c.cmd(&["BITPOS", "nope", "1"]), int(-1));
        assert_eq!(c.cmd(&["SET", "ones", "\u{7f}"]), ok());
        assert_eq!(c.cmd(&["SETBIT", "ones", "0", "1"]), int(0));
        assert_eq!(c.cmd(&["BITPOS", "ones", "0"]), int(8));
        assert_eq!(c.cmd(&["BITPOS", "ones", "0", "0", "-1"]), int(-1));
        // SETRANGE and SETBIT keep a number a number.
        assert_eq!(c.cmd(&["SET", "n", "100"]), ok());
        assert_eq!(c.cmd(&["SETRANGE", "n", "0", "2"]), int(3));
        assert_eq!(c.cmd(&["INCR", "n"]), int(201));
        srv.stop();
    }
}

#[test]
fn hostile_offsets_are_refused_before_allocating() {
    let srv = start(2);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    let size = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    let bit_offset = "ERR bit offset is not an integer or out of range";
    let not_int = "ERR value is not an integer or out of range";
    PEAK_BYTES.store(0, Ordering::Relaxed);
    for (args, want) in [
        // Past 512 MiB: Redis's limit.
        (&["SETRANGE", "k", "536870912", "x"][..], err(size)),
        (&["SETRANGE", "k", "9223372036854775807", "x"], err(size)),
        (&["SETBIT", "k", "4294967296", "1"], err(bit_offset)),
        (&["GETBIT", "k", "4294967296"], err(bit_offset)),
        // Past value_len_max (1 MiB), below 512 MiB: refused by the engine's validation.
        (&["SETRANGE", "k", "536870000", "x"], err(size)),
        (&["SETRANGE", "new", "1048576", "x"], err(size)),
        (&["SETBIT", "k", "4294967295", "1"], err(bit_offset)),
        (&["SETBIT", "new", "8388608", "1"], err(bit_offset)),
        // Negative and not integers.
        (
            &["SETRANGE", "k", "-1", "x"],
            err("ERR offset is out of range"),
        ),
        (&["SETRANGE", "k", "1.5", "x"], err(not_int)),
        (
            &["SETRANGE", "k", "99999999999999999999", "x"],
            err(not_int),
        ),
        (&["SETBIT", "k", "-1", "1"], err(bit_offset)),
        (&["SETBIT", "k", " 1", "1"], err(bit_offset)),
        (
            &["SETBIT", "k", "1", "2"],
            err("ERR bit is not an integer or out of range"),
        ),
        (&["GETRANGE", "k", "0", "1e3"], err(not_int)),
        (&["BITCOUNT", "k", "0", "x"], err(not_int)),
        (
            &["BITPOS", "k", "7"],
            err("ERR The bit argument must be 1 or 0."),
        ),
        // Wrong arity.
        (
            &["SETRANGE", "k", "1"],
            err("ERR wrong number of arguments for 'setrange' command"),
        ),
        (
            &["GETBIT", "k"],
            err("ERR wrong number of arguments for 'getbit' command"),
        ),
        (
            &["BITPOS", "k"],
            err("ERR wrong number of arguments for 'bitpos' command"),
        ),
        (
            &["BITCOUNT"],
            err("ERR wrong number of arguments for 'bitcount' command"),
        ),
    ] {
        assert_eq!(c.cmd(args), want, "{args:?}");
    }
    let peak = PEAK_BYTES.load(Ordering::Relaxed);
    assert!(peak < 4 << 20, "an allocation of {peak} bytes");
    // Nothing was created or changed, and the server goes on.
    assert_eq!(c.cmd(&["EXISTS", "new"]), int(0));
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    // Up to the limit works, and zero-pads.
    let last = (1usize << 20) - 1;
    assert_eq!(
        c.cmd(&["SETRANGE", "big", &last.to_string(), "x"]),
        int(1 << 20)
    );
    assert_eq!(
        c.cmd(&["SETBIT", "big", &(last * 8).to_string(), "1"]),
        int(0)
    );
    assert_eq!(c.cmd(&["BITCOUNT", "big"]), int(5));
    assert_eq!(c.cmd(&["BITPOS", "big", "1"]), int(last as i64 * 8));
    srv.stop();
}

#[test]
fn a_smaller_value_limit_bounds_setrange() {
    let srv = start_with(directkv_server::ServerConfig {
        value_len_max: 1000,
        ..common::config(1)
    });
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SETRANGE", "k", "999", "x"]), int(1000));
    assert_eq!(
        c.cmd(&["SETRANGE", "k", "999", "xy"]),
        err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    assert_eq!(c.cmd(&["STRLEN", "k"]), int(1000));
    srv.stop();
}

/// Clients setting bits and ranges of one key at once: every write lands, none is lost to
/// another's read-modify-write.
#[test]
fn concurrent_setbit_and_setrange_on_one_key_lose_nothing() {
    const CLIENTS: usize = 4;
    const EACH: usize = 250;
    let srv = start(3);
    std::thread::scope(|s| {
        for t in 0..CLIENTS {
            let srv = &srv;
            s.spawn(move || {
                let mut c = Client::connect(srv);
                for i in 0..EACH {
                    let bit = (i * CLIENTS + t).to_string();
                    assert_eq!(c.cmd(&["SETBIT", "bits", &bit, "1"]), int(0));
                    let off = (i * CLIENTS + t).to_string();
                    let b = [b'a' + t as u8];
                    let r = c.cmd(&["SETRANGE", "text", &off, std::str::from_utf8(&b).unwrap()]);
                    assert!(matches!(r, Reply::Integer(n) if n as usize > i * CLIENTS + t));
                }
            });
        }
    });
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["BITCOUNT", "bits"]), int((CLIENTS * EACH) as i64));
    let want: String = (0..CLIENTS * EACH)
        .map(|j| (b'a' + (j % CLIENTS) as u8) as char)
        .collect();
    assert_eq!(c.cmd(&["GET", "text"]), bulk(&want));
    srv.stop();
}
