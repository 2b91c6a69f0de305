//! `Engine`: one shard's store. Owns the arena (through the table), the slab allocator, the
//! reservation station and all scratch memory, sized at construction; `execute` runs a batch.

use std::sync::Arc;

use crate::arena::{Arena, ARENA_ALIGN_BYTES};
use crate::config::{tune, EngineConfig, ExecMode, Limits, WINDOW_MAX};
use crate::error::OpError;
use crate::evict::{EvictionPolicy, Evictor};
use crate::index::bucket::CHAIN_POINTER_MAX;
use crate::index::{record, Access, Table, TableCounts};
use crate::op::{Op, Results, Status};
use crate::ops::{ElemType, FunctionRegistry};
use crate::pipeline::{Pipeline, Station};
use crate::slab::{class_for_size, SlabAllocator, SlabConfig, SlabStats, SLAB_UNIT_BYTES};
use crate::snapshot::{LoadCounts, SnapEntry, SnapPoint, SnapProgress, SnapState, SnapshotBusy};
use crate::stats::Stats;

/// Smallest arena: one huge page of index and one of slab.
pub const MEMORY_BYTES_MIN: usize = 2 * ARENA_ALIGN_BYTES;
/// Largest arena: chained buckets are linked by 30-bit pointers in 32-byte units (the
/// bucket's 31st bit is eviction's reference bit, `index/bucket.rs`), so 32 GiB.
pub const MEMORY_BYTES_MAX: usize = (CHAIN_POINTER_MAX as usize + 1) * SLAB_UNIT_BYTES;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot map the arena: {0}")]
    Map(#[from] std::io::Error),
}

/// A snapshot of what the engine holds and did.
#[derive(Debug, Clone)]
pub struct Report {
    pub stats: Stats,
    pub counts: TableCounts,
    pub slab: SlabStats,
    pub arena_bytes: usize,
    pub index_bytes: usize,
    pub hash_index_ratio: f64,
    pub inline_threshold: usize,
    pub slab_free_bytes: u64,
    /// Key and value bytes stored / arena bytes.
    pub memory_utilization: f64,
}

pub struct Engine {
    table: Table,
    registry: Arc<FunctionRegistry>,
    stats: Stats,
    station: Station,
    /// A group's value while the pipeline forwards it between the group's operations.
    forwarded: Vec<u8>,
    scratch: Vec<u8>,
    access: Access,
    limits: Limits,
    mode: ExecMode,
    index_bytes: usize,
    /// Run the x86-64-v3 build of the pipeline (the CPU has AVX2, BMI1/2, LZCNT, POPCNT).
    wide: bool,
    /// Blocks taken by the trial allocation of `check_atomic` (scratch, reused).
    trial: Vec<(u32, u8)>,
    /// The time of the next batches, ms since the Unix epoch (`set_now`; 0 until set, when no
    /// deadline has passed).
    now: u64,
    /// Keys of expired records found by a sweep step, length-prefixed (scratch, reused).
    sweep_keys: Vec<u8>,
    /// Eviction: policy, hand, PRNG (`crate::evict`).
    evictor: Evictor,
    /// Keys the last `execute` or `expire_step` removed for their deadline, length-prefixed
    /// (`reclaimed_keys`).
    reclaimed: Vec<u8>,
    /// Bytes of `reclaimed` that eviction before the last batch's operations took
    /// (`evicted_before_batch`), and where eviction after it starts (`evicted_after_batch`).
    evicted_pre_end: usize,
    evicted_post_start: usize,
    /// The CAS unique the next memcache write takes (`op::mc`): starts at 1, never 0.
    cas_next: u64,
}

impl Engine {
    pub fn new(cfg: EngineConfig) -> Result<Engine, EngineError> {
        Engine::with_registry(cfg, Arc::new(FunctionRegistry::default()))
    }

