//! `evict-hit-ratio`: the engine's eviction against an exact LRU on one Zipf trace
//! (`directkv_bench::evict`; BENCHMARKS.md, "Eviction hit ratio").
//!
//! ```text
//! cargo run --release -p directkv-bench --bin evict-hit-ratio -- \
//!     [--memory-mib 64] [--key-bytes 16] [--value-bytes 100] [--data-factor 2] \
//!     [--theta 0.99] [--requests 10000000] [--warmup 2000000] [--batch 16] \
//!     [--policy allkeys-lru] [--seed 42]
//! ```

use directkv_bench::evict::{run, EvictArgs};
use directkv_engine::EvictionPolicy;

fn main() {
    let mut a = EvictArgs::default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.len().is_multiple_of(2) {
        fail("arguments come as --name value pairs");
    }
    for pair in args.chunks(2) {
        let (name, v) = (pair[0].as_str(), pair[1].as_str());
        match name {
            "--memory-mib" => a.memory = num::<usize>(name, v) << 20,
            "--key-bytes" => a.key_bytes = num(name, v),
            "--value-bytes" => a.value_bytes = num(name, v),
            "--data-factor" => a.data_factor = num(name, v),
            "--theta" => a.theta = num(name, v),
            "--requests" => a.requests = num(name, v),
            "--warmup" => a.warmup = num(name, v),
            "--batch" => a.batch = num(name, v),
            "--seed" => a.seed = num(name, v),
            "--policy" => {
                a.policy = EvictionPolicy::from_name(v)
                    .unwrap_or_else(|| fail(&format!("unknown policy {v}")))
            }
            _ => fail(&format!("unknown argument {name}")),
        }
    }
    if a.batch == 0 || a.key_bytes == 0 || a.value_bytes == 0 || a.data_factor <= 0.0 {
        fail("batch, key and value bytes and data factor must be positive");
    }
    let r = run(&a);
    println!(
        "{}: {} keys fit, {} in the key space, zipf {}, {} requests counted: hit ratio {:.4} (exact LRU {:.4}), {} out-of-memory, {} evicted",
        r.policy,
        r.capacity_keys,
        r.key_space,
        a.theta,
        r.counted_requests,
        r.engine_hit_ratio,
        r.exact_lru_hit_ratio,
        r.out_of_memory,
        r.evicted_keys
    );
    println!("{}", serde_json::to_string(&r).expect("json"));
}

fn num<T: std::str::FromStr>(name: &str, v: &str) -> T {
    v.parse()
        .unwrap_or_else(|_| fail(&format!("{name}: cannot parse {v}")))
}

fn fail(msg: &str) -> ! {
    eprintln!("evict-hit-ratio: {msg}");
    std::process::exit(2)
}
