//! MEMORY STATS and MEMORY DOCTOR (issue 20): STATS's fields carry Redis 7's names and agree
//! with INFO and DBSIZE, in RESP2 and RESP3, outside and inside MULTI; DOCTOR says "empty"
//! on an empty server, warns when a `noeviction` server is nearly full, and finds nothing
//! once a policy evicts. (The byte-for-byte checks against redis-server of the texts, HELP and
//! errors are in `redis_differential_keyspace`.)

use crate::common;

use common::{config, info_field, ok, start_with, Client};
use directkv_proto::resp::Reply;

/// Every field name of Redis 7.0's MEMORY STATS (`db.0`'s included).
const REDIS_FIELDS: &[&str] = &[
    "peak.allocated",
    "total.allocated",
    "startup.allocated",
    "replication.backlog",
    "clients.slaves",
    "clients.normal",
    "cluster.links",
    "aof.buffer",
    "lua.caches",
    "functions.caches",
    "db.0",
    "overhead.hashtable.main",
    "overhead.hashtable.expires",
    "overhead.hashtable.slot-to-keys",
    "overhead.total",
    "keys.count",
    "keys.bytes-per-key",
    "dataset.bytes",
    "dataset.percentage",
    "peak.percentage",
    "allocator.allocated",
    "allocator.active",
    "allocator.resident",
    "allocator-fragmentation.ratio",
    "allocator-fragmentation.bytes",
    "allocator-rss.ratio",
    "allocator-rss.bytes",
    "rss-overhead.ratio",
    "rss-overhead.bytes",
    "fragmentation",
    "fragmentation.bytes",
];

const EMPTY: &str = "Hi Sam, this instance is empty or is using very little memory";
const FINE: &str = "Hi Sam, I can't find any memory issue in your instance.";
const FULL: &str = " * Nearly full:";

fn text(r: Reply) -> String {
    match r {
        Reply::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        other => panic!("not a text: {other:?}"),
    }
}

/// MEMORY STATS as (name, value) pairs, `db.0`'s flattened after it; RESP2's flat array or
/// RESP3's map.
fn stats(r: Reply) -> Vec<(String, Reply)> {
    let pairs: Vec<(Reply, Reply)> = match r {
        Reply::Array(Some(items)) => {
            let mut it = items.into_iter();
            std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect()
        }
        Reply::Map(pairs) => pairs,
        other => panic!("MEMORY STATS answered {other:?}"),
    };
    let mut out = Vec::new();
    for (k, v) in pairs {
        let name = text(k);
        match v {
            v @ (Reply::Array(_) | Reply::Map(_)) => {
                out.push((name, Reply::Integer(0)));
                out.extend(stats(v));
            }
            v => out.push((name, v)),
        }
    }
    out
}

fn field(s: &[(String, Reply)], name: &str) -> i64 {
    match s.iter().find(|(n, _)| n == name) {
        Some((_, Reply::Integer(v))) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn memory_stats_has_redis_names_and_agrees_with_info() {
    let srv = start_with(config(2));
    let mut c = Client::connect(&srv);
    for i in 0..100 {
        assert_eq!(c.cmd(&["SET", &format!("k:{i}"), "0123456789"]), ok());
    }
    assert_eq!(c.cmd(&["SET", "t", "v", "EX", "100"]), ok());
    let s = stats(c.cmd(&["MEMORY", "STATS"]));
    for (name, _) in &s {
        assert!(
            REDIS_FIELDS.contains(&name.as_str()),
            "{name} is not Redis's"
        );
    }
    assert_eq!(field(&s, "keys.count"), 101);
    assert_eq!(field(&s, "dataset.bytes"), 10 * 13 + 90 * 14 + 2);
    assert_eq!(
        field(&s, "total.allocated"),
        info_field(&mut c, "used_memory") as i64
    );
    assert_eq!(field(&s, "overhead.hashtable.expires"), 8);
    assert!(field(&s, "startup.allocated") > 0);
    assert!(field(&s, "clients.normal") > 0);
    assert_eq!(
        field(&s, "overhead.total"),
        field(&s, "total.allocated") - field(&s, "dataset.bytes")
    );
    // RESP3: a map, the same names.
    assert!(matches!(c.cmd(&["HELLO", "3"]), Reply::Map(_)));
    let s3 = stats(c.cmd(&["MEMORY", "STATS"]));
    let names = |s: &[(String, Reply)]| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&s3), names(&s));
    // Inside MULTI, with every shard held.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "x", "1"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["MEMORY", "STATS"]), Reply::Simple("QUEUED".into()));
    match c.cmd(&["EXEC"]) {
        Reply::Array(Some(mut r)) => {
            assert_eq!(field(&stats(r.remove(1)), "keys.count"), 102);
        }
        other => panic!("EXEC answered {other:?}"),
    }
    srv.stop();
}

#[test]
fn memory_doctor_says_empty_then_nearly_full_then_fine_once_keys_are_evicted() {
    let mut cfg = config(1);
    cfg.memory_bytes = 16 << 20;
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    assert!(text(c.cmd(&["MEMORY", "DOCTOR"])).starts_with(EMPTY));
    // Fill the slab until a write is refused.
    let value = "v".repeat(4096);
    let mut i = 0;
    loop {
        match c.cmd(&["SET", &format!("k:{i}"), &value]) {
            r if r == ok() => i += 1,
            Reply::Error(e) if e.starts_with("OOM") => break,
            other => panic!("SET answered {other:?}"),
        }
        assert!(i < 100_000, "16 MiB took 100 000 values of 4 KiB");
    }
    let report = text(c.cmd(&["MEMORY", "DOCTOR"]));
    assert!(report.contains(FULL), "{report}");
    assert!(report.ends_with("I want to help you.\n"), "{report}");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        ok()
    );
    assert!(text(c.cmd(&["MEMORY", "DOCTOR"])).starts_with(FINE));
    // RESP3: a verbatim text (the test client's parser drops its `txt:`).
    assert!(matches!(c.cmd(&["HELLO", "3"]), Reply::Map(_)));
    let verbatim = text(c.cmd(&["MEMORY", "DOCTOR"]));
    assert!(verbatim.starts_with(FINE), "{verbatim}");
    srv.stop();
}
