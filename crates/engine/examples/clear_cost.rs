//! What emptying an engine costs: `Engine::clear` (in place) against building a new engine
//! and dropping the old one (what FLUSHALL did before), on an empty engine and on one holding
//! 1 M keys of 8 + 8 bytes, 1 GiB arena each. A measurement, not a test: run it with
//! `cargo run --profile ci -p directkv-engine --example clear_cost` (BENCHMARKS.md, "FLUSHALL
//! in place"); figures depend on the machine and on how busy it is.

use std::time::Instant;

use directkv_engine::{Engine, EngineConfig, Op, Results};

const MEMORY_BYTES: usize = 1 << 30;
const KEYS: u64 = 1_000_000;
const ROUNDS: usize = 5;

fn fill(e: &mut Engine) {
    let mut out = Results::default();
    let keys: Vec<[u8; 8]> = (0..KEYS).map(|i| i.to_le_bytes()).collect();
    for chunk in keys.chunks(256) {
        let ops: Vec<Op> = chunk.iter().map(|k| Op::put(k, k)).collect();
        e.execute(&ops, &mut out);
    }
    assert!(e.counts().keys >= KEYS);
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let cfg = EngineConfig::with_memory(MEMORY_BYTES);
    let mut e = Engine::new(cfg.clone()).unwrap();
    println!(
        "arena {} MiB, index {} MiB",
        MEMORY_BYTES >> 20,
        e.report().index_bytes >> 20
    );
    for round in 0..ROUNDS {
        let t = Instant::now();
        e.clear();
        let clear_empty = ms(t);
        let t = Instant::now();
        e = Engine::new(cfg.clone()).unwrap();
        let new_empty = ms(t);
        fill(&mut e);
        let t = Instant::now();
        e.clear();
        let clear_full = ms(t);
        let t = Instant::now();
        e.put(b"one", b"key").unwrap();
        let first_put = ms(t);
        fill(&mut e);
        let t = Instant::now();
        e = Engine::new(cfg.clone()).unwrap();
        let new_full = ms(t);
        println!(
            "round {round}: clear empty {clear_empty:.3} ms, full {clear_full:.3} ms (first put after: {first_put:.3} ms); new engine + drop: empty {new_empty:.3} ms, full {new_full:.3} ms"
        );
    }
}
