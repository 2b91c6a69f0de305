//! Differential tests of SCAN, KEYS and RANDOMKEY, of WATCH with expiry, and of the commands
//! that read before they write (MSETNX, RENAME, COPY) inside MULTI, against a real
//! redis-server (see `differential/mod.rs`), with directkv on several shards.
//!
//! What is compared: error replies and RANDOMKEY on an empty and a one-key database byte for
//! byte; KEYS as the sorted list of its keys (the order is each server's own); SCAN as the set
//! of keys a full iteration returns (cursors and pages differ: each server walks its own
//! table) and the shape of each page. WATCH with expiry uses absolute deadlines (PXAT) a few
//! milliseconds ahead and waits on the wall clock for them to pass, so both servers see the
//! same keys expired and the result does not depend on timing.

use crate::common;
use crate::differential;

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::start_with;
use differential::{hello, tokens, Pair};
use directkv_testkit::peer::start_redis;
use directkv_testkit::raw::show;

const SHARDS: usize = 3;

/// Argument errors and the empty database, compared byte for byte.
const ERRORS: &[&[&str]] = &[
    &["RANDOMKEY"],
    &["KEYS", "*"],
    &["SCAN", "0"],
    &["SCAN"],
    &["SCAN", "x"],
    &["SCAN", " 5"],
    &["SCAN", "5 "],
    &["SCAN", "18446744073709551616"],
    &["SCAN", "0", "COUNT"],
    &["SCAN", "0", "COUNT", "0"],
    &["SCAN", "0", "COUNT", "-1"],
    &["SCAN", "0", "COUNT", "x"],
    &["SCAN", "0", "COUNT", "x", "MATCH"],
    &["SCAN", "x", "COUNT", "x"],
    &["SCAN", "0", "MATCH"],
    &["SCAN", "0", "TYPE"],
    &["SCAN", "0", "FOO", "bar"],
    &[
        "SCAN", "0", "MATCH", "*", "COUNT", "5", "TYPE", "string", "extra",
    ],
    &["SCAN", "0", "TYPE", "list"],
    &["SCAN", ""],
    &["SCAN", "-0"],
    &["KEYS"],
    &["KEYS", "a", "b"],
    &["RANDOMKEY", "x"],
    &["SET", "only", "1"],
    &["RANDOMKEY"],
    &["KEYS", "*"],
    &["KEYS", "o*"],
    &["KEYS", "x*"],
    &["SCAN", "0", "COUNT", "1000"],
    &["SCAN", "0", "MATCH", "only", "TYPE", "STRING"],
    &["SCAN", "0", "TYPE", "hash"],
    &["DEL", "only"],
    &["RANDOMKEY"],
];

/// Patterns for KEYS and SCAN MATCH over `key_names`.
const PATTERNS: &[&str] = &[
    "*",
    "user:*",
    "user:1?",
    "user:[1-3]*",
    "user:[^1]*",
    "*:1*",
    "[a-",
    "h?llo",
    "h*llo",
    "h[ae]llo",
    "\\*star",
    "*\\?*",
    "USER:*",
    "[",
    "x*y*z",
    "a\\",
];

fn key_names() -> Vec<String> {
    let mut keys: Vec<String> = (0..300).map(|i| format!("user:{i}")).collect();
    keys.extend((0..60).map(|i| format!("session:{i}:x")));
    for k in [
        "a", "-", "hello", "hallo", "hillo", "hllo", "heeello", "*star", "q?q", "a\\", "xyz",
        "x--y--z",
    ] {
        keys.push(k.to_string());
    }
    keys
}

/// The keys of an array reply, sorted.
fn sorted_keys(frame: &[u8]) -> Vec<Vec<u8>> {
    let t = tokens(frame);
    assert!(t[0].starts_with(b"*"), "an array: {}", show(frame, 200));
    let mut keys: Vec<Vec<u8>> = t[1..].chunks(2).map(|c| c[1].clone()).collect();
    keys.sort();
    keys
}

/// A SCAN page: (next cursor, keys).
fn page(frame: &[u8]) -> (String, Vec<Vec<u8>>) {
    let t = tokens(frame);
    assert!(
        t.len() >= 4 && t[0] == b"*2" && t[1].starts_with(b"$") && t[3].starts_with(b"*"),
        "a SCAN page: {}",
        show(frame, 200)
    );
    let n: usize = std::str::from_utf8(&t[3][1..]).unwrap().parse().unwrap();
    let keys: Vec<Vec<u8>> = t[4..].chunks(2).map(|c| c[1].clone()).collect();
    assert_eq!(keys.len(), n, "{}", show(frame, 200));
    (String::from_utf8(t[2].clone()).unwrap(), keys)
}