    pub fn with_registry(
        cfg: EngineConfig,
        registry: Arc<FunctionRegistry>,
    ) -> Result<Engine, EngineError> {
        if cfg.memory_bytes < MEMORY_BYTES_MIN {
            return Err(EngineError::Config(format!(
                "memory {} below the minimum {MEMORY_BYTES_MIN}",
                cfg.memory_bytes
            )));
        }
        if cfg.memory_bytes > MEMORY_BYTES_MAX {
            return Err(EngineError::Config(format!(
                "memory {} above the maximum {MEMORY_BYTES_MAX} of one shard",
                cfg.memory_bytes
            )));
        }
        if !(0.0..=crate::evict::EVICTION_WATERMARK_MAX).contains(&cfg.eviction_watermark) {
            return Err(EngineError::Config(format!(
                "eviction watermark {} not in 0..={}",
                cfg.eviction_watermark,
                crate::evict::EVICTION_WATERMARK_MAX
            )));
        }
        if cfg.window == 0 || cfg.window > WINDOW_MAX {
            return Err(EngineError::Config(format!(
                "window {} not in 1..={WINDOW_MAX}",
                cfg.window
            )));
        }
        if cfg.key_len_max == 0 || cfg.key_len_max > u8::MAX as usize {
            return Err(EngineError::Config(format!(
                "key_len_max {} not in 1..=255",
                cfg.key_len_max
            )));
        }
        let (ratio, threshold) = match (cfg.hash_index_ratio, cfg.inline_threshold) {
            (Some(r), Some(t)) => (r, t),
            (r, t) => {
                let tuning = tune(
                    cfg.memory_bytes,
                    cfg.expected_kv_bytes,
                    cfg.target_utilization,
                );
                (
                    r.unwrap_or(tuning.hash_index_ratio),
                    t.unwrap_or(tuning.inline_threshold),
                )
            }
        };
        if !(ratio > 0.0 && ratio < 1.0) {
            return Err(EngineError::Config(format!(
                "hash index ratio {ratio} not in (0, 1)"
            )));
        }
        let mut arena = Arena::new(cfg.memory_bytes)?;
        let len = arena.len();
        let index_bytes = ((len as f64 * ratio) as usize / ARENA_ALIGN_BYTES * ARENA_ALIGN_BYTES)
            .clamp(ARENA_ALIGN_BYTES, len - ARENA_ALIGN_BYTES);
        let slab_bytes = len - index_bytes;
        let record_max = record::LARGE_HEADER_BYTES + cfg.key_len_max + cfg.value_len_max;
        let top_class = class_for_size(record_max, 21).ok_or_else(|| {
            EngineError::Config(format!("value_len_max {} too large", cfg.value_len_max))
        })?;
        if (SLAB_UNIT_BYTES << top_class) > slab_bytes {
            return Err(EngineError::Config(format!(
                "slab region of {slab_bytes} bytes cannot hold one key-value of {record_max} bytes; raise memory or lower value_len_max"
            )));
        }
        // One result of `value_len_max` bytes must fit, and result offsets are 32-bit.
        if cfg.results_bytes_max < cfg.value_len_max || cfg.results_bytes_max > u32::MAX as usize {
            return Err(EngineError::Config(format!(
                "results_bytes_max {} must be at least value_len_max {} and at most {}",
                cfg.results_bytes_max,
                cfg.value_len_max,
                u32::MAX
            )));
        }
        if cfg.prefault {
            arena.prefault();
        }
        let slab = SlabAllocator::new(SlabConfig {
            base_unit: (index_bytes / SLAB_UNIT_BYTES) as u32,
            units: (slab_bytes / SLAB_UNIT_BYTES) as u32,
            top_class,
            hot_cache_len: crate::slab::SLAB_HOT_CACHE_LEN_DEFAULT,
            batch_len: crate::slab::SLAB_BATCH_LEN_DEFAULT,
        });
        let mut table = Table::new(arena, slab, index_bytes, threshold, top_class);
        table.set_track_references(matches!(
            cfg.eviction_policy,
            EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru
        ));
        Ok(Engine {
            table,
            registry,
            stats: Stats::default(),
            // A power-of-two ring lets positions be masks instead of divisions.
            station: Station::new(cfg.window.next_power_of_two()),
            forwarded: Vec::with_capacity(cfg.value_len_max),
            scratch: Vec::with_capacity(cfg.value_len_max),
            access: Access::default(),
            limits: Limits {
                key_len_max: cfg.key_len_max,
                value_len_max: cfg.value_len_max,
                results_bytes_max: cfg.results_bytes_max,
            },
            mode: cfg.mode,
            wide: crate::simd::wide_cpu(),
            index_bytes,
            trial: Vec::new(),
            now: 0,
            sweep_keys: Vec::new(),
            evictor: Evictor::new(
                cfg.eviction_policy,
                cfg.eviction_watermark,
                len as u64,
                slab_bytes as u64,
            ),
            reclaimed: Vec::new(),
            evicted_pre_end: 0,
            evicted_post_start: 0,
            cas_next: 1,
        })
    }

