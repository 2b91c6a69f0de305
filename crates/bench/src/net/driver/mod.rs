//! Benchmark drivers: one per target protocol, all fed the same operation stream.
//!
//! ```text
//!   workload ──[BenchOp; depth]──> Driver::execute ──wire──> target ──> BatchOutcome
//!                                   ├─ native.rs   : directkv native protocol via directkv-client
//!                                   ├─ resp.rs     : RESP pipeline (directkv or redis-server)
//!                                   └─ memcache.rs : memcached text protocol, multi-get + pipelining
//! ```
//!
//! The workload layer decides *which* key and *what kind* of operation; a driver decides only how
//! to say it on its wire. Keys and values are derived from the key id by `write_key` and
//! `write_value`, so every target stores byte-identical data and a GET on any target can be
//! checked against the value the load phase wrote.
//!
//! Each driver exposes the same inherent methods (async, one batch in flight per driver):
//! `execute(&mut self, ops: &[BenchOp], out: &mut BatchOutcome) -> Result<(), DriverError>`,
//! where one call sends the whole batch (one native frame, one RESP pipeline, one memcached
//! multi-get plus pipelined sets) and waits for every reply. `Driver` below dispatches by enum,
//! because `async fn` in traits is not object safe and the set of targets is closed.
//!
//! Non-goals: correctness checking beyond counting misses and errors (the integration tests do
//! that), and reconnecting in the middle of a measurement (a broken connection ends the run with
//! an error rather than silently measuring reconnects).

pub mod memcache;
pub mod native;
pub mod resp;

use std::net::SocketAddr;
use std::time::Duration;

use crate::net::workload::ValueFormat;

/// Why a driver could not connect or run a batch. Shared by every driver, so the runner reports
/// failures the same way whatever the target; per-operation failures are not errors but
/// counts in `BatchOutcome`.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The target could not be reached or refused the session (address, handshake, password).
    #[error("cannot connect to {target}: {reason}")]
    Connect { target: String, reason: String },
    /// The connection failed during a batch.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// No complete answer in time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The target's reply did not follow its protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The target cannot run this workload: an operation it has no command for, or a key,
    /// value or batch beyond its limits.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The target rejected a request as a whole (an error reply that is not about one key).
    #[error("server error: {0}")]
    Server(String),
}

/// A connected driver of any protocol. An enum rather than a trait object because the drivers'
/// `execute` is `async fn`, which trait objects cannot call, and the set of targets is closed.
pub enum Driver {
    Native(Box<native::NativeDriver>),
    Resp(resp::RespDriver),
    Memcache(memcache::MemcacheDriver),
}

impl Driver {
    /// Connects one driver to `target`, ready to run operations on values stored as `format`.
    /// Fails with `Unsupported` when the target cannot execute the workload's operations.
    pub async fn connect(
        target: &Target,
        shape: DataShape,
        format: ValueFormat,
    ) -> Result<Driver, DriverError> {
        match target {
            Target::Resp(addr) => Ok(Driver::Resp(
                resp::RespDriver::connect(*addr, shape, format).await?,
            )),
            Target::Memcache(addr) => Ok(Driver::Memcache(
                memcache::MemcacheDriver::connect(*addr, shape, format).await?,
            )),
            Target::Native(addr) => {
                let mut d = native::NativeDriver::connect(&addr.to_string(), shape).await?;
                d.set_format(format);
                Ok(Driver::Native(Box::new(d)))
            }
        }
    }

    /// Sends `ops` as one batch and waits for every reply; adds what came back to `out`.
    pub async fn execute(
        &mut self,
        ops: &[BenchOp],
        out: &mut BatchOutcome,
    ) -> Result<(), DriverError> {
        match self {
            Driver::Native(d) => d.execute(ops, out).await,
            Driver::Resp(d) => d.execute(ops, out).await,
            Driver::Memcache(d) => d.execute(ops, out).await,
        }
    }
}

/// Where a benchmark sends its operations, parsed from `native://`, `resp://` or `memcache://`
/// followed by `host:port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Native(SocketAddr),
    Resp(SocketAddr),
    Memcache(SocketAddr),
}

