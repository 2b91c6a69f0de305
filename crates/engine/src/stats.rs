//! Counters of an engine: per operation kind, the operations and the memory they touched;
//! forwarding and stalls of the pipeline. Plain integers owned by the shard thread; readers take
//! a copy (`Engine::report`).

use crate::index::Access;
use crate::op::{OpKind, OP_KIND_COUNT};

/// Per operation kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KindCounters {
    pub ops: u64,
    /// Accesses in the seed's sense: one per contiguous region (bucket or record) read/written.
    pub reads: u64,
    pub writes: u64,
    /// Distinct 64-byte lines read/written.
    pub line_reads: u64,
    pub line_writes: u64,
}

impl KindCounters {
    pub fn accesses(&self) -> u64 {
        self.reads + self.writes
    }

    pub fn lines(&self) -> u64 {
        self.line_reads + self.line_writes
    }

    pub fn accesses_per_op(&self) -> f64 {
        self.accesses() as f64 / self.ops.max(1) as f64
    }
}

#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub kinds: [KindCounters; OP_KIND_COUNT],
    /// Operations served from the reservation station by data forwarding (not probed).
    pub forwarded: u64,
    /// Groups of same-key operations that ended in one write-back.
    pub write_backs: u64,
    /// Groups whose write-back ran out of memory and were re-run one by one.
    pub group_replays: u64,
    /// Windows cut short by a key conflict in stall mode.
    pub stalls: u64,
    pub batches: u64,
    pub errors: u64,
    /// Keys removed because their deadline passed, lazily (a lookup found them) or by the
    /// sweep (`Engine::expire_step`).
    pub expired_keys: u64,
    /// How late those keys were removed: deadline to removal.
    pub expiry_lag: crate::expiry::LagHistogram,
    /// Keys removed by eviction to make room (`crate::evict`).
    pub evicted_keys: u64,
}

impl Stats {
    /// A key whose deadline passed `lag_ms` ago was removed.
    pub(crate) fn note_expired(&mut self, lag_ms: u64) {
        self.expired_keys += 1;
        self.expiry_lag.record(lag_ms);
    }

    pub fn kind(&self, k: OpKind) -> &KindCounters {
        &self.kinds[k as usize]
    }

    pub(crate) fn charge(&mut self, k: OpKind, acc: &Access) {
        let c = &mut self.kinds[k as usize];
        c.reads += acc.reads;
        c.writes += acc.writes;
        c.line_reads += acc.line_reads;
        c.line_writes += acc.line_writes;
    }

    pub fn total(&self) -> KindCounters {
        let mut t = KindCounters::default();
        for c in &self.kinds {
            t.ops += c.ops;
            t.reads += c.reads;
            t.writes += c.writes;
            t.line_reads += c.line_reads;
            t.line_writes += c.line_writes;
        }
        t
    }
}