    /// Runs a batch; `out` receives one result per operation, in order. Under an eviction
    /// policy, keys are evicted first when the batch's writes may not fit (`crate::evict`).
    pub fn execute(&mut self, ops: &[Op], out: &mut Results) {
        self.reclaimed.clear();
        if self.evictor.policy != EvictionPolicy::NoEviction {
            self.make_room(ops);
            self.take_evicted();
        }
        self.evicted_pre_end = self.reclaimed.len();
        self.run(ops, out);
        self.evicted_post_start = self.reclaimed.len();
    }

    /// Runs the reads of `ops` and answers each write with `e`: how a server whose persistence
    /// log failed keeps serving reads (`OpError::NotLogged`). A memcached get without a touch
    /// runs as a read (`Op::acknowledges_a_write`; it may give an item a CAS, unlogged: after
    /// the failure nothing is logged and a restart has the store as of the failure). Not the
    /// data path: it copies the reads out and back.
    pub fn execute_reads_only(&mut self, ops: &[Op], out: &mut Results, e: OpError) {
        let reads: Vec<Op> = ops
            .iter()
            .filter(|op| !op.acknowledges_a_write())
            .copied()
            .collect();
        let mut got = Results::default();
        self.execute(&reads, &mut got);
        out.reset(ops.len(), self.limits.results_bytes_max);
        let mut next = 0;
        for (i, op) in ops.iter().enumerate() {
            if op.acknowledges_a_write() {
                let start = out.mark();
                out.finish(i, Status::Error(e), start);
            } else {
                let start = out.mark();
                out.buf().extend_from_slice(got.data(next));
                out.finish(i, got.status(next), start);
                next += 1;
            }
        }
    }

    /// The batch itself, after eviction made room.
    #[inline]
    fn run(&mut self, ops: &[Op], out: &mut Results) {
        let cas_base = self.cas_next;
        self.cas_next = crate::memcache::cas_after(cas_base, ops.len());
        let mut p = Pipeline {
            table: &mut self.table,
            registry: &self.registry,
            stats: &mut self.stats,
            station: &mut self.station,
            forwarded: &mut self.forwarded,
            scratch: &mut self.scratch,
            access: &mut self.access,
            limits: self.limits,
            stall: self.mode == ExecMode::Stall,
            now: self.now,
            reclaimed: &mut self.reclaimed,
            cas_base,
        };
        #[cfg(target_arch = "x86_64")]
        if self.wide {
            // SAFETY: `wide` is set only when the CPU has every feature `execute_wide` enables.
            unsafe { p.execute_wide(ops, out) };
            return;
        }
        p.execute(ops, out);
    }

    /// Runs `ops` all or nothing: when every operation is within the limits and every block
    /// their writes may need is free, runs the batch into `out` and returns `Ok`; otherwise
    /// returns the first limit error or `OutOfMemory` and changes nothing (`crate::atomic` says
    /// why a batch that passed the check cannot run out of memory). Operations may still fail
    /// for their own reasons (an INCRBY of a value that is not a number), as in a Redis
    /// transaction; puts, deletes and cas cannot.
    pub fn execute_atomic(&mut self, ops: &[Op], out: &mut Results) -> Result<(), OpError> {
        self.check_atomic(ops)?;
        self.execute(ops, out);
        Ok(())
    }

    /// The check of [`Engine::execute_atomic`] alone, for a caller that must answer "fits"
    /// before it is told to execute (a shard's part of a cross-shard write). `execute(ops)`
    /// then stores every write, provided nothing else ran on this engine in between.
    /// The keys it evicts to make room are then [`Engine::reclaimed_keys`], at once: a
    /// check whose write is then refused or aborted (a cross-shard write another shard
    /// refused) has still removed them, and whoever watches keys must learn it before any
    /// later command runs.
    pub fn check_atomic(&mut self, ops: &[Op]) -> Result<(), OpError> {
        self.reclaimed.clear();
        self.evicted_pre_end = 0;
        self.evicted_post_start = usize::MAX;
        if self.evictor.policy != EvictionPolicy::NoEviction {
            self.make_room(ops);
            self.take_evicted();
        }
        crate::atomic::check(&mut self.table, &self.limits, ops, &mut self.trial)
    }

