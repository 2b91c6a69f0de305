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

pub mod native;

use std::time::Duration;

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
}

/// The key bytes of `key_id`: its decimal digits, left-padded with '0' to `key_size` (or the
/// low `key_size` digits when the id has more). Printable so that the RESP and memcached text
/// protocols carry them unchanged, and distinct for all ids below `10^key_size`.
pub fn write_key(key_id: u64, key_size: usize, out: &mut Vec<u8>) {
    let start = out.len();
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