impl Target {
    /// Parses a target URL; the host must resolve (names like `localhost` are looked up once).
    pub fn parse(url: &str) -> Result<Target, String> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| {
            format!("target {url:?} has no scheme: use native://, resp:// or memcache:// HOST:PORT")
        })?;
        let rest = rest.trim_end_matches('/');
        let addr = std::net::ToSocketAddrs::to_socket_addrs(rest)
            .map_err(|e| format!("target {url:?}: bad host:port ({e})"))?
            .next()
            .ok_or_else(|| format!("target {url:?}: {rest:?} resolves to no address"))?;
        match scheme.to_ascii_lowercase().as_str() {
            "native" => Ok(Target::Native(addr)),
            "resp" | "redis" => Ok(Target::Resp(addr)),
            "memcache" | "memcached" => Ok(Target::Memcache(addr)),
            _ => Err(format!(
                "target {url:?}: unknown scheme {scheme:?} (native, resp, memcache)"
            )),
        }
    }

    /// The URL `parse` accepts back.
    pub fn url(&self) -> String {
        match self {
            Target::Native(a) => format!("native://{a}"),
            Target::Resp(a) => format!("resp://{a}"),
            Target::Memcache(a) => format!("memcache://{a}"),
        }
    }
}

/// What one benchmark operation does. Drivers for targets that cannot express an operation
/// natively (vector updates on memcached) return `DriverError::Unsupported` when created for a
/// workload that uses it, never at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BenchOpKind {
    /// Read the value of the key.
    Get,
    /// Overwrite the value of the key with `write_value(key_id)`.
    Put,
    /// YCSB F: read the value, then write it back (two round trips' worth of work, counted as one op).
    ReadModifyWrite,
    /// Add 1 to the key's value read as a little-endian u64 (directkv: update_s2s add u64;
    /// Redis: INCR; memcached: incr).
    AtomicAdd,
    /// Add 1 to every u32 element of the value (update_s2v add u32).
    VectorUpdate,
    /// Sum of the u32 elements of the value (reduce sum u32).
    VectorReduce,
    /// The u32 elements of the value that are non-zero (filter nonzero u32).
    VectorFilter,
}

/// One operation of a benchmark batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchOp {
    pub kind: BenchOpKind,
    pub key_id: u64,
}

/// Key and value sizes of a run, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataShape {
    pub key_size: usize,
    pub value_size: usize,
}

/// What came back for a batch. `ok + missed + failed` equals the number of operations executed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Operations that succeeded.
    pub ok: u64,
    /// Reads of keys that were absent.
    pub missed: u64,
    /// Operations the target answered with an error.
    pub failed: u64,
}

impl BatchOutcome {
    pub fn add(&mut self, other: BatchOutcome) {
        self.ok += other.ok;
        self.missed += other.missed;
        self.failed += other.failed;
    }

    pub fn total(&self) -> u64 {
        self.ok + self.missed + self.failed
    }

    /// The operations that count as throughput: `ok + missed`, never `failed` (issue 19 item
    /// 18). A miss is the target's correct answer to a read of an absent key: the load phase
    /// writes every key the workloads read, so misses only come from a target that lost keys
    /// (evicted, or a load that failed and was reported), and the tables show them in their own
    /// column. Counting them keeps targets that answer the same work comparable; a failed
    /// operation is one the target did not do, so it never counts.
    pub fn succeeded(&self) -> u64 {
        self.ok + self.missed
    }
}

/// The key bytes of `key_id`: its decimal digits, left-padded with '0' to `key_size` (or the
/// low `key_size` digits when the id has more). Printable so that the RESP and memcached text
/// protocols carry them unchanged, and distinct for all ids below `10^key_size`.
pub fn write_key(key_id: u64, key_size: usize, out: &mut Vec<u8>) {
    let start = out.len();
    if key_size >= 8 && key_id < 100_000_000 {
        // The common case (8-byte keys, ids below 10^8) without a division per digit: the
        // load generator formats one key per operation.
        out.resize(start + key_size - 8, b'0');
        out.extend_from_slice(&eight_digits(key_id as u32).to_le_bytes());
        return;
    }
    out.resize(start + key_size, b'0');
    let mut id = key_id;
    for byte in out[start..].iter_mut().rev() {
        *byte = b'0' + (id % 10) as u8;
        id /= 10;
        if id == 0 {
            break;
        }
    }
}