    #[cold]
    #[inline(never)]
    fn make_room(&mut self, ops: &[Op]) {
        self.evictor.make_room(
            &mut self.table,
            &self.limits,
            &mut self.stats,
            self.now,
            ops,
            &mut self.trial,
        );
    }

    /// Sets the eviction policy (Redis's `maxmemory-policy`; CONFIG SET changes it live).
    pub fn set_eviction_policy(&mut self, policy: EvictionPolicy) {
        self.evictor.policy = policy;
        self.table.set_track_references(matches!(
            policy,
            EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru
        ));
    }

    pub fn eviction_policy(&self) -> EvictionPolicy {
        self.evictor.policy
    }

    /// Free slab bytes eviction keeps once it has started (`eviction_watermark` of the arena).
    pub fn eviction_watermark_bytes(&self) -> u64 {
        self.evictor.watermark_bytes()
    }

    /// Eviction ahead of need, between batches: while the slab's free bytes are below the
    /// watermark, evicts up to `keys_max` keys under the policy. Returns how many it evicted.
    /// The keys it evicts are added to [`Engine::reclaimed_keys`] (it runs after `execute`).
    pub fn evict_ahead(&mut self, keys_max: u64) -> u64 {
        self.evicted_post_start = self.evicted_post_start.min(self.reclaimed.len());
        let n = self
            .evictor
            .evict_ahead(&mut self.table, &mut self.stats, self.now, keys_max);
        self.take_evicted();
        n
    }

    /// Moves the keys eviction removed into `reclaimed`.
    fn take_evicted(&mut self) {
        if !self.evictor.evicted.is_empty() {
            self.reclaimed.extend_from_slice(&self.evictor.evicted);
            self.evictor.evicted.clear();
        }
    }

    /// Evicts one unit of the policy (a main bucket's chain, or one key for volatile-ttl),
    /// whatever memory is free. Returns the keys evicted: 0 when nothing is evictable.
    /// They are then [`Engine::reclaimed_keys`].
    pub fn evict_step(&mut self) -> u64 {
        self.reclaimed.clear();
        self.evicted_pre_end = 0;
        self.evicted_post_start = usize::MAX;
        let n = self
            .evictor
            .evict_unit(&mut self.table, &mut self.stats, self.now);
        self.take_evicted();
        n
    }

