//! SCAN, KEYS and RANDOMKEY over real sockets, what the differential test cannot show: a full
//! SCAN returns every key present throughout while another client adds and deletes others
//! (2 shards, steps of a few buckets so that the churn lands between them), KEYS past its reply
//! bound and over-long patterns are refused with the server still usable, keys past their
//! deadline are never listed, the sweep's removal of a watched key aborts EXEC, and MEMORY
//! USAGE counts a deadline.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{config, info_field, ok, start_with, Client};
use directkv_proto::resp::Reply;

fn bulk_bytes(r: &Reply) -> Vec<u8> {
    match r {
        Reply::Bulk(Some(b)) => b.clone(),
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// One SCAN call: (next cursor, keys).
fn scan_page(c: &mut Client, args: &[&str]) -> (String, Vec<Vec<u8>>) {
    match c.cmd(args) {
        Reply::Array(Some(parts)) if parts.len() == 2 => {
            let cursor = String::from_utf8(bulk_bytes(&parts[0])).unwrap();
            let keys = match &parts[1] {
                Reply::Array(Some(keys)) => keys.iter().map(bulk_bytes).collect(),
                other => panic!("SCAN's keys: {other:?}"),
            };
            (cursor, keys)
        }
        other => panic!("SCAN answered {other:?}"),
    }
}

/// Every key of a full SCAN iteration (a key may come more than once).
fn scan_all(c: &mut Client, options: &[&str]) -> Vec<Vec<u8>> {
    let mut cursor = "0".to_string();
    let mut all = Vec::new();
    loop {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(options);
        let (next, keys) = scan_page(c, &args);
        all.extend(keys);
        if next == "0" {
            return all;
        }
        cursor = next;
    }
}

fn array_len(r: Reply) -> usize {
    match r {
        Reply::Array(Some(a)) => a.len(),
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn a_full_scan_returns_every_key_present_throughout_while_others_come_and_go() {
    let mut cfg = config(2);
    // Small steps: many SCAN calls, so the other client's writes land between them.
    cfg.scan_step_buckets = 16;
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    let stable: HashSet<Vec<u8>> = (0..3000)
        .map(|i| format!("stable:{i}").into_bytes())
        .collect();
    for k in &stable {
        c.send(&[b"SET", k, b"v"]);
    }
    for _ in &stable {
        assert_eq!(c.read(), ok());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        let addr = srv.addr();
        std::thread::spawn(move || {
            let mut w = Client::connect_addr(addr);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let add = format!("churn:{i}");
                let gone = format!("churn:{}", i.saturating_sub(200));
                assert_eq!(w.cmd(&["SET", &add, "v"]), ok());
                w.cmd(&["DEL", &gone]);
                i += 1;
            }
            i
        })
    };
    for count in ["7", "100"] {
        let seen = scan_all(&mut c, &["COUNT", count]);
        let seen: HashSet<Vec<u8>> = seen.into_iter().collect();
        let missing = stable.difference(&seen).count();
        assert_eq!(
            missing, 0,
            "COUNT {count}: {missing} stable keys not returned"
        );
        assert!(seen
            .iter()
            .all(|k| k.starts_with(b"stable:") || k.starts_with(b"churn:")));
    }
    stop.store(true, Ordering::Relaxed);
    let writes = churn.join().unwrap();
    assert!(writes > 0);
    // KEYS in steps sees them all too, each once.
    assert_eq!(array_len(c.cmd(&["KEYS", "stable:*"])), 3000);
    srv.stop();
}

#[test]
fn keys_past_its_reply_bound_and_long_patterns_are_refused_and_the_server_goes_on() {
    let mut cfg = config(2);
    cfg.value_len_max = 1024;
    cfg.results_bytes_max = 4096;
    cfg.match_pattern_bytes_max = 64;
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    for i in 0..1000 {
        assert_eq!(c.cmd(&["SET", &format!("key:{i}:xxxxxxxx"), "v"]), ok());
    }
    assert_eq!(
        c.cmd(&["KEYS", "*"]),
        Reply::Error(
            "ERR KEYS reply larger than results_bytes_max (4096 bytes): iterate with SCAN".into()
        )
    );
    assert_eq!(array_len(c.cmd(&["KEYS", "key:1?:*"])), 10);
    // A SCAN page stops at the bound, whatever COUNT asks.
    let (cursor, keys) = scan_page(&mut c, &["SCAN", "0", "COUNT", "100000"]);
    assert_ne!(cursor, "0");
    assert!(!keys.is_empty() && keys.len() < 1000, "{}", keys.len());
    let all: HashSet<Vec<u8>> = scan_all(&mut c, &["COUNT", "100000"]).into_iter().collect();
    assert_eq!(all.len(), 1000);
    let long = "*".repeat(65);
    let refused =
        Reply::Error("ERR pattern of 65 bytes longer than match_pattern_bytes_max (64)".into());
    assert_eq!(c.cmd(&["KEYS", &long]), refused);
    assert_eq!(c.cmd(&["SCAN", "0", "MATCH", &long]), refused);
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    srv.stop();
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn keys_past_their_deadline_are_never_listed_and_randomkey_skips_them() {
    let mut cfg = config(2);
    // No sweep during the test: the expired keys stay in the index.
    cfg.expire_sweep_interval_ms = 60_000;
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["RANDOMKEY"]), Reply::Bulk(None));
    assert_eq!(c.cmd(&["SET", "only", "v"]), ok());
    for _ in 0..10 {
        assert_eq!(c.cmd(&["RANDOMKEY"]), Reply::Bulk(Some(b"only".to_vec())));
    }
    assert_eq!(c.cmd(&["DEL", "only"]), Reply::Integer(1));
    let at = now_ms() + 50;
    for i in 0..20 {
        let k = format!("short:{i}");
        assert_eq!(c.cmd(&["SET", &k, "v", "PXAT", &at.to_string()]), ok());
    }
    assert_eq!(array_len(c.cmd(&["KEYS", "*"])), 20);
    while now_ms() <= at {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(array_len(c.cmd(&["KEYS", "*"])), 0);
    assert!(scan_all(&mut c, &[]).is_empty());
    assert_eq!(c.cmd(&["RANDOMKEY"]), Reply::Bulk(None));
    srv.stop();
}

#[test]
fn the_sweep_removing_a_watched_key_aborts_exec() {
    let mut cfg = config(2);
    cfg.expire_sweep_interval_ms = 5;
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "w", "1", "PX", "30"]), ok());
    assert_eq!(c.cmd(&["WATCH", "w"]), ok());
    // Nobody reads `w`: only the sweep can remove it (INFO reads no key).
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut c, "expired_keys") == 0 {
        assert!(Instant::now() < deadline, "the sweep did not reclaim w");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "x", "1"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(None));
    assert_eq!(c.cmd(&["EXISTS", "x"]), Reply::Integer(0));
    srv.stop();
}

#[test]
fn memory_usage_counts_a_deadline() {
    let srv = start_with(config(2));
    let mut c = Client::connect(&srv);
    let usage = |c: &mut Client| match c.cmd(&["MEMORY", "USAGE", "k"]) {
        Reply::Integer(n) => n,
        other => panic!("MEMORY USAGE answered {other:?}"),
    };
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    let plain = usage(&mut c);
    assert_eq!(c.cmd(&["EXPIRE", "k", "1000"]), Reply::Integer(1));
    let with_deadline = usage(&mut c);
    assert!(with_deadline > plain, "{with_deadline} <= {plain}");
    assert_eq!(c.cmd(&["PERSIST", "k"]), Reply::Integer(1));
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(usage(&mut c), plain);
    srv.stop();
}