/// Every key a full SCAN iteration with `options` returns, on one side.
fn scan_all(c: &mut directkv_testkit::raw::RawClient, options: &[&str]) -> BTreeSet<Vec<u8>> {
    let mut cursor = "0".to_string();
    let mut all = BTreeSet::new();
    for _ in 0..100_000 {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(options);
        let (next, keys) = page(&c.cmd(&args));
        all.extend(keys);
        if next == "0" {
            return all;
        }
        cursor = next;
    }
    panic!("SCAN {options:?} did not come back to cursor 0");
}

/// Runs `check` against directkv (on `SHARDS` shards) and redis-server, in RESP2 and then
/// RESP3, each time on emptied servers, and asserts no difference was found.
fn in_both_protocols(check: impl Fn(&mut Pair, &str)) {
    let Some(redis) = start_redis() else {
        return;
    };
    let server = start_with(common::config(SHARDS));
    for resp3 in [false, true] {
        let label = if resp3 { "RESP3" } else { "RESP2" };
        let mut p = Pair::connect(server.addr(), redis.addr, label);
        if resp3 {
            p.same_after(&["HELLO", "3"], hello);
        }
        p.same(&["FLUSHALL"]);
        check(&mut p, label);
        p.assert_none();
    }
    server.stop();
}

#[test]
fn scan_keys_and_randomkey_match_redis() {
    in_both_protocols(|p, label| {
        for cmd in ERRORS {
            p.same(cmd);
        }
        let keys = key_names();
        for k in &keys {
            p.same(&["SET", k, "v"]);
        }
        // A key past its deadline is not listed by either (PXAT in the past deletes it).
        p.same(&["SET", "gone", "v", "PXAT", "1"]);
        for pat in PATTERNS {
            let (d, r) = p.both(&[b"KEYS", pat.as_bytes()]);
            assert_eq!(sorted_keys(&d), sorted_keys(&r), "{label} KEYS {pat}");
        }
        let want: BTreeSet<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        for options in [
            &[][..],
            &["COUNT", "1"],
            &["COUNT", "7"],
            &["COUNT", "1000"],
            &["TYPE", "string"],
        ] {
            let d = scan_all(&mut p.d, options);
            let r = scan_all(&mut p.r, options);
            assert_eq!(d, r, "{label} SCAN {options:?}");
            assert_eq!(d, want, "{label} SCAN {options:?}");
        }
        for pat in PATTERNS {
            let d = scan_all(&mut p.d, &["MATCH", pat, "COUNT", "20"]);
            let r = scan_all(&mut p.r, &["MATCH", pat, "COUNT", "20"]);
            assert_eq!(d, r, "{label} SCAN MATCH {pat}");
        }
        let d = scan_all(&mut p.d, &["TYPE", "zset"]);
        assert!(d.is_empty());
        // RANDOMKEY answers one of the keys, on both.
        for _ in 0..20 {
            let (d, r) = p.both(&[b"RANDOMKEY"]);
            for reply in [d, r] {
                let t = tokens(&reply);
                assert!(
                    want.contains(&t[1]),
                    "{label} RANDOMKEY {}",
                    show(&reply, 80)
                );
            }
        }
    });
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Waits on the wall clock (not on either server) until `deadline_ms` has passed.
fn wait_past(deadline_ms: u64) {
    while now_ms() <= deadline_ms {
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn watch_with_expiry_matches_redis() {
    let Some(redis) = start_redis() else {
        return;
    };
    let server = start_with(common::config(SHARDS));
    let mut a = Pair::connect(server.addr(), redis.addr, "watcher");
    let mut b = Pair::connect(server.addr(), redis.addr, "other client");
    a.same(&["FLUSHALL"]);

    // A watched key that expires, untouched, aborts the transaction.
    let at = (now_ms() + 40).to_string();
    a.same(&["SET", "w", "1", "PXAT", &at]);
    a.same(&["WATCH", "w"]);
    wait_past(at.parse().unwrap());
    a.same(&["MULTI"]);
    a.same(&["SET", "x", "1"]);
    a.same(&["EXEC"]);
    a.same(&["EXISTS", "x", "w"]);

    // The same when another client's read found it expired first.
    let at = (now_ms() + 40).to_string();
    a.same(&["SET", "w", "1", "PXAT", &at]);
    a.same(&["WATCH", "w"]);
    wait_past(at.parse().unwrap());
    b.same(&["GET", "w"]);
    a.same(&["MULTI"]);
    a.same(&["SET", "x", "2"]);
    a.same(&["EXEC"]);
    a.same(&["GET", "x"]);

    // A key already expired at WATCH is no change.
    let at = (now_ms() + 40).to_string();
    a.same(&["SET", "e", "1", "PXAT", &at]);
    wait_past(at.parse().unwrap());
    a.same(&["WATCH", "e"]);
    a.same(&["MULTI"]);
    a.same(&["SET", "x", "3"]);
    a.same(&["EXEC"]);
    a.same(&["GET", "x"]);

    // A deadline far ahead changes nothing; setting one is a change.
    let far = (now_ms() + 3_600_000).to_string();
    a.same(&["SET", "f", "1", "PXAT", &far]);
    a.same(&["WATCH", "f"]);
    a.same(&["MULTI"]);
    a.same(&["INCR", "f"]);
    a.same(&["EXEC"]);
    a.same(&["WATCH", "f"]);
    b.same(&["PEXPIREAT", "f", &far]);
    a.same(&["MULTI"]);
    a.same(&["INCR", "f"]);
    a.same(&["EXEC"]);
    a.same(&["WATCH", "f"]);
    b.same(&["PERSIST", "f"]);
    a.same(&["MULTI"]);
    a.same(&["INCR", "f"]);
    a.same(&["EXEC"]);
    a.same(&["GET", "f"]);
    a.assert_none();
    b.assert_none();
    server.stop();
}

/// Commands that read before they write, queued in MULTI: run in EXEC in their place, with
/// Redis's replies, their keys on different shards.
const READ_WRITE_IN_MULTI: &[&[&str]] = &[
    &["SET", "a", "1"],
    &["MULTI"],
    &["MSETNX", "m1", "x", "m2", "y", "m3", "z"],
    &["MSETNX", "m1", "again", "m4", "w"],
    &["MGET", "m1", "m2", "m3", "m4"],
    &["RENAME", "a", "b"],
    &["RENAME", "nope", "c"],
    &["RENAMENX", "b", "m1"],
    &["RENAMENX", "b", "c"],
    &["COPY", "c", "d"],
    &["COPY", "c", "d"],
    &["COPY", "c", "d", "REPLACE"],
    &["COPY", "c", "c"],
    &["COPY", "c", "e", "FOO"],
    &["INCR", "d"],
    &["MSETNX", "n", "1", "n", "2"],
    &["GET", "n"],
    &["MEMORY", "USAGE", "nope"],
    &["EXEC"],
    &["MGET", "a", "b", "c", "d", "m1", "m4", "n"],
    // A watched key changed: nothing runs, the MSETNX included.
    &["WATCH", "c"],
    &["SET", "c", "changed"],
    &["MULTI"],
    &["MSETNX", "p1", "1", "p2", "2"],
    &["RENAME", "c", "q"],
    &["EXEC"],
    &["EXISTS", "p1", "p2", "q"],
    // Unchanged: it runs.
    &["WATCH", "c"],
    &["MULTI"],
    &["RENAME", "c", "q"],
    &["MSETNX", "p1", "1", "p2", "2"],
    &["DBSIZE"],
    &["COPY", "q", "r"],
    &["EXEC"],
    &["MGET", "c", "q", "r", "p1", "p2"],
];

#[test]
fn read_write_commands_inside_multi_match_redis() {
    in_both_protocols(|p, _| {
        for cmd in READ_WRITE_IN_MULTI {
            p.same(cmd);
        }
        // MEMORY USAGE of a present key inside MULTI: an integer on both (the sizes differ).
        p.same(&["MULTI"]);
        p.same(&["MEMORY", "USAGE", "q"]);
        let (d, r) = p.both(&[b"EXEC"]);
        let (td, tr) = (tokens(&d), tokens(&r));
        assert_eq!(
            (td[0].as_slice(), tr[0].as_slice()),
            (&b"*1"[..], &b"*1"[..])
        );
        assert!(td[1].starts_with(b":") && tr[1].starts_with(b":"));
    });
}