    /// Sets the time of the batches that follow, in milliseconds since the Unix epoch: the one
    /// way time enters the engine (`crate::expiry`). A key whose deadline is at or before it
    /// is gone for every operation. The server passes the wall clock before each batch; tests
    /// pass what they like.
    pub fn set_now(&mut self, now_ms: u64) {
        self.now = now_ms;
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    /// The CAS unique the next operation will take if it is a memcache write (engine state:
    /// every operation executed takes one number, in request order, used or not, so the same
    /// operations from the same `cas_next` give the same CAS values, in one batch or one by
    /// one; `memcache::cas_at`).
    pub fn cas_next(&self) -> u64 {
        self.cas_next
    }

    /// Sets the CAS counter (persistence restores it); 0 is taken as 1 (0 means "no CAS").
    pub fn set_cas_next(&mut self, next: u64) {
        self.cas_next = next.max(1);
    }

    /// Removes every key in place (FLUSHALL, flush_all): afterwards the store is as a new
    /// engine's of the same configuration (no key, the whole slab region free, eviction's
    /// hand and PRNG back at their start, `report` as fresh) without mapping a new arena.
    /// What goes on: the CAS counter (a CAS handed out before must never match an item written
    /// after, as memcached's counter survives flush_all), `now`, the eviction policy and the
    /// counters of `stats` (expired and evicted keys are totals since start, as Redis's INFO
    /// keeps them over FLUSHALL). The keys are not reported as reclaimed: whoever watches keys
    /// learns of a clear from its caller. A snapshot being taken is abandoned, as
    /// [`Engine::snapshot_abort`] does: whoever took it starts again.
    ///
    /// Cost: what was used, not the arena's size: the kernel frees the resident pages of the
    /// arena (`MADV_DONTNEED`) and faults them in again, zeroed, when they are next touched,
    /// as in a new engine; the allocator carves its region again (one push per top-class
    /// block). BENCHMARKS.md ("FLUSHALL in place") has the measurements.
    pub fn clear(&mut self) {
        self.table.clear();
        self.evictor.reset();
        self.reclaimed.clear();
        self.evicted_pre_end = 0;
        self.evicted_post_start = usize::MAX;
    }

    /// Visits the live key-values (deadline not passed at `now`) of up to `count` main buckets
    /// of the index from `cursor` on, with their chains: `visit(key, value, deadline)`.
    /// Returns the cursor to continue from, 0 at the end of a pass; a pass started at 0
    /// visits every key present during the whole pass exactly once (the index never resizes).
    pub fn scan(&self, cursor: u64, count: u64, mut visit: impl FnMut(&[u8], &[u8], u64)) -> u64 {
        let now = self.now;
        self.table.scan(cursor, count, |k, v, d| {
            if !crate::expiry::expired(d, now) {
                visit(k, v, d)
            }
        })
    }

    /// Main buckets of the index: a full pass of [`Engine::scan`] or
    /// [`Engine::expire_step`] covers this many.
    pub fn scan_buckets(&self) -> u64 {
        self.table.bucket_count()
    }

    /// Active expiry: removes the expired keys (deadline at or before `now`) of up to
    /// `buckets` main buckets from `cursor` on, with their chains. Returns the cursor to
    /// continue from (0: the pass is done) and how many keys it removed. A pass reclaims every
    /// key that was expired when the pass began.
    pub fn expire_step(&mut self, cursor: u64, buckets: u64) -> (u64, u64) {
        let now = self.now;
        let mut keys = std::mem::take(&mut self.sweep_keys);
        keys.clear();
        self.reclaimed.clear();
        self.evicted_pre_end = 0;
        self.evicted_post_start = usize::MAX;
        let next = self.table.scan(cursor, buckets, |k, _, d| {
            if crate::expiry::expired(d, now) {
                keys.push(k.len() as u8);
                keys.extend_from_slice(k);
            }
        });
        let mut removed = 0u64;
        let mut at = 0usize;
        while at < keys.len() {
            let n = usize::from(keys[at]);
            let key = &keys[at + 1..at + 1 + n];
            at += 1 + n;
            self.access.clear();
            let h = crate::hash::key_hash(key);
            if let Some(loc) = self.table.lookup(key, h, &mut self.access) {
                let d = loc.deadline();
                if crate::expiry::expired(d, now) {
                    self.table.remove(&loc, &mut self.access);
                    self.stats.note_expired(now - d);
                    self.reclaimed.push(n as u8);
                    self.reclaimed.extend_from_slice(key);
                    removed += 1;
                }
            }
        }
        self.sweep_keys = keys;
        (next, removed)
    }

    /// The keys the last [`Engine::execute`] (with the [`Engine::evict_ahead`] after it),
    /// [`Engine::check_atomic`], [`Engine::expire_step`] or [`Engine::evict_step`] removed
    /// without an operation asking: because their deadline had passed (lazy expiry on a
    /// lookup, or the sweep) or by eviction, in the order removed. Whoever must see every
    /// change of a key (WATCH, a log of writes) reads them after each of those calls (after
    /// [`Engine::execute_atomic`] they are its `execute`'s only).
    pub fn reclaimed_keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        keys_of(&self.reclaimed)
    }

