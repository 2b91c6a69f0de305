// Scratch experiment: prefetch-ring lookups over an arena with extra work per op.
use std::time::Instant;
fn main() {
    let mb: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(256);
    let work: u64 = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0);
    let bytes = mb << 20;
    let mut a = directkv_engine::arena::Arena::new(bytes).unwrap();
    a.prefault();
    let lines = (bytes / 64) as u64;
    let n = 10_000_000u64;
    let keys: Vec<[u8; 6]> = (0..n)
        .map(|i| {
            let b = i.wrapping_mul(0x9E3779B97F4A7C15).to_le_bytes();
            [b[0], b[1], b[2], b[3], b[4], b[5]]
        })
        .collect();
    for w in [64usize, 256] {
        let mut hs = vec![0usize; w];
        let t = Instant::now();
        let mut sum = 0u64;
        for c in keys.chunks(w) {
            for (j, k) in c.iter().enumerate() {
                let h = xxhash_rust::xxh3::xxh3_64(k);
                let off = (((h & 0xffff_ffff) * lines) >> 32) as usize * 64;
                a.prefetch(off);
                hs[j] = off;
            }
            for j in 0..c.len() {
                sum = sum.wrapping_add(a.slice(hs[j] + 50, 8)[0] as u64);
                let mut x = sum | 1;
                for _ in 0..work {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                sum = sum.wrapping_add(x & 1);
            }
        }
        println!(
            "batch mb={mb} work={work} w={w} {:.1} M/s sum {sum}",
            n as f64 / t.elapsed().as_secs_f64() / 1e6
        );
    }
    for w in [1usize, 16, 64, 256] {
        for pf in [false, true] {
            let mut ring = vec![0usize; w];
            let t = Instant::now();
            let mut sum = 0u64;
            for i in 0..(n as usize + w) {
                if i >= w {
                    let off = ring[i % w];
                    sum = sum.wrapping_add(a.slice(off + 50, 8)[0] as u64);
                    let mut x = sum | 1;
                    for _ in 0..work {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    sum = sum.wrapping_add(x & 1);
                }
                if i < n as usize {
                    let h = xxhash_rust::xxh3::xxh3_64(&keys[i]);
                    let off = (((h & 0xffff_ffff) * lines) >> 32) as usize * 64;
                    if pf {
                        a.prefetch(off);
                    }
                    ring[i % w] = off;
                }
            }
            let dt = t.elapsed().as_secs_f64();
            println!(
                "mb={mb} work={work} w={w} pf={pf} {:.1} M/s sum {sum}",
                n as f64 / dt / 1e6
            );
        }
    }
}