/// The 8 ASCII decimal digits of `n` (below 10^8), most significant in the lowest byte, by
/// splitting lanes of one word: 4+4 digits in 32-bit lanes, 2+2 in 16-bit lanes, 1+1 in bytes.
/// Each multiply-and-shift divides every lane at once (exact below 10^4 for /100 and below
/// 10^2 for /10), and no lane's product reaches the next lane.
fn eight_digits(n: u32) -> u64 {
    debug_assert!(n < 100_000_000);
    let n = u64::from(n);
    let x = (n / 10_000) | ((n % 10_000) << 32);
    let hundreds = ((x * 10_486) >> 20) & 0x0000_007F_0000_007F;
    let x = hundreds | ((x - hundreds * 100) << 16);
    let tens = ((x * 103) >> 10) & 0x000F_000F_000F_000F;
    let x = tens | ((x - tens * 10) << 8);
    x | 0x3030_3030_3030_3030
}

/// The value bytes the load phase writes for `key_id`: printable, derived from the id so a read
/// can be verified, `value_size` long.
pub fn write_value(key_id: u64, value_size: usize, out: &mut Vec<u8>) {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz012345";
    let mut x = key_id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..value_size {
        out.push(ALPHABET[(x >> 59) as usize]);
        x = x.rotate_left(5);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_zero_padded_decimal_id_on_both_paths() {
        // The digit-lane path (key_size >= 8, id < 10^8) against plain formatting.
        let mut ids: Vec<u64> = vec![0, 1, 9, 10, 99, 100, 999, 1_000, 9_999, 10_000, 10_001];
        ids.extend([
            99_999, 100_000, 1_234_567, 9_999_999, 10_000_000, 99_999_999,
        ]);
        ids.extend([100_000_000, 123_456_789, u64::MAX]);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ids.push(x % 100_000_000);
        }
        for key_size in [1, 3, 7, 8, 9, 12, 20] {
            for &id in &ids {
                let mut k = b"prefix".to_vec();
                write_key(id, key_size, &mut k);
                let full = format!("{id:0>width$}", width = key_size);
                let want = &full.as_bytes()[full.len() - key_size..];
                assert_eq!(&k[6..], want, "id {id} key_size {key_size}");
                assert_eq!(&k[..6], b"prefix");
            }
        }
    }

    #[test]
    fn targets_parse_and_bad_urls_are_explained() {
        assert_eq!(
            Target::parse("resp://127.0.0.1:7070"),
            Ok(Target::Resp("127.0.0.1:7070".parse().unwrap()))
        );
        assert_eq!(
            Target::parse("memcache://127.0.0.1:11211/").map(|t| t.url()),
            Ok("memcache://127.0.0.1:11211".to_string())
        );
        assert!(matches!(
            Target::parse("native://127.0.0.1:1"),
            Ok(Target::Native(_))
        ));
        assert!(Target::parse("127.0.0.1:7070")
            .unwrap_err()
            .contains("no scheme"));
        assert!(Target::parse("http://127.0.0.1:1")
            .unwrap_err()
            .contains("unknown scheme"));
        assert!(Target::parse("resp://127.0.0.1")
            .unwrap_err()
            .contains("bad host:port"));
    }

    #[test]
    fn keys_are_padded_decimal_and_distinct() {
        let mut a = Vec::new();
        write_key(42, 8, &mut a);
        assert_eq!(a, b"00000042");
        let mut b = Vec::new();
        write_key(99_999_999, 8, &mut b);
        assert_eq!(b, b"99999999");
        let mut seen = std::collections::HashSet::new();
        for id in 0..10_000u64 {
            let mut k = Vec::new();
            write_key(id, 4, &mut k);
            assert!(seen.insert(k), "duplicate key for id {id}");
        }
    }

    #[test]
    fn values_have_the_requested_size_and_depend_on_the_id() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        write_value(1, 8, &mut a);
        write_value(2, 8, &mut b);
        assert_eq!(a.len(), 8);
        assert_ne!(a, b);
        assert!(a.iter().all(u8::is_ascii_alphanumeric));
    }
}
