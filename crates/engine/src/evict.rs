//! Eviction (issue 20 item 2): which keys go when the slab region runs short, under Redis's
//! `maxmemory-policy` names.
//!
//! ```text
//!  use of a key      a GET hit, a lookup of any operation that finds it: sets the reference
//!                    bit of its MAIN bucket (metadata bit 110, `index/bucket.rs`), writing
//!                    the line only when the bit is clear: no byte per key. A new key leaves
//!                    the bit as it is: a key written and never read again goes at the hand's
//!                    next visit, and a run of new keys cannot set every bit (then one turn
//!                    of the hand would clear them all, hot ones included, and the next evict
//!                    whatever comes first)
//!
//!  the hand          a cursor over the main buckets (CLOCK, second chance):
//!    *-lru             bit set   -> clear it, move on
//!                      bit clear -> evict the chain's keys (volatile-lru: those with a
//!                                   deadline), move on
//!    *-random          a main bucket drawn by the engine's seeded PRNG; its chain's keys
//!    volatile-ttl      the key with the nearest deadline among the next TTL_SAMPLE_KEYS
//!                      keys with a deadline from the hand (Redis samples 5)
//!
//!  when              before a batch (`Engine::execute`, `check_atomic`): the blocks its
//!                    writes may take (`atomic::write_blocks`, the all-or-nothing bound),
//!                    plus the watermark, must be free: else evict, then a trial allocation
//!                    proves they are, so a write never sees out-of-memory while anything is
//!                    evictable; and after a batch (`Engine::evict_ahead`, the server calls it
//!                    at its door) up to EVICT_AHEAD_KEYS_MAX keys while free slab bytes are
//!                    below the watermark (`eviction_watermark` x arena bytes)
//! ```
//!
//! Why a bit per bucket: an exact LRU costs two pointers per key (16 bytes, as much as a small
//! key-value), Redis's sampled LRU a 24-bit clock per object. A main bucket's keys are used
//! together in that one bit: a cold key next to a hot one survives, and a bucket is evicted
//! whole (1 to 3 small keys, or up to 10 records, with their chain), which is what frees whole
//! chained buckets. BENCHMARKS.md ("Eviction hit ratio") compares it with an exact LRU.
//!
//! Determinism: what is evicted depends only on the operations, `now` and the configuration
//! (policy, watermark, the PRNG's fixed seed); eviction runs only between batches, so no key an
//! operation of a batch is working on (in the reservation station) can go mid-batch.
//! Evicted keys count in `Stats::evicted_keys`; an expired key the hand meets counts as expired.
//!
//! Non-goals: LFU (`allkeys-lfu`, `volatile-lfu` are refused); a limit below the arena
//! (`maxmemory` is the arena size); evicting the inline keys of main buckets to make room in
//! them (they take no slab memory: a bucket without room takes a chained bucket, which the
//! slab's free memory provides).

use crate::config::Limits;
use crate::index::record::NO_DEADLINE;
use crate::index::{Access, Table};
use crate::op::Op;
use crate::slab::{class_size_bytes, CLASS_COUNT_MAX};
use crate::stats::Stats;

/// Default `eviction_watermark`: the share of the arena's bytes kept free in the slab region
/// once eviction has started (1%: about 10 MiB of a 1 GiB shard).
pub const EVICTION_WATERMARK_DEFAULT: f64 = 0.01;
/// Largest `eviction_watermark`; at most half the slab region is kept free, whatever it says.
pub const EVICTION_WATERMARK_MAX: f64 = 0.5;
/// Keys `Engine::evict_ahead` evicts at most per call (between two batches).
pub const EVICT_AHEAD_KEYS_MAX: u64 = 256;
/// Keys with a deadline volatile-ttl compares before it evicts the nearest.
const TTL_SAMPLE_KEYS: usize = 16;
/// Random main buckets the random policies draw before they walk from the hand (a sparse
/// table, or few keys with a deadline).
const RANDOM_TRIES: usize = 32;
/// Seed of the random policies' PRNG: fixed, so that eviction is deterministic.
const EVICTION_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// Redis's `maxmemory-policy`, without LFU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvictionPolicy {
    /// Writes that do not fit fail with out-of-memory (Redis's default).
    #[default]
    NoEviction,
    AllKeysLru,
    AllKeysRandom,
    VolatileLru,
    VolatileTtl,
    VolatileRandom,
}

