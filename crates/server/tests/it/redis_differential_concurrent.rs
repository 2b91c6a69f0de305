//! Concurrent clients updating shared keys: `CLIENTS` connections (round-robin accept puts
//! them on different shards of directkv) pipeline INCR, INCRBY, DECRBY, INCRBYFLOAT and APPEND
//! on a few shared keys at once. At the end every counter is exactly the sum of what the
//! clients added, every APPENDed key is exactly as long as what was appended to it, and the
//! replies of the INCR-only key are exactly 1..=n (each increment saw every earlier one). The
//! same run against redis-server checks the test itself. Seeded: the seed is printed on failure,
//! and `DKV_CONCURRENT_SEED=n` replays one.

use crate::common;
use crate::differential;

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;

use differential::Rng;
use directkv_testkit::peer::start_redis;
use directkv_testkit::raw::{encode, show, RawClient};

const CLIENTS: usize = 8;
const SHARDS: usize = 4;
/// Pipelines per client, and commands per pipeline.
const PIPELINES: usize = 300;
const DEPTH: usize = 16;
/// Shared keys of each kind; with four shards they land on several.
const KEYS_PER_KIND: usize = 6;
const SEED: u64 = 0x5eed_1920;

/// What one client did: the sum it added to each key, and its INCR replies.
#[derive(Default)]
struct Done {
    /// Integer keys: the sum added; float keys: the number of halves added; append keys: the
    /// bytes appended.
    added: HashMap<String, i64>,
    incr_replies: Vec<i64>,
}

fn integer(frame: &[u8]) -> i64 {
    assert!(
        frame.starts_with(b":"),
        "an integer reply: {}",
        show(frame, 100)
    );
    std::str::from_utf8(&frame[1..frame.len() - 2])
        .unwrap()
        .parse()
        .unwrap()
}

/// One client's run: `PIPELINES` pipelines of `DEPTH` random updates.
fn client(addr: SocketAddr, seed: u64) -> Done {
    let mut rng = Rng(seed);
    let mut c = RawClient::connect(addr);
    let mut done = Done::default();
    let tag = format!("<{seed:x}>");
    for _ in 0..PIPELINES {
        let mut bytes = Vec::new();
        let mut kinds = Vec::with_capacity(DEPTH);
        for _ in 0..DEPTH {
            let j = rng.below(KEYS_PER_KIND);
            let (key, args, delta): (String, Vec<String>, i64) = match rng.below(5) {
                0 => ("incr-only".to_string(), vec!["INCR".into()], 1),
                1 => {
                    let d = rng.below(2001) as i64 - 1000;
                    (format!("int:{j}"), vec!["INCRBY".into(), d.to_string()], d)
                }
                2 => {
                    let d = rng.below(100) as i64;
                    (format!("int:{j}"), vec!["DECRBY".into(), d.to_string()], -d)
                }
                3 => {
                    // Halves are exact in binary floating point, so the sum is exact too.
                    let halves = rng.below(21) as i64 - 10;
                    let d = halves as f64 / 2.0;
                    (
                        format!("float:{j}"),
                        vec!["INCRBYFLOAT".into(), d.to_string()],
                        halves,
                    )
                }
                _ => {
                    let n = 1 + rng.below(20);
                    let piece = tag.repeat(n / tag.len() + 1)[..n].to_string();
                    (
                        format!("append:{j}"),
                        vec!["APPEND".into(), piece],
                        n as i64,
                    )
                }
            };
            let mut cmd: Vec<&[u8]> = vec![args[0].as_bytes(), key.as_bytes()];
            cmd.extend(args[1..].iter().map(|a| a.as_bytes()));
            bytes.extend_from_slice(&encode(&cmd));
            *done.added.entry(key.clone()).or_default() += delta;
            kinds.push(key);
        }
        c.send_raw(&bytes);
        for key in kinds {
            let reply = c.read();
            assert!(!reply.starts_with(b"-"), "{key}: {}", show(&reply, 100));
            if key == "incr-only" {
                done.incr_replies.push(integer(&reply));
            }
        }
    }
    done
}

/// Runs every client against `addr` at once and checks the totals; `Err` names what is wrong.
fn run(addr: SocketAddr, seed: u64) -> Result<(), String> {
    let mut c = RawClient::connect(addr);
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    let runs: Vec<Done> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS as u64)
            .map(|i| s.spawn(move || client(addr, seed.wrapping_mul(31).wrapping_add(i))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client"))
            .collect()
    });
    let mut want: HashMap<String, i64> = HashMap::new();
    let mut incr_replies: Vec<i64> = Vec::new();
    for d in &runs {
        for (k, v) in &d.added {
            *want.entry(k.clone()).or_default() += v;
        }
        incr_replies.extend(&d.incr_replies);
    }
    let mut wrong = Vec::new();
    let mut keys: Vec<&String> = want.keys().collect();
    keys.sort();
    for key in keys {
        let total = want[key];
        let (cmd, expect) = if key.starts_with("append:") {
            ("STRLEN", format!(":{total}\r\n"))
        } else if key.starts_with("float:") {
            let sum = total as f64 / 2.0;
            ("GET", format!("${}\r\n{sum}\r\n", sum.to_string().len()))
        } else {
            (
                "GET",
                format!("${}\r\n{total}\r\n", total.to_string().len()),
            )
        };
        let got = c.cmd(&[cmd, key]);
        if got != expect.as_bytes() {
            wrong.push(format!(
                "{cmd} {key}: {} instead of {}",
                show(&got, 80),
                show(expect.as_bytes(), 80)
            ));
        }
    }
    incr_replies.sort_unstable();
    let n = incr_replies.len() as i64;
    if incr_replies != (1..=n).collect::<Vec<_>>() {
        wrong.push(format!("the {n} INCR replies are not 1..={n}"));
    }
    // Every APPEND key holds whole pieces of the clients' tags, none torn by another's.
    for j in 0..KEYS_PER_KIND {
        let v = c.cmd(&["GET", &format!("append:{j}")]);
        if v.starts_with(b"$") && !v.starts_with(b"$-1") {
            let body = &differential_body(&v);
            if body
                .iter()
                .any(|&b| !(b.is_ascii_hexdigit() || b == b'<' || b == b'>'))
            {
                wrong.push(format!("append:{j} holds bytes no client sent"));
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

/// A bulk reply's contents.
fn differential_body(frame: &[u8]) -> Vec<u8> {
    let eol = frame.windows(2).position(|w| w == b"\r\n").unwrap();
    frame[eol + 2..frame.len() - 2].to_vec()
}

#[test]
fn concurrent_counters_on_several_shards_are_exact() {
    let seed = std::env::var("DKV_CONCURRENT_SEED").map_or(SEED, |s| s.parse().expect("a number"));
    let Some(redis) = start_redis() else {
        return;
    };
    // The test itself, against the reference.
    if let Err(e) = run(redis.addr, seed) {
        panic!("seed {seed}: redis-server fails the concurrent test, so the test is wrong:\n{e}");
    }
    let server = common::start(SHARDS);
    // Each client's connection on its own shard (round-robin accept), each shard's keys
    // updated from every shard: check that the clients did spread.
    let result = run(server.addr(), seed);
    let mut c = common::Client::connect(&server);
    let forwarded = common::info_field(&mut c, "forwarded_batches");
    server.stop();
    std::io::stderr().flush().ok();
    if let Err(e) = result {
        panic!("seed {seed}: directkv with {SHARDS} shards:\n{e}");
    }
    assert!(
        forwarded > 0,
        "no batch crossed shards: the clients did not spread"
    );
}
