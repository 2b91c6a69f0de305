//! Eviction hit ratio (issue 20 item 2): the engine under an eviction policy against an exact
//! LRU of the same capacity, fed the same key trace. A hit ratio is not a timing, so a shared,
//! noisy machine does not change it: the run is deterministic given its arguments.
//!
//! ```text
//!  1. capacity  a fresh engine under noeviction takes distinct keys until the first
//!               out-of-memory: C keys of this size fit (the arena's bytes usable by keys)
//!  2. trace     Zipf(theta) over N = data_factor x C keys, `requests` draws, fixed seed
//!  3. engine    under the policy, per batch: GET every key; SET the missed ones
//!  4. exact LRU of C keys, the same batches: GETs first (a hit moves to the front), then
//!               the misses are inserted at the front, the least recently used dropping out
//!  5. report    hit ratios after the warm-up (the first `warmup` requests), OOM replies,
//!               evicted keys
//! ```
//!
//! Non-goals: timing (`bench engine` measures speed); policies other than the engine's.

use std::collections::HashMap;

use directkv_engine::{Engine, EngineConfig, EvictionPolicy, Op, OpError, Results, Status};

use crate::dist::{Distribution, KeyGen};

/// What to run.
#[derive(Debug, Clone)]
pub struct EvictArgs {
    /// Arena bytes of the engine.
    pub memory: usize,
    pub key_bytes: usize,
    pub value_bytes: usize,
    /// Keys in the trace's key space, as a multiple of those that fit.
    pub data_factor: f64,
    pub theta: f64,
    /// Requests in the trace, warm-up included.
    pub requests: u64,
    /// Requests before hits are counted.
    pub warmup: u64,
    /// Requests per engine batch.
    pub batch: usize,
    pub policy: EvictionPolicy,
    pub seed: u64,
}