impl EvictionPolicy {
    pub const ALL: [EvictionPolicy; 6] = [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileTtl,
        EvictionPolicy::VolatileRandom,
    ];

    /// Redis's name.
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
            EvictionPolicy::VolatileRandom => "volatile-random",
        }
    }

    /// The policy of a Redis name, in any case (as CONFIG SET takes it).
    pub fn from_name(name: &str) -> Option<EvictionPolicy> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    /// Only keys with a deadline may be evicted.
    pub fn volatile(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileTtl
                | EvictionPolicy::VolatileRandom
        )
    }
}

/// An engine's eviction state: the policy, the hand, the PRNG and scratch space.
pub(crate) struct Evictor {
    pub(crate) policy: EvictionPolicy,
    /// Free slab bytes to keep (the watermark as bytes, at most half the slab region).
    watermark_bytes: u64,
    /// Next main bucket the hand looks at.
    hand: u64,
    /// xorshift64* state of the random policies.
    rng: u64,
    /// Keys to evict, length-prefixed (scratch, reused).
    keys: Vec<u8>,
    /// Keys evicted since the engine last took them (`Engine::reclaimed_keys` reports them
    /// with the expired ones: WATCH, and later a log of writes, must see every removal).
    pub(crate) evicted: Vec<u8>,
}

impl Evictor {
    pub(crate) fn new(policy: EvictionPolicy, watermark: f64, arena: u64, slab: u64) -> Evictor {
        let share = watermark.clamp(0.0, EVICTION_WATERMARK_MAX);
        Evictor {
            policy,
            watermark_bytes: ((arena as f64 * share) as u64).min(slab / 2),
            hand: 0,
            rng: EVICTION_SEED,
            keys: Vec::new(),
            evicted: Vec::new(),
        }
    }

    /// Back to the state `new` gave it (hand at bucket 0, the PRNG at its seed), keeping the
    /// policy and the watermark: `Engine::clear`, so that a cleared engine evicts as a new one.
    pub(crate) fn reset(&mut self) {
        self.hand = 0;
        self.rng = EVICTION_SEED;
        self.keys.clear();
        self.evicted.clear();
    }

    pub(crate) fn watermark_bytes(&self) -> u64 {
        self.watermark_bytes
    }

    /// Whether the policy finds anything to evict in `table`.
    fn can_evict(&self, table: &Table) -> bool {
        match self.policy {
            EvictionPolicy::NoEviction => false,
            p if p.volatile() => table.counts().expiring_keys > 0,
            _ => table.counts().keys > 0,
        }
    }

