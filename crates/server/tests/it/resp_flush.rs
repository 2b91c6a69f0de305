//! FLUSHALL empties every shard's engine in place (`Engine::clear`, issue 20): a transaction of
//! thousands of FLUSHALLs over large arenas completes and the server answers at once after it
//! (each flush used to map a new arena: about 7 ms a shard, so 2,000 of them held every shard
//! for seconds, past the client's read timeout); the totals of expired and evicted keys go on
//! over a flush (Redis's INFO keeps them; Prometheus counters must never go back).

use crate::common;

use std::time::{Duration, Instant};

use common::{bulk, config, info_field, metric, metrics, ok, start_with, Client};
use directkv_proto::resp::Reply;

fn int(c: &mut Client, args: &[&str]) -> i64 {
    match c.cmd(args) {
        Reply::Integer(n) => n,
        r => panic!("{args:?} answered {r:?}"),
    }
}

#[test]
fn a_multi_of_2000_flushalls_completes_and_the_server_answers_at_once() {
    const FLUSHES: usize = 2000;
    let mut cfg = config(2);
    // Large arenas, where mapping a new one per flush cost the most; the index is left to
    // fault in on demand, so the test holds little memory.
    cfg.memory_bytes = 1 << 30;
    cfg.prefault_index = false;
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    for i in 0..2000 {
        assert_eq!(c.cmd(&["SET", &format!("k:{i}"), "v"]), ok());
    }
    let started = Instant::now();
    c.send(&[b"MULTI"]);
    for _ in 0..FLUSHES {
        c.send(&[b"FLUSHALL"]);
    }
    c.send(&[b"SET", b"after", b"1"]);
    c.send(&[b"EXEC"]);
    assert_eq!(c.read(), ok());
    for _ in 0..=FLUSHES {
        assert_eq!(c.read(), Reply::Simple("QUEUED".into()));
    }
    match c.read() {
        Reply::Array(Some(replies)) => {
            assert_eq!(replies.len(), FLUSHES + 1);
            assert!(replies.iter().all(|r| *r == ok()), "{:?}", &replies[..3]);
        }
        r => panic!("EXEC answered {r:?}"),
    }
    eprintln!(
        "MULTI of {FLUSHES} FLUSHALLs over 2 shards of 512 MiB: {:?}",
        started.elapsed()
    );
    let mut other = Client::connect(&srv);
    assert_eq!(other.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(int(&mut other, &["DBSIZE"]), 1);
    assert_eq!(other.cmd(&["GET", "after"]), bulk("1"));
    assert_eq!(other.cmd(&["GET", "k:1"]), Reply::Bulk(None));
    // The emptied store takes as many keys as before.
    for i in 0..2000 {
        assert_eq!(other.cmd(&["SET", &format!("k:{i}"), "w"]), ok());
    }
    assert_eq!(int(&mut other, &["DBSIZE"]), 2001);
    assert_eq!(other.cmd(&["GET", "k:1999"]), bulk("w"));
    srv.stop();
}

#[test]
fn flushall_keeps_the_totals_of_expired_keys() {
    let srv = start_with(config(2));
    let mut c = Client::connect(&srv);
    for i in 0..50 {
        assert_eq!(c.cmd(&["SET", &format!("t:{i}"), "v", "PX", "1"]), ok());
    }
    // A GET that finds a key past its deadline reclaims it (lazy expiry) and counts it.
    let deadline = Instant::now() + Duration::from_secs(30);
    for i in 0..50 {
        while c.cmd(&["GET", &format!("t:{i}")]) != Reply::Bulk(None) {
            assert!(Instant::now() < deadline, "t:{i} never expired");
            std::thread::yield_now();
        }
    }
    // A key whose deadline passed before its SET ran is never stored, so not counted.
    let expired = info_field(&mut c, "expired_keys");
    assert!(expired > 0);
    assert_eq!(c.cmd(&["SET", "x", "1"]), ok());
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    assert_eq!(c.cmd(&["FLUSHDB"]), ok());
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
    assert_eq!(info_field(&mut c, "expired_keys"), expired);
    assert_eq!(
        metric(&metrics(&srv), "directkv_expired_keys_total", ""),
        expired
    );
    srv.stop();
}