impl Default for EvictArgs {
    fn default() -> Self {
        EvictArgs {
            memory: 64 << 20,
            key_bytes: 16,
            value_bytes: 100,
            data_factor: 2.0,
            theta: 0.99,
            requests: 10_000_000,
            warmup: 2_000_000,
            batch: 16,
            policy: EvictionPolicy::AllKeysLru,
            seed: 42,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EvictReport {
    pub policy: String,
    /// Keys that fit (step 1), the exact LRU's capacity.
    pub capacity_keys: u64,
    pub key_space: u64,
    pub counted_requests: u64,
    pub engine_hit_ratio: f64,
    pub exact_lru_hit_ratio: f64,
    pub out_of_memory: u64,
    pub evicted_keys: u64,
}

fn key_of(i: u64, key_bytes: usize, out: &mut Vec<u8>) {
    out.clear();
    let digits = format!("{i:020}");
    out.extend(std::iter::repeat_n(b'k', key_bytes.saturating_sub(20)));
    out.extend_from_slice(&digits.as_bytes()[20usize.saturating_sub(key_bytes)..]);
}

fn engine(a: &EvictArgs, policy: EvictionPolicy) -> Engine {
    let mut cfg = EngineConfig::with_memory(a.memory);
    cfg.expected_kv_bytes = a.key_bytes + a.value_bytes;
    cfg.value_len_max = a.value_bytes.max(1024);
    cfg.eviction_policy = policy;
    Engine::new(cfg).expect("engine")
}

/// Step 1: distinct keys a fresh engine takes before its first out-of-memory.
pub fn capacity_keys(a: &EvictArgs) -> u64 {
    let mut e = engine(a, EvictionPolicy::NoEviction);
    let value = vec![b'v'; a.value_bytes];
    let mut key = Vec::new();
    let mut n = 0u64;
    loop {
        key_of(n, a.key_bytes, &mut key);
        match e.put(&key, &value) {
            Ok(()) => n += 1,
            Err(OpError::OutOfMemory) => return n,
            Err(err) => panic!("put: {err}"),
        }
    }
}

/// An exact LRU over key indices `0..n` holding at most `cap` of them: a doubly linked list
/// in two arrays, most recent at the head.
struct ExactLru {
    prev: Vec<u32>,
    next: Vec<u32>,
    present: Vec<bool>,
    head: u32,
    tail: u32,
    len: u64,
    cap: u64,
}

const NIL: u32 = u32::MAX;

impl ExactLru {
    fn new(n: u64, cap: u64) -> ExactLru {
        ExactLru {
            prev: vec![NIL; n as usize],
            next: vec![NIL; n as usize],
            present: vec![false; n as usize],
            head: NIL,
            tail: NIL,
            len: 0,
            cap,
        }
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
    }

    fn push_front(&mut self, i: u32) {
        self.prev[i as usize] = NIL;
        self.next[i as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// A GET: whether `i` is held (and it becomes the most recent).
    fn get(&mut self, i: u32) -> bool {
        if !self.present[i as usize] {
            return false;
        }
        self.unlink(i);
        self.push_front(i);
        true
    }

    /// A SET of `i`: held as the most recent, the least recent dropping out past capacity.
    fn set(&mut self, i: u32) {
        if self.get(i) {
            return;
        }
        self.present[i as usize] = true;
        self.push_front(i);
        self.len += 1;
        if self.len > self.cap {
            let t = self.tail;
            self.unlink(t);
            self.present[t as usize] = false;
            self.len -= 1;
        }
    }
}

/// Runs the comparison (steps 1 to 5).
pub fn run(a: &EvictArgs) -> EvictReport {
    assert!(a.batch >= 1 && a.key_bytes >= 1 && a.value_bytes >= 1);
    let cap = capacity_keys(a);
    let n = ((cap as f64 * a.data_factor) as u64).max(1);
    assert!(
        n < u64::from(NIL),
        "key space too large for the LRU's arrays"
    );
    let mut keys = KeyGen::new(Distribution::Zipf { theta: a.theta }, n, a.seed);
    let mut e = engine(a, a.policy);
    let mut lru = ExactLru::new(n, cap);
    let value = vec![b'v'; a.value_bytes];
    let mut idx = vec![0u64; a.batch];
    // Key bytes of index i, made once per index on first use.
    let mut names: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut out = Results::default();
    let (mut engine_hits, mut lru_hits, mut counted, mut oom) = (0u64, 0u64, 0u64, 0u64);
    let mut done = 0u64;
    let mut missed: Vec<u64> = Vec::with_capacity(a.batch);
    while done < a.requests {
        let len = (a.requests - done).min(a.batch as u64) as usize;
        keys.fill(&mut idx[..len]);
        for &i in &idx[..len] {
            names.entry(i).or_insert_with(|| {
                let mut k = Vec::new();
                key_of(i, a.key_bytes, &mut k);
                k
            });
        }
        let count = done >= a.warmup;
        let gets: Vec<Op> = idx[..len].iter().map(|i| Op::get(&names[i])).collect();
        e.execute(&gets, &mut out);
        missed.clear();
        for (p, &i) in idx[..len].iter().enumerate() {
            match out.status(p) {
                Status::Ok => engine_hits += u64::from(count),
                Status::NotFound => missed.push(i),
                s => panic!("get: {s:?}"),
            }
        }
        let sets: Vec<Op> = missed.iter().map(|i| Op::put(&names[i], &value)).collect();
        e.execute(&sets, &mut out);
        for p in 0..sets.len() {
            match out.status(p) {
                Status::Ok => {}
                Status::Error(OpError::OutOfMemory) => oom += 1,
                s => panic!("set: {s:?}"),
            }
        }
        // Between batches, as the server does after each.
        e.evict_ahead(directkv_engine::evict::EVICT_AHEAD_KEYS_MAX);
        // The exact LRU, with the same batch semantics.
        let mut lru_missed = Vec::with_capacity(len);
        for &i in &idx[..len] {
            if lru.get(i as u32) {
                lru_hits += u64::from(count);
            } else {
                lru_missed.push(i as u32);
            }
        }
        for i in lru_missed {
            lru.set(i);
        }
        counted += if count { len as u64 } else { 0 };
        done += len as u64;
    }
    let c = counted.max(1) as f64;
    EvictReport {
        policy: a.policy.name().to_string(),
        capacity_keys: cap,
        key_space: n,
        counted_requests: counted,
        engine_hit_ratio: engine_hits as f64 / c,
        exact_lru_hit_ratio: lru_hits as f64 / c,
        out_of_memory: oom,
        evicted_keys: e.stats().evicted_keys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_lru_drops_the_least_recent() {
        let mut l = ExactLru::new(10, 2);
        l.set(1);
        l.set(2);
        assert!(l.get(1));
        l.set(3);
        assert!(!l.get(2) && l.get(1) && l.get(3));
        assert_eq!(l.len, 2);
    }

    #[test]
    fn a_small_run_has_no_out_of_memory_and_tracks_the_exact_lru() {
        let a = EvictArgs {
            memory: 4 << 20,
            requests: 400_000,
            warmup: 100_000,
            ..EvictArgs::default()
        };
        let r = run(&a);
        assert_eq!(r.out_of_memory, 0);
        assert!(r.evicted_keys > 0);
        assert!(r.exact_lru_hit_ratio > 0.3);
        assert!(
            (r.engine_hit_ratio - r.exact_lru_hit_ratio).abs() < 0.1,
            "{r:?}"
        );
    }
}