    /// Frees what the writes of `ops` may allocate, plus the watermark, when less is free:
    /// evicts, then proves with a trial allocation (`taken` is its scratch) that the blocks
    /// are there, evicting more while they are not. Stops when nothing is left to evict; the
    /// writes that then do not fit fail with out-of-memory, as without eviction.
    pub(crate) fn make_room(
        &mut self,
        table: &mut Table,
        limits: &Limits,
        stats: &mut Stats,
        now: u64,
        ops: &[Op],
        taken: &mut Vec<(u32, u8)>,
    ) {
        if self.policy == EvictionPolicy::NoEviction {
            return;
        }
        let mut need = [0u32; CLASS_COUNT_MAX];
        let mut acc = Access::default();
        for op in ops {
            // GETs take no blocks: skipped here, without the call, because every batch comes
            // this way under a policy (a GET-only batch paid 37 instructions per GET in the
            // call, callgrind; one test of the kind costs a PUT less than `OpKind::writes`).
            if op.kind == crate::op::OpKind::Get {
                continue;
            }
            // An operation over a limit fails on its own in the pipeline, taking nothing.
            let _ = crate::atomic::write_blocks(table, limits, op, &mut acc, &mut need);
        }
        let need_bytes: u64 = need
            .iter()
            .enumerate()
            .map(|(c, &n)| u64::from(n) * class_size_bytes(c as u8) as u64)
            .sum();
        if need_bytes == 0 {
            return;
        }
        let mut target = need_bytes + self.watermark_bytes;
        // The common case near the watermark: enough free bytes that the blocks are there
        // (the watermark is the margin for blocks split too small), no trial.
        if table.slab().free_bytes() >= target {
            return;
        }
        loop {
            while table.slab().free_bytes() < target {
                if self.evict_unit(table, stats, now) == 0 {
                    return;
                }
            }
            if table.trial_alloc(&need, taken) {
                return;
            }
            // Enough bytes, but not in blocks large enough: free more, so buddies merge.
            target += need_bytes + self.watermark_bytes;
        }
    }

    /// Between batches: while the slab's free bytes are below the watermark, evicts up to
    /// `keys_max` keys (it stops at twice the watermark). Returns the keys evicted.
    pub(crate) fn evict_ahead(
        &mut self,
        table: &mut Table,
        stats: &mut Stats,
        now: u64,
        keys_max: u64,
    ) -> u64 {
        if self.policy == EvictionPolicy::NoEviction
            || table.slab().free_bytes() >= self.watermark_bytes
        {
            return 0;
        }
        let mut removed = 0;
        while removed < keys_max && table.slab().free_bytes() < 2 * self.watermark_bytes {
            let n = self.evict_unit(table, stats, now);
            if n == 0 {
                break;
            }
            removed += n;
        }
        removed
    }

    /// Evicts one unit of the policy (a main bucket's chain, or one key for volatile-ttl).
    /// Returns the keys removed: 0 when nothing is evictable.
    pub(crate) fn evict_unit(&mut self, table: &mut Table, stats: &mut Stats, now: u64) -> u64 {
        if !self.can_evict(table) {
            return 0;
        }
        match self.policy {
            EvictionPolicy::NoEviction => 0,
            EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => {
                self.clock(table, stats, now)
            }
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom => {
                self.random(table, stats, now)
            }
            EvictionPolicy::VolatileTtl => self.nearest_deadline(table, stats, now),
        }
    }

    /// The hand's next main bucket.
    fn advance(&mut self, n: u64) -> u64 {
        let i = self.hand;
        self.hand = if i + 1 >= n { 0 } else { i + 1 };
        i
    }

    /// CLOCK: the first main bucket from the hand whose reference bit is clear and whose chain
    /// holds a candidate; the bits it passes are cleared. Two turns at most: the first clears
    /// every bit.
    fn clock(&mut self, table: &mut Table, stats: &mut Stats, now: u64) -> u64 {
        let n = table.bucket_count();
        for _ in 0..2 * n + 1 {
            let i = self.advance(n);
            if table.main_vacant(i) {
                continue;
            }
            if table.referenced(i) {
                table.clear_referenced(i);
                continue;
            }
            let removed = self.evict_chain(table, stats, now, i);
            if removed > 0 {
                return removed;
            }
        }
        0
    }

    /// A main bucket drawn at random, and its chain's candidates; after RANDOM_TRIES empty
    /// draws, the first chain with candidates from the hand.
    fn random(&mut self, table: &mut Table, stats: &mut Stats, now: u64) -> u64 {
        let n = table.bucket_count();
        for _ in 0..RANDOM_TRIES {
            // xorshift64*: the top 32 bits, scaled onto the buckets.
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
            let i = (r * n) >> 32;
            if table.main_vacant(i) {
                continue;
            }
            let removed = self.evict_chain(table, stats, now, i);
            if removed > 0 {
                return removed;
            }
        }
        for _ in 0..n {
            let i = self.advance(n);
            if !table.main_vacant(i) {
                let removed = self.evict_chain(table, stats, now, i);
                if removed > 0 {
                    return removed;
                }
            }
        }
        0
    }

