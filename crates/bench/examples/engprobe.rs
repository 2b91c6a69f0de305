// Scratch experiment: engine GET throughput with pre-built ops, no bench overhead.
use directkv_engine::*;
use std::time::Instant;
fn main() {
    let mem: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse::<usize>().unwrap() << 20)
        .unwrap_or(256 << 20);
    let mut cfg = EngineConfig::with_memory(mem);
    cfg.expected_kv_bytes = 10;
    cfg.prefault = true;
    cfg.window = std::env::args()
        .nth(4)
        .map(|s| s.parse().unwrap())
        .unwrap_or(256);
    let mut e = Engine::new(cfg).unwrap();
    let n: u64 = std::env::args()
        .nth(3)
        .map(|s| s.parse().unwrap())
        .unwrap_or((mem / 20) as u64);
    let keys: Vec<[u8; 6]> = (0..n)
        .map(|i| {
            let b = i.to_le_bytes();
            [b[0], b[1], b[2], b[3], b[4], b[5]]
        })
        .collect();
    let mut out = Results::with_capacity(1024, 1 << 20);
    for c in keys.chunks(1024) {
        let ops: Vec<Op> = c.iter().map(|k| Op::put(k, b"vvvv")).collect();
        e.execute(&ops, &mut out);
    }
    let mut x = 12345u64;
    let nops: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(4_000_000);
    let idx: Vec<usize> = (0..nops)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as usize
        })
        .collect();
    let ks: Vec<[u8; 6]> = idx.iter().map(|&i| keys[i]).collect();
    let ops: Vec<Op> = ks.iter().map(|k| Op::get(k)).collect();
    for _ in 0..3 {
        let t = Instant::now();
        for c in ops.chunks(1024) {
            e.execute(c, &mut out);
        }
        println!(
            "{:.1} M/s",
            ops.len() as f64 / t.elapsed().as_secs_f64() / 1e6
        );
    }
}