    /// The keys the last [`Engine::execute`] evicted to make room before its operations ran, in
    /// the order removed: the first of its [`Engine::reclaimed_keys`]. A log records them as
    /// deletes ahead of the batch (`directkv_persist::batch`).
    pub fn evicted_before_batch(&self) -> impl Iterator<Item = &[u8]> + '_ {
        keys_of(&self.reclaimed[..self.evicted_pre_end])
    }

    /// The keys [`Engine::evict_ahead`] evicted after the last [`Engine::execute`]: the last of
    /// its [`Engine::reclaimed_keys`]. Between the two come the keys its lookups found expired
    /// (lazy expiry), which a replay at the same `now` reclaims again.
    pub fn evicted_after_batch(&self) -> impl Iterator<Item = &[u8]> + '_ {
        keys_of(&self.reclaimed[self.evicted_post_start.min(self.reclaimed.len())..])
    }

    /// Whether batches run the pipeline built for x86-64-v3 CPUs (AVX2, BMI1/2, LZCNT, POPCNT),
    /// which this CPU has, or the baseline x86-64 build.
    pub fn wide_code(&self) -> bool {
        self.wide
    }

    /// Runs the baseline x86-64 build of the pipeline even on a CPU that has the wider
    /// instructions (tests compare both builds; `wide == true` on a CPU without them is ignored).
    pub fn set_wide_code(&mut self, wide: bool) {
        self.wide = wide && crate::simd::wide_cpu();
    }

    pub fn set_mode(&mut self, mode: ExecMode) {
        self.mode = mode;
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn registry(&self) -> &Arc<FunctionRegistry> {
        &self.registry
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = Stats::default();
    }

    pub fn counts(&self) -> TableCounts {
        self.table.counts()
    }

    pub fn memory_utilization(&self) -> f64 {
        self.table.counts().kv_bytes as f64 / self.table.arena().len() as f64
    }

    pub fn report(&self) -> Report {
        let len = self.table.arena().len();
        Report {
            stats: self.stats.clone(),
            counts: self.table.counts(),
            slab: self.table.slab().stats(),
            arena_bytes: len,
            index_bytes: self.index_bytes,
            hash_index_ratio: self.index_bytes as f64 / len as f64,
            inline_threshold: self.table.inline_threshold(),
            slab_free_bytes: self.table.slab().free_bytes(),
            memory_utilization: self.memory_utilization(),
        }
    }

    /// Buckets per chain length (scans the index).
    pub fn chain_histogram(&self) -> Vec<u64> {
        self.table.chain_histogram()
    }

    /// Base and length of the arena, for the line-read probe of the benchmark.
    pub fn arena_region(&self) -> (*const u8, usize) {
        (self.table.arena().base(), self.table.arena().len())
    }

    /// [`Engine::scan`] with each key's memcache view: `visit(key, value, meta)`, whose
    /// `deadline` is the key's and whose `flags` and `cas` are 0 for a key without item meta
    /// (written by the RESP or native operations).
    pub fn scan_items(
        &self,
        cursor: u64,
        count: u64,
        mut visit: impl FnMut(&[u8], &[u8], crate::op::mc::ItemMeta),
    ) -> u64 {
        let now = self.now;
        self.table.scan_items(cursor, count, |k, v, d, m| {
            if !crate::expiry::expired(d, now) {
                let meta = crate::op::mc::ItemMeta {
                    flags: m.flags,
                    cas: m.cas,
                    deadline: d,
                };
                visit(k, v, meta)
            }
        })
    }

    /// Calls `f(key, value)` for every stored key-value, expired ones included.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        self.table.for_each(|k, v, _| f(k, v))
    }

    /// Calls `f(key, value, deadline)` for every stored key-value, expired ones included
    /// (`NO_DEADLINE`: none).
    pub fn for_each_with_deadline(&self, f: impl FnMut(&[u8], &[u8], u64)) {
        self.table.for_each(f)
    }

    #[doc(hidden)]
    /// Arena bytes a key-value of these lengths, with a deadline or not, takes in this engine
    /// (`Table::footprint_bytes`).
    pub fn footprint_bytes(&self, klen: usize, vlen: usize, deadline: bool) -> usize {
        self.table.footprint_bytes(klen, vlen, deadline, false)
    }

    #[doc(hidden)]
    /// [`Engine::footprint_bytes`] of an item with memcached's flags and CAS (`meta`) or not:
    /// such an item is always a record, with 12 more header bytes.
    pub fn item_footprint_bytes(
        &self,
        klen: usize,
        vlen: usize,
        deadline: bool,
        meta: bool,
    ) -> usize {
        self.table.footprint_bytes(klen, vlen, deadline, meta)
    }

    pub fn check_invariants(&self) {
        self.table.slab().check_invariants();
        let mut keys = 0u64;
        let mut bytes = 0u64;
        let mut expiring = 0u64;
        self.for_each_with_deadline(|k, v, d| {
            keys += 1;
            bytes += (k.len() + v.len()) as u64;
            expiring += u64::from(d != record::NO_DEADLINE);
        });
        assert_eq!(keys, self.table.counts().keys);
        assert_eq!(expiring, self.table.counts().expiring_keys);
        assert_eq!(bytes, self.table.counts().kv_bytes);
    }

    fn one(&mut self, op: Op) -> (Status, Vec<u8>) {
        let mut out = Results::default();
        self.execute(&[op], &mut out);
        (out.status(0), out.data(0).to_vec())
    }

    /// Convenience single-operation calls (they allocate; batches are the fast path).
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, OpError> {
        match self.one(Op::get(key)) {
            (Status::Ok, v) => Ok(Some(v)),
            (Status::NotFound, _) => Ok(None),
            (Status::Error(e), _) => Err(e),
            (s, _) => unreachable!("get returned {s:?}"),
        }
    }

    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), OpError> {
        match self.one(Op::put(key, value)).0 {
            Status::Error(e) => Err(e),
            _ => Ok(()),
        }
    }

    pub fn delete(&mut self, key: &[u8]) -> Result<bool, OpError> {
        match self.one(Op::delete(key)).0 {
            Status::Ok => Ok(true),
            Status::NotFound => Ok(false),
            Status::Error(e) => Err(e),
            s => unreachable!("delete returned {s:?}"),
        }
    }

    /// Atomic `v = fn(v, delta)`; returns the original value.
    pub fn update(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemType,
        delta: &[u8],
    ) -> Result<Vec<u8>, OpError> {
        match self.one(Op::update_s2s(key, func, elem, delta)) {
            (Status::Ok, v) => Ok(v),
            (Status::Error(e), _) => Err(e),
            (s, _) => unreachable!("update returned {s:?}"),
        }
    }

    /// Starts a snapshot (`crate::snapshot`): records the point (`now`, `cas_next`) whose
    /// store [`Engine::snapshot_step`] then emits, whatever the batches executed in between
    /// do. Refused while one is being taken.
    pub fn snapshot_begin(&mut self) -> Result<SnapPoint, SnapshotBusy> {
        if self.table.snap_state().is_some() {
            return Err(SnapshotBusy);
        }
        let point = SnapPoint {
            now: self.now,
            cas_next: self.cas_next,
        };
        let buckets = self.table.bucket_count();
        self.table
            .snap_install(Box::new(SnapState::new(point, buckets)));
        Ok(point)
    }

    /// Emits to `sink` the entries copied since the last step, then the live entries (at the
    /// point) of up to `budget_buckets` more main buckets with their chains. Returns true when
    /// the image is complete; the snapshot is then over and its memory freed. Without a
    /// snapshot, returns true and emits nothing. Call it between batches.
    pub fn snapshot_step(
        &mut self,
        budget_buckets: u64,
        sink: &mut impl FnMut(SnapEntry<'_>),
    ) -> bool {
        let Some(mut s) = self.table.snap_take() else {
            return true;
        };
        if s.step(&self.table, budget_buckets, sink) {
            return true;
        }
        self.table.snap_install(s);
        false
    }

    /// Drops the snapshot being taken, if any, and its memory. Returns whether one was.
    pub fn snapshot_abort(&mut self) -> bool {
        self.table.snap_take().is_some()
    }

    /// Where the snapshot being taken stands (`None`: none is).
    pub fn snapshot_progress(&self) -> Option<SnapProgress> {
        self.table.snap_state().map(SnapState::progress)
    }

    /// Stores `entries` (an image's, for recovery) without the pipeline's per-operation
    /// work: checked against the limits, left out when expired at `now` (set it first),
    /// replacing keys already present; a key with `cas != 0` keeps its item meta. Use it
    /// before serving: it bypasses eviction and the batch machinery, and its writes are
    /// not operations (no stats, no reclaimed keys). On an error the entries before the
    /// failing one (whose index is returned) are stored.
    pub fn load_entries(
        &mut self,
        entries: &[SnapEntry<'_>],
    ) -> Result<LoadCounts, (usize, OpError)> {
        crate::snapshot::load_entries(
            &mut self.table,
            &mut self.access,
            &self.limits,
            self.now,
            entries,
        )
    }
}

/// The keys of a length-prefixed list (`Engine::reclaimed`).
fn keys_of(list: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let n = usize::from(*list.get(at)?);
        let key = &list[at + 1..at + 1 + n];
        at += 1 + n;
        Some(key)
    })
}