    /// volatile-ttl: of the next TTL_SAMPLE_KEYS keys with a deadline from the hand, the one
    /// whose deadline is nearest.
    fn nearest_deadline(&mut self, table: &mut Table, stats: &mut Stats, now: u64) -> u64 {
        let n = table.bucket_count();
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        let mut best = NO_DEADLINE;
        let mut seen = 0usize;
        for _ in 0..n {
            let i = self.advance(n);
            if table.main_vacant(i) {
                continue;
            }
            table.scan(i, 1, |k, _, d| {
                if d != NO_DEADLINE {
                    seen += 1;
                    if keys.is_empty() || d < best {
                        best = d;
                        keys.clear();
                        keys.push(k.len() as u8);
                        keys.extend_from_slice(k);
                    }
                }
            });
            if seen >= TTL_SAMPLE_KEYS {
                break;
            }
        }
        let removed = evict_keys(table, stats, now, &keys, &mut self.evicted);
        self.keys = keys;
        removed
    }

    /// Evicts the candidates of main bucket `i`'s chain: every key, or under a volatile
    /// policy those with a deadline. Returns how many.
    fn evict_chain(&mut self, table: &mut Table, stats: &mut Stats, now: u64, i: u64) -> u64 {
        let volatile = self.policy.volatile();
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        table.scan(i, 1, |k, _, d| {
            if !volatile || d != NO_DEADLINE {
                keys.push(k.len() as u8);
                keys.extend_from_slice(k);
            }
        });
        let removed = evict_keys(table, stats, now, &keys, &mut self.evicted);
        self.keys = keys;
        removed
    }
}

/// Removes the length-prefixed `keys`, with their records and emptied chained buckets; a key
/// whose deadline has passed counts as expired, the others as evicted. Appends the removed
/// keys, length-prefixed, to `out`. Returns how many.
fn evict_keys(
    table: &mut Table,
    stats: &mut Stats,
    now: u64,
    keys: &[u8],
    out: &mut Vec<u8>,
) -> u64 {
    let mut acc = Access::default();
    let mut removed = 0u64;
    let mut at = 0usize;
    while at < keys.len() {
        let n = usize::from(keys[at]);
        let key = &keys[at + 1..at + 1 + n];
        at += 1 + n;
        acc.clear();
        let h = crate::hash::key_hash(key);
        if let Some(loc) = table.lookup(key, h, &mut acc) {
            let d = loc.deadline();
            table.remove(&loc, &mut acc);
            out.push(n as u8);
            out.extend_from_slice(key);
            if crate::expiry::expired(d, now) {
                stats.note_expired(now - d);
            } else {
                stats.evicted_keys += 1;
            }
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_are_redis_names() {
        for p in EvictionPolicy::ALL {
            assert_eq!(EvictionPolicy::from_name(p.name()), Some(p));
            assert_eq!(EvictionPolicy::from_name(&p.name().to_uppercase()), Some(p));
        }
        assert_eq!(EvictionPolicy::from_name("allkeys-lfu"), None);
        assert_eq!(EvictionPolicy::from_name(""), None);
        assert_eq!(EvictionPolicy::default().name(), "noeviction");
        assert!(EvictionPolicy::VolatileTtl.volatile() && !EvictionPolicy::AllKeysLru.volatile());
    }

    #[test]
    fn watermark_is_capped_at_half_the_slab() {
        let e = Evictor::new(EvictionPolicy::AllKeysLru, 0.01, 1 << 30, 600 << 20);
        assert_eq!(e.watermark_bytes(), (1u64 << 30) / 100);
        let e = Evictor::new(EvictionPolicy::AllKeysLru, 0.9, 1 << 30, 600 << 20);
        assert_eq!(e.watermark_bytes(), 300 << 20);
    }
}
