//! Closed-loop throughput of one client on one core: batches of `depth` operations on
//! `keys` 8-byte keys with 8-byte values, for `seconds`.
//!
//! Usage: `throughput ADDR [get|put|add] [depth] [seconds] [keys]`
//! (for figures: server and client pinned to different cores, see BENCHMARKS.md).

use std::time::{Duration, Instant};

use directkv_client::{BlockingClient, ClientConfig, Replies};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).map_or("127.0.0.1:7070", String::as_str);
    let op = args.get(2).map_or("get", String::as_str);
    let depth: usize = args.get(3).map_or(64, |s| s.parse().expect("depth"));
    let seconds: f64 = args.get(4).map_or(5.0, |s| s.parse().expect("seconds"));
    let keys: u64 = args.get(5).map_or(100_000, |s| s.parse().expect("keys"));
    let mut c = BlockingClient::connect(addr, ClientConfig::default()).expect("connect");
    let mut replies = Replies::new();
    for chunk in (0..keys).collect::<Vec<_>>().chunks(1024) {
        let mut b = c.batch();
        for &k in chunk {
            b.put(&k.to_le_bytes(), &k.to_le_bytes());
        }
        b.execute_into(&mut replies).expect("load");
    }
    let mut next = 0u64;
    let mut ops = 0u64;
    let mut not_ok = 0u64;
    let start = Instant::now();
    let run_for = Duration::from_secs_f64(seconds);
    while start.elapsed() < run_for {
        let mut b = c.batch();
        for _ in 0..depth {
            // A fixed odd stride walks every key in a scrambled order.
            next = (next + 7919) % keys;
            let k = next.to_le_bytes();
            match op {
                "put" => b.put(&k, &k),
                "add" => b.add_u64(&k, 1),
                _ => b.get(&k),
            };
        }
        b.execute_into(&mut replies).expect("batch");
        not_ok += replies.iter().filter(|r| !r.is_ok()).count() as u64;
        ops += depth as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "op={op} depth={depth} ops={ops} not_ok={not_ok} seconds={secs:.2} ops_per_sec={:.0}",
        ops as f64 / secs
    );
}
