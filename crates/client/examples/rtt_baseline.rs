//! Baseline for `throughput`: the same GET batches written with the protocol codec on a plain
//! blocking socket (no client, no runtime), to see what the client itself costs.
//!
//! Usage: `rtt_baseline ADDR [depth] [seconds] [keys]` against a 1-shard server that
//! `throughput` has loaded (keys are u64 LE 0..keys).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use directkv_proto::native::{decode_response, NativeLimits, NativeOp, RequestEncoder, Response};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).map_or("127.0.0.1:7070", String::as_str);
    let depth: usize = args.get(2).map_or(64, |s| s.parse().expect("depth"));
    let seconds: f64 = args.get(3).map_or(5.0, |s| s.parse().expect("seconds"));
    let keys: u64 = args.get(4).map_or(100_000, |s| s.parse().expect("keys"));
    let limits = NativeLimits::DEFAULT;
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let (mut next, mut ops, mut id) = (0u64, 0u64, 0u32);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(seconds) {
        out.clear();
        id = id.wrapping_add(1);
        let mut enc = RequestEncoder::begin(&mut out, id, &limits);
        for _ in 0..depth {
            next = (next + 7919) % keys;
            enc.push(&NativeOp::get(&next.to_le_bytes())).unwrap();
        }
        enc.finish();
        s.write_all(&out).unwrap();
        let mut have = 0;
        loop {
            let n = s.read(&mut buf[have..]).unwrap();
            assert!(n > 0, "closed");
            have += n;
            if let Some((f, _)) = decode_response(&buf[..have], &limits).unwrap() {
                assert!(matches!(f.body, Response::Ops(b) if b.len() == depth));
                break;
            }
        }
        ops += depth as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "baseline op=get depth={depth} ops={ops} seconds={secs:.2} ops_per_sec={:.0}",
        ops as f64 / secs
    );
}
