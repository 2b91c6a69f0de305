//! SCAN, KEYS and RANDOMKEY over real sockets, what the differential test cannot show: a full
//! SCAN returns every key present throughout while another client adds and deletes others
//! (2 shards, steps of a few buckets so that the churn lands between them), KEYS past its reply
//! bound and over-long patterns are refused with the server still usable, keys past their
//! deadline are never listed, the sweep's removal of a watched key aborts EXEC, and MEMORY
//! USAGE counts a deadline. Issue 20: a small keyspace is one SCAN call with cursor 0, cursors
//! cross shard boundaries in order, a quiet store of 200 000 keys scans each key exactly once,
//! and SCAN, KEYS and RANDOMKEY inside MULTI run in the transaction's atomic section.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{config, info_field, ok, start_with, Client};
use directkv_proto::resp::Reply;
use directkv_server::ServerConfig;

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
    // The key must still be there when WATCH runs, or its removal is no change to the watched
    // key. A PTTL after WATCH proves it was (a slow machine gets another key, with twice the
    // lifetime, after the last expired before the WATCH).
    let mut lifetime_ms = 200u64;
    let expired_before = loop {
        let expired_before = info_field(&mut c, "expired_keys");
        let px = lifetime_ms.to_string();
        assert_eq!(c.cmd(&["SET", "w", "1", "PX", &px]), ok());
        assert_eq!(c.cmd(&["WATCH", "w"]), ok());
        match c.cmd(&["PTTL", "w"]) {
            Reply::Integer(ms) if ms > 0 => break expired_before,
            Reply::Integer(-2) => {
                assert_eq!(c.cmd(&["UNWATCH"]), ok());
                assert!(
                    lifetime_ms < 60_000,
                    "w expired before WATCH even at {px} ms"
                );
                lifetime_ms *= 2;
            }
            other => panic!("PTTL answered {other:?}"),
        }
    };
    // Nobody reads `w` any more: only the sweep can remove it (INFO reads no key).
    let deadline = Instant::now() + Duration::from_secs(30 + lifetime_ms / 1000);
    while info_field(&mut c, "expired_keys") == expired_before {
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

/// Sets `keys` pipelined, a thousand at a time.
fn set_all(c: &mut Client, keys: &[String]) {
    for chunk in keys.chunks(1000) {
        for k in chunk {
            c.send(&[b"SET", k.as_bytes(), b"v"]);
        }
        for _ in chunk {
            assert_eq!(c.read(), ok());
        }
    }
}

/// Issue 20: SCAN over a small keyspace answers every key and cursor 0 in one call, as Redis
/// does (redis-cli --scan and redis-py's scan_iter then make one round trip), although the
/// index is far larger than one step: once answered 65536 and no key.
#[test]
fn a_small_keyspace_is_one_scan_call_with_cursor_zero() {
    for (shards, step_buckets) in [(1, None), (2, None), (2, Some(16))] {
        let mut cfg = config(shards);
        if let Some(b) = step_buckets {
            cfg.scan_step_buckets = b;
        }
        let srv = start_with(cfg);
        let mut c = Client::connect(&srv);
        assert_eq!(scan_page(&mut c, &["SCAN", "0"]), ("0".to_string(), vec![]));
        let keys: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
        set_all(&mut c, &keys);
        let (cursor, found) = scan_page(&mut c, &["SCAN", "0"]);
        assert_eq!(cursor, "0", "{shards} shards, steps of {step_buckets:?}");
        let found: HashSet<Vec<u8>> = found.into_iter().collect();
        let want: HashSet<Vec<u8>> = keys.iter().map(|k| k.clone().into_bytes()).collect();
        assert_eq!(found, want);
        // MATCH filters after COUNT, as in Redis: still one call.
        let (cursor, found) = scan_page(&mut c, &["SCAN", "0", "MATCH", "k[12]"]);
        assert_eq!((cursor.as_str(), found.len()), ("0", 2));
        srv.stop();
    }
}

/// Issue 20: at every shard boundary the cursor points at the next shard's first bucket
/// (shard in the top 16 bits, bucket below), and after the last shard it is 0; COUNT met
/// exactly on a shard's last key moves the cursor to the next shard, never back.
#[test]
fn scan_cursors_cross_shards_in_order_and_end_at_zero() {
    let shards = 3;
    let srv = start_with(config(shards));
    let mut c = Client::connect(&srv);
    let keys: Vec<String> = (0..30).map(|i| format!("b{i}")).collect();
    set_all(&mut c, &keys);
    for count in ["1", "2", "3", "7", "10", "29", "30", "31"] {
        let mut cursor = "0".to_string();
        let mut seen = Vec::new();
        let mut last_shard = 0u64;
        loop {
            let (next, page) = scan_page(&mut c, &["SCAN", &cursor, "COUNT", count]);
            seen.extend(page);
            if next == "0" {
                break;
            }
            let n: u64 = next.parse().unwrap();
            let shard = n >> 48;
            assert!(shard < shards as u64, "cursor {n}: shard {shard}");
            assert!(
                shard >= last_shard,
                "cursor {n} went back from shard {last_shard}"
            );
            last_shard = shard;
            cursor = next;
        }
        seen.sort();
        let mut want: Vec<Vec<u8>> = keys.iter().map(|k| k.clone().into_bytes()).collect();
        want.sort();
        assert_eq!(seen, want, "COUNT {count}: every key exactly once");
    }
    // A cursor past the last shard ends the iteration; one at a shard's start scans it.
    assert_eq!(
        scan_page(&mut c, &["SCAN", &(3u64 << 48).to_string()]),
        ("0".to_string(), vec![])
    );
    let (next, _) = scan_page(
        &mut c,
        &["SCAN", &(2u64 << 48).to_string(), "COUNT", "1000"],
    );
    assert_eq!(next, "0");
    srv.stop();
}

/// Every key exactly once from a full SCAN on a quiet store, small and large, on one and two
/// shards, with the default step and COUNTs small and large; KEYS agrees.
#[test]
fn a_full_scan_of_a_quiet_store_returns_every_key_exactly_once() {
    for shards in [1, 2] {
        let srv = start_with(ServerConfig {
            memory_bytes: 256 << 20,
            ..config(shards)
        });
        let mut c = Client::connect(&srv);
        let mut keys: Vec<String> = Vec::new();
        for n in [7usize, 200_000] {
            let more: Vec<String> = (keys.len()..n).map(|i| format!("key:{i}")).collect();
            set_all(&mut c, &more);
            keys.extend(more);
            for count in ["10", "1000"] {
                let mut seen = scan_all(&mut c, &["COUNT", count]);
                assert_eq!(seen.len(), n, "{shards} shards, {n} keys, COUNT {count}");
                seen.sort();
                seen.dedup();
                assert_eq!(seen.len(), n, "{shards} shards, {n} keys: a key came twice");
            }
            assert_eq!(array_len(c.cmd(&["KEYS", "*"])), n);
            assert_eq!(
                scan_all(&mut c, &["MATCH", "key:1*", "COUNT", "1000"]).len(),
                array_len(c.cmd(&["KEYS", "key:1*"]))
            );
        }
        srv.stop();
    }
}

/// Issue 20: KEYS, SCAN and RANDOMKEY inside MULTI run in the transaction's atomic section.
/// `MULTI; SET a; KEYS *; DEL a; EXEC` while one client checks `a` without pause and another
/// writes pairs of keys on two shards with atomic MSETs: nobody ever sees `a`, the KEYS reply
/// holds it, and holds both keys of every pair or neither. Before, KEYS ran between two
/// atomic parts of the transaction, in steps with other clients' commands between them.
#[test]
fn walks_inside_multi_see_one_point_in_time() {
    let mut cfg = config(2);
    // Many small steps: a walk outside the atomic section would let the others in.
    cfg.scan_step_buckets = 64;
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    let stop = Arc::new(AtomicBool::new(false));
    let addr = srv.addr();
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut w = Client::connect_addr(addr);
            let mut seen = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if w.cmd(&["EXISTS", "a"]) == Reply::Integer(1) {
                    seen += 1;
                }
            }
            seen
        })
    };
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut w = Client::connect_addr(addr);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (x, y) = (format!("pair:{i}:x"), format!("pair:{i}:y"));
                assert_eq!(w.cmd(&["MSET", &x, "1", &y, "1"]), ok());
                i += 1;
            }
            i
        })
    };
    let tx = |c: &mut Client, walk: &[&str]| -> Vec<Reply> {
        assert_eq!(c.cmd(&["MULTI"]), ok());
        for cmd in [&["SET", "a", "1"][..], walk, &["DEL", "a"]] {
            assert_eq!(c.cmd(cmd), Reply::Simple("QUEUED".into()));
        }
        match c.cmd(&["EXEC"]) {
            Reply::Array(Some(r)) if r.len() == 3 => r,
            other => panic!("EXEC answered {other:?}"),
        }
    };
    for round in 0..40 {
        let r = tx(&mut c, &["KEYS", "*"]);
        let keys: Vec<Vec<u8>> = match &r[1] {
            Reply::Array(Some(k)) => k.iter().map(bulk_bytes).collect(),
            other => panic!("KEYS answered {other:?}"),
        };
        let keys: HashSet<Vec<u8>> = keys.into_iter().collect();
        assert!(
            keys.contains(b"a".as_slice()),
            "round {round}: KEYS missed a"
        );
        for k in &keys {
            if let Some(x) = k.strip_suffix(b":x") {
                let y = [x, b":y"].concat();
                assert!(keys.contains(&y), "round {round}: half a pair");
            }
            if let Some(y) = k.strip_suffix(b":y") {
                let x = [y, b":x"].concat();
                assert!(keys.contains(&x), "round {round}: half a pair");
            }
        }
        assert_eq!(r[2], Reply::Integer(1));
        // SCAN and RANDOMKEY too: the transaction's own key is there for them.
        let r = tx(&mut c, &["SCAN", "0", "MATCH", "a", "COUNT", "100000000"]);
        match &r[1] {
            Reply::Array(Some(p)) => assert_eq!(p[1], Reply::Array(Some(vec![common::bulk("a")]))),
            other => panic!("SCAN answered {other:?}"),
        }
        let r = tx(&mut c, &["RANDOMKEY"]);
        assert!(matches!(&r[1], Reply::Bulk(Some(_))), "{:?}", r[1]);
    }
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    let pairs = writer.join().unwrap();
    assert!(pairs > 0);
    assert_eq!(
        seen, 0,
        "another client saw the transaction's key between its commands"
    );
    assert_eq!(c.cmd(&["EXISTS", "a"]), Reply::Integer(0));
    srv.stop();
}
