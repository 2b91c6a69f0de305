// Scratch experiment: prefetch-ring lookups over an arena, to find the pipeline's overhead.
use std::time::Instant;
fn main() {
    let bytes: usize = 256 << 20;
    let a = directkv_engine::arena::Arena::new(bytes).unwrap();
    let mut a = a;
    a.prefault();
    let lines = (bytes / 64) as u64;
    let n = 20_000_000u64;
    let keys: Vec<[u8; 6]> = (0..n)
        .map(|i| {
            let b = i.to_le_bytes();
            [b[0], b[1], b[2], b[3], b[4], b[5]]
        })
        .collect();
    for w in [1usize, 8, 16, 32, 64, 256] {
        let mut ring = vec![0usize; w];
        let t = Instant::now();
        let mut sum = 0u64;
        for i in 0..(n as usize + w) {
            if i >= w {
                let off = ring[i % w];
                sum = sum.wrapping_add(a.slice(off + 50, 8)[0] as u64);
            }
            if i < n as usize {
                let h = xxhash_rust::xxh3::xxh3_64(&keys[i]);
                let off = (((h & 0xffff_ffff) * lines) >> 32) as usize * 64;
                a.prefetch(off);
                ring[i % w] = off;
            }
        }
        let dt = t.elapsed().as_secs_f64();
        println!("w={w} {:.1} M/s sum {sum}", n as f64 / dt / 1e6);
    }
}
