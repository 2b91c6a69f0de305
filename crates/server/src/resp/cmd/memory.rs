//! MEMORY STATS and MEMORY DOCTOR: what the shards' arenas hold, from every shard's engine
//! report, in Redis 7's field names where one means the same thing here.
//!
//! ```text
//!  MEMORY DOCTOR | STATS ── Planned::Barrier ──> server::barrier (every shard's report)
//!                                             └─> server::in_transaction (inside MULTI)
//! ```
//!
//! The accounting is INFO memory's (`resp/info.rs`): `total.allocated` is its `used_memory`,
//! the arenas less the slab's free blocks; `startup.allocated` the hash indexes, which are in
//! use from the start; `dataset.bytes` the key and value bytes stored; what is neither is
//! overhead (headers, chained buckets, slab rounding). Fields about what directkv has none of
//! (replication backlog, replicas, cluster links, Lua) are 0, as Redis reports them on a server
//! without them; `peak.allocated`, `allocator.*`, `rss-overhead.*` and `fragmentation*` are left
//! out (no peak is tracked; the arena is one mapping, not an allocator's).

use directkv_engine::{EvictionPolicy, Report};
use directkv_proto::resp::RespWriter;

/// Below this many bytes in use besides the indexes, MEMORY DOCTOR says the instance is
/// empty, as Redis does below 5 MiB allocated.
const DOCTOR_BYTES_MIN: u64 = 5 << 20;
/// Share of the slab regions in use past which MEMORY DOCTOR warns that writes will soon be
/// refused (under `noeviction` only: the other policies evict instead).
const DOCTOR_FULL_SHARE: f64 = 0.9;

const DOCTOR_EMPTY: &str = "Hi Sam, this instance is empty or is using very little memory, my \
    issues detector can't be used in these conditions. Please, leave for your mission on Earth \
    and fill it with some data. The new Sam and I will be back to our programming as soon as I \
    finished rebooting.\n";
const DOCTOR_FINE: &str = "Hi Sam, I can't find any memory issue in your instance. I can only \
    account for what occurs on this base.\n";
const DOCTOR_ISSUES: &str = "Sam, I detected a few issues in this Redis instance memory \
    implants:\n\n";
const DOCTOR_FULL: &str = " * Nearly full: more than 90% of the arenas' slab memory is in use \
    and maxmemory-policy is noeviction, so writes will soon be refused with OOM. Set an \
    allkeys-* policy (CONFIG SET maxmemory-policy allkeys-lru) to evict instead, or restart \
    with a larger --memory.\n\n";
const DOCTOR_END: &str = "I'm here to keep you safe, Sam. I want to help you.\n";

/// The totals of every shard's report.
struct Totals {
    arena: u64,
    index: u64,
    slab_free: u64,
    kv_bytes: u64,
    keys: u64,
    expiring_keys: u64,
}

impl Totals {
    fn of(reports: &[Report]) -> Totals {
        let sum = |f: fn(&Report) -> u64| reports.iter().map(f).sum::<u64>();
        Totals {
            arena: sum(|r| r.arena_bytes as u64),
            index: sum(|r| r.index_bytes as u64),
            slab_free: sum(|r| r.slab_free_bytes),
            kv_bytes: sum(|r| r.counts.kv_bytes),
            keys: sum(|r| r.counts.keys),
            expiring_keys: sum(|r| r.counts.expiring_keys),
        }
    }

    /// INFO's `used_memory`.
    fn used(&self) -> u64 {
        self.arena.saturating_sub(self.slab_free).max(1)
    }
}

/// MEMORY DOCTOR's text.
pub(crate) fn doctor(reports: &[Report], policy: EvictionPolicy) -> String {
    let t = Totals::of(reports);
    if t.used().saturating_sub(t.index) < DOCTOR_BYTES_MIN {
        return DOCTOR_EMPTY.to_string();
    }
    let slab = t.arena.saturating_sub(t.index).max(1);
    let slab_used = slab.saturating_sub(t.slab_free) as f64 / slab as f64;
    if policy == EvictionPolicy::NoEviction && slab_used > DOCTOR_FULL_SHARE {
        return format!("{DOCTOR_ISSUES}{DOCTOR_FULL}{DOCTOR_END}");
    }
    DOCTOR_FINE.to_string()
}

/// Writes MEMORY STATS's reply (a map; in RESP2 a flat array) for `clients_bytes` of
/// connection buffers.
pub(crate) fn stats(w: &mut RespWriter<'_>, reports: &[Report], clients_bytes: u64) {
    let t = Totals::of(reports);
    let used = t.used();
    let overhead = used.saturating_sub(t.kv_bytes);
    let grown = used.saturating_sub(t.index);
    let fields: [(&str, u64); 10] = [
        ("total.allocated", used),
        ("startup.allocated", t.index),
        ("replication.backlog", 0),
        ("clients.slaves", 0),
        ("clients.normal", clients_bytes),
        ("cluster.links", 0),
        ("aof.buffer", 0),
        ("lua.caches", 0),
        ("functions.caches", 0),
        ("overhead.total", overhead),
    ];
    w.map_len(fields.len() + 5);
    for (name, value) in &fields[..9] {
        w.bulk(name.as_bytes());
        w.integer(*value as i64);
    }
    // Redis's per-database hash tables: here the hash index, and the 8 bytes a deadline takes
    // in its key's entry (there is no table of deadlines).
    w.bulk(b"db.0");
    w.map_len(3);
    w.bulk(b"overhead.hashtable.main");
    w.integer(t.index as i64);
    w.bulk(b"overhead.hashtable.expires");
    w.integer((t.expiring_keys * 8) as i64);
    w.bulk(b"overhead.hashtable.slot-to-keys");
    w.integer(0);
    let (name, value) = fields[9];
    w.bulk(name.as_bytes());
    w.integer(value as i64);
    w.bulk(b"keys.count");
    w.integer(t.keys as i64);
    w.bulk(b"keys.bytes-per-key");
    w.integer((grown / t.keys.max(1)) as i64);
    w.bulk(b"dataset.bytes");
    w.integer(t.kv_bytes as i64);
    w.bulk(b"dataset.percentage");
    w.double(t.kv_bytes as f64 * 100.0 / grown.max(1) as f64);
}
