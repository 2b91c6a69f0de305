//! What a MULTI/EXEC transaction costs next to the same commands pipelined (issue 20 item 4):
//! rounds of 10 SETs, sent in one write and answered before the next round, by `clients`
//! connections at once, against an in-process server of 4 shards.
//!
//! ```text
//! cargo run --release -p directkv-server --example multi_cost [rounds] [clients]
//! (defaults: 5000 rounds, 1 client)
//! ```
//!
//! Modes, each round one write and its replies read:
//! - `pipeline`: SET x 10, keys on every shard;
//! - `multi-cross`: MULTI, the same 10 SETs, EXEC (a transaction over every shard: the
//!   process-wide lock, the other shards parked for a round trip);
//! - `multi-one`: MULTI, 10 SETs of keys of one shard, EXEC;
//! - `mset-cross`: one MSET of the 10 keys (the atomic plan MULTI reuses).
//!
//! A timing, not a test: nothing is asserted but the replies' count; figures go to
//! BENCHMARKS.md with the machine they ran on.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use directkv_proto::resp::{encode_command, parse_reply, Reply};

const SHARDS: usize = 4;
const KEYS: usize = 10;
/// Times each mode is run, interleaved with the others (the machine may be shared).
const REPS: usize = 5;

fn shard(key: &str) -> usize {
    usize::from(directkv_proto::native::shard_of_hash(
        directkv_engine::key_hash(key.as_bytes()),
        SHARDS as u16,
    ))
}

/// `KEYS` keys of client `c`: spread over every shard, or all on shard 0.
fn keys(c: usize, one_shard: bool) -> Vec<String> {
    (0..)
        .map(|i| format!("c{c}:k{i}"))
        .filter(|k| !one_shard || shard(k) == 0)
        .take(KEYS)
        .collect()
}

/// One round's bytes and its number of replies.
fn round(mode: &str, c: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let keys = keys(c, mode == "multi-one");
    let mut n = 0;
    if mode.starts_with("multi") {
        encode_command(&[b"MULTI"], &mut out);
        n += 1;
    }
    if mode == "mset-cross" {
        let mut args: Vec<&[u8]> = vec![b"MSET"];
        for k in &keys {
            args.push(k.as_bytes());
            args.push(b"value");
        }
        encode_command(&args, &mut out);
        n += 1;
    } else {
        for k in &keys {
            encode_command(&[b"SET", k.as_bytes(), b"value"], &mut out);
            n += 1;
        }
    }
    if mode.starts_with("multi") {
        encode_command(&[b"EXEC"], &mut out);
        n += 1;
    }
    (out, n)
}

/// Runs `rounds` rounds on one connection; returns the seconds taken.
fn client(addr: SocketAddr, mode: &str, c: usize, rounds: usize) -> f64 {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).unwrap();
    let (bytes, replies) = round(mode, c);
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let start = Instant::now();
    for _ in 0..rounds {
        s.write_all(&bytes).unwrap();
        let mut got = 0;
        while got < replies {
            match parse_reply(&buf).expect("a valid reply") {
                Some((r, used)) => {
                    assert!(!matches!(r, Reply::Error(_)), "{mode}: {r:?}");
                    buf.drain(..used);
                    got += 1;
                }
                None => {
                    let n = s.read(&mut chunk).unwrap();
                    assert!(n > 0, "the server closed the connection");
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
    start.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(5_000, |a| a.parse().expect("rounds"));
    let clients: usize = args.next().map_or(1, |a| a.parse().expect("clients"));
    let server = directkv_server::Server::start(directkv_server::ServerConfig {
        port: 0,
        shards: SHARDS,
        memory_bytes: 64 << 20,
        metrics_port: None,
        udp: Some(false),
        ocsm: Some(false),
        appendonly: false,
        ..Default::default()
    })
    .expect("server starts");
    let addr = server.addr();
    println!(
        "{rounds} rounds of {KEYS} SETs per client, {clients} client(s), {SHARDS} shards, \
         modes interleaved {REPS} times: best and median"
    );
    println!(
        "{:<12} {:>12} {:>12} {:>16}",
        "mode", "best us/rnd", "median us/rnd", "best rounds/s"
    );
    let modes = ["pipeline", "multi-cross", "multi-one", "mset-cross"];
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..REPS {
        for (m, mode) in modes.iter().enumerate() {
            let threads: Vec<_> = (0..clients)
                .map(|c| {
                    let mode = mode.to_string();
                    std::thread::spawn(move || client(addr, &mode, c, rounds))
                })
                .collect();
            let slowest = threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .fold(0.0, f64::max);
            secs[m].push(slowest);
        }
    }
    for (mode, mut s) in modes.iter().zip(secs) {
        s.sort_by(f64::total_cmp);
        let (best, median) = (s[0], s[s.len() / 2]);
        println!(
            "{mode:<12} {:>12.1} {:>12.1} {:>16.0}",
            best * 1e6 / rounds as f64,
            median * 1e6 / rounds as f64,
            (rounds * clients) as f64 / best
        );
    }
    server.stop();
}
