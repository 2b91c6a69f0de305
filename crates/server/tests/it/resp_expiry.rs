//! Key expiry over a real socket (issue 20 item 1): SET's expiry options, SETEX, PSETEX,
//! GETEX, the EXPIRE family with NX/XX/GT/LT, TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST; the
//! sweep reclaiming keys nobody touches; INFO and /metrics. Deadlines in the replies that
//! depend on the clock are checked within bounds, never with a sleep; the byte-exact
//! comparison with redis-server is in `redis_differential.rs`.

use crate::common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{bulk, config, info_field, metric, metrics, ok, start, start_with, Client};
use directkv_proto::resp::Reply;

fn int(c: &mut Client, args: &[&str]) -> i64 {
    match c.cmd(args) {
        Reply::Integer(n) => n,
        r => panic!("{args:?}: {r:?}"),
    }
}

fn err(text: &str) -> Reply {
    Reply::Error(text.into())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn set_options_and_the_ttl_family() {
    for shards in [1, 3] {
        let srv = start(shards);
        let mut c = Client::connect(&srv);
        assert_eq!(c.cmd(&["SET", "k", "v", "EX", "100"]), ok());
        let ttl = int(&mut c, &["TTL", "k"]);
        assert!((99..=100).contains(&ttl), "{ttl}");
        let pttl = int(&mut c, &["PTTL", "k"]);
        assert!((98_000..=100_000).contains(&pttl), "{pttl}");
        let at = int(&mut c, &["PEXPIRETIME", "k"]);
        assert!((at - now_ms() - 100_000).abs() < 5_000, "{at}");
        // Absolute deadlines read back exactly.
        assert_eq!(c.cmd(&["SET", "a", "v", "PXAT", "4102444800123"]), ok());
        assert_eq!(int(&mut c, &["PEXPIRETIME", "a"]), 4_102_444_800_123);
        assert_eq!(int(&mut c, &["EXPIRETIME", "a"]), 4_102_444_800);
        assert_eq!(c.cmd(&["SET", "a", "w", "EXAT", "4102444801"]), ok());
        assert_eq!(int(&mut c, &["PEXPIRETIME", "a"]), 4_102_444_801_000);
        // KEEPTTL keeps it, a plain SET clears it, APPEND and INCR keep it.
        assert_eq!(c.cmd(&["SET", "a", "x", "KEEPTTL"]), ok());
        assert_eq!(int(&mut c, &["PEXPIRETIME", "a"]), 4_102_444_801_000);
        assert_eq!(int(&mut c, &["APPEND", "a", "y"]), 2);
        assert_eq!(int(&mut c, &["EXPIRETIME", "a"]), 4_102_444_801);
        assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
        assert_eq!(int(&mut c, &["TTL", "a"]), -1);
        assert_eq!(int(&mut c, &["PEXPIREAT", "a", "4102444800000"]), 1);
        assert_eq!(int(&mut c, &["INCR", "a"]), 2);
        assert_eq!(int(&mut c, &["EXPIRETIME", "a"]), 4_102_444_800);
        assert_eq!(int(&mut c, &["TTL", "missing"]), -2);
        assert_eq!(int(&mut c, &["PEXPIRETIME", "missing"]), -2);
        // NX/XX/GET combine with expiry options.
        assert_eq!(
            c.cmd(&["SET", "a", "2", "NX", "EX", "5"]),
            Reply::Bulk(None)
        );
        assert_eq!(
            c.cmd(&["SET", "a", "3", "XX", "GET", "PX", "5000"]),
            bulk("2")
        );
        assert!(int(&mut c, &["PTTL", "a"]) > 4_000);
        // A deadline in the past deletes.
        assert_eq!(c.cmd(&["SET", "a", "4", "PXAT", "1"]), ok());
        assert_eq!(c.cmd(&["GET", "a"]), Reply::Bulk(None));
        // Errors, as Redis words them.
        assert_eq!(
            c.cmd(&["SET", "a", "v", "EX", "0"]),
            err("ERR invalid expire time in 'set' command")
        );
        assert_eq!(
            c.cmd(&["SET", "a", "v", "PX", "-5"]),
            err("ERR invalid expire time in 'set' command")
        );
        assert_eq!(
            c.cmd(&["SET", "a", "v", "EX", "x"]),
            err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            c.cmd(&["SET", "a", "v", "EX", "9223372036854775"]),
            err("ERR invalid expire time in 'set' command")
        );
        assert_eq!(
            c.cmd(&["SET", "a", "v", "EX", "1", "PX", "1"]),
            err("ERR syntax error")
        );
        assert_eq!(
            c.cmd(&["SET", "a", "v", "KEEPTTL", "EX", "1"]),
            err("ERR syntax error")
        );
        assert_eq!(c.cmd(&["SET", "a", "v", "EX"]), err("ERR syntax error"));
        assert_eq!(
            c.cmd(&["SET", "a", "v", "PERSIST"]),
            err("ERR syntax error")
        );
        assert_eq!(c.cmd(&["SET", "a", "v", "EX", "1", "EX", "100"]), ok());
        assert!(int(&mut c, &["TTL", "a"]) > 90);
        srv.stop();
    }
}

#[test]
fn setnx_stores_only_a_missing_or_expired_key() {
    let srv = start(2);
    let mut c = Client::connect(&srv);
    assert_eq!(int(&mut c, &["SETNX", "n", "1"]), 1);
    assert_eq!(int(&mut c, &["SETNX", "n", "2"]), 0);
    assert_eq!(c.cmd(&["GET", "n"]), bulk("1"));
    // A refused SETNX leaves the deadline alone; a passed deadline makes the key absent.
    let soon = (now_ms() + 100_000).to_string();
    assert_eq!(c.cmd(&["SET", "t", "a", "PXAT", &soon]), ok());
    assert_eq!(int(&mut c, &["SETNX", "t", "b"]), 0);
    assert!(int(&mut c, &["PTTL", "t"]) > 90_000);
    let gone = (now_ms() + 30).to_string();
    assert_eq!(c.cmd(&["SET", "e", "old", "PXAT", &gone]), ok());
    let deadline = Instant::now() + Duration::from_secs(10);
    while int(&mut c, &["PTTL", "e"]) != -2 {
        assert!(Instant::now() < deadline, "the key never expired");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(int(&mut c, &["SETNX", "e", "new"]), 1);
    assert_eq!(c.cmd(&["GET", "e"]), bulk("new"));
    assert_eq!(int(&mut c, &["TTL", "e"]), -1);
    assert_eq!(
        c.cmd(&["SETNX", "e"]),
        err("ERR wrong number of arguments for 'setnx' command")
    );
    srv.stop();
}

#[test]
fn setex_getex_expire_persist() {
    let srv = start(2);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SETEX", "s", "100", "v"]), ok());
    assert!((99..=100).contains(&int(&mut c, &["TTL", "s"])));
    assert_eq!(c.cmd(&["PSETEX", "p", "100000", "v"]), ok());
    assert!(int(&mut c, &["PTTL", "p"]) > 90_000);
    assert_eq!(
        c.cmd(&["SETEX", "s", "0", "v"]),
        err("ERR invalid expire time in 'setex' command")
    );
    assert_eq!(
        c.cmd(&["PSETEX", "s", "-1", "v"]),
        err("ERR invalid expire time in 'psetex' command")
    );
    // GETEX: the value, then the new deadline; PERSIST removes it.
    assert_eq!(c.cmd(&["GETEX", "s", "PXAT", "4102444800000"]), bulk("v"));
    assert_eq!(int(&mut c, &["PEXPIRETIME", "s"]), 4_102_444_800_000);
    assert_eq!(c.cmd(&["GETEX", "s", "PERSIST"]), bulk("v"));
    assert_eq!(int(&mut c, &["TTL", "s"]), -1);
    assert_eq!(c.cmd(&["GETEX", "s"]), bulk("v"));
    assert_eq!(c.cmd(&["GETEX", "nokey", "EX", "-1"]), Reply::Bulk(None));
    assert_eq!(
        c.cmd(&["GETEX", "s", "EX", "-1"]),
        err("ERR invalid expire time in 'getex' command")
    );
    assert_eq!(c.cmd(&["GETEX", "s", "NX"]), err("ERR syntax error"));
    assert_eq!(c.cmd(&["GETEX", "s", "EXAT", "1"]), bulk("v"));
    assert_eq!(c.cmd(&["GET", "s"]), Reply::Bulk(None));
    // EXPIRE and its conditions.
    assert_eq!(c.cmd(&["SET", "e", "v"]), ok());
    assert_eq!(int(&mut c, &["EXPIRE", "e", "100", "XX"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "e", "100", "GT"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "e", "100", "NX"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "e", "200", "NX"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "e", "200", "GT"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "e", "300", "LT"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "e", "150", "XX", "LT"]), 1);
    assert!((149..=150).contains(&int(&mut c, &["TTL", "e"])));
    assert_eq!(int(&mut c, &["PERSIST", "e"]), 1);
    assert_eq!(int(&mut c, &["PERSIST", "e"]), 0);
    assert_eq!(int(&mut c, &["PERSIST", "nokey"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "nokey", "100"]), 0);
    assert_eq!(
        c.cmd(&["EXPIRE", "e", "10", "NX", "XX"]),
        err("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "e", "10", "GT", "LT"]),
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "e", "10", "FOO"]),
        err("ERR Unsupported option FOO")
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "e", "ten"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "e", "9223372036854775807"]),
        err("ERR invalid expire time in 'expire' command")
    );
    assert_eq!(
        c.cmd(&["PEXPIRE", "e", "9223372036854775807"]),
        err("ERR invalid expire time in 'pexpire' command")
    );
    assert_eq!(
        c.cmd(&["TTL"]),
        err("ERR wrong number of arguments for 'ttl' command")
    );
    // A deadline in the past deletes the key, and says 1.
    assert_eq!(int(&mut c, &["EXPIRE", "e", "-1"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "e"]), 0);
    assert_eq!(c.cmd(&["SET", "e", "v"]), ok());
    assert_eq!(int(&mut c, &["PEXPIREAT", "e", "1"]), 1);
    assert_eq!(c.cmd(&["GET", "e"]), Reply::Bulk(None));
    srv.stop();
}

/// Keys that nobody reads again are reclaimed by the shards' sweeps; INFO's keyspace line and
/// the counters show it.
#[test]
fn the_sweep_reclaims_untouched_keys() {
    let mut cfg = config(2);
    cfg.expire_sweep_interval_ms = 10;
    cfg.expire_sweep_buckets = 64;
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    for i in 0..100 {
        let k = format!("p:{i}");
        assert_eq!(c.cmd(&["SET", &k, "v", "EX", "1000"]), ok());
    }
    assert_eq!(c.cmd(&["SET", "forever", "v"]), ok());
    let keyspace = |c: &mut Client| match c.cmd(&["INFO", "keyspace"]) {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        r => panic!("{r:?}"),
    };
    assert!(
        keyspace(&mut c).contains("db0:keys=101,expires=100,avg_ttl=0"),
        "{}",
        keyspace(&mut c)
    );
    for i in 0..500 {
        let k = format!("t:{i}");
        assert_eq!(c.cmd(&["SET", &k, "v", "PX", "100"]), ok());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if info_field(&mut c, "expired_keys") == 500 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not reclaimed: {}",
            keyspace(&mut c)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(keyspace(&mut c).contains("db0:keys=101,expires=100,avg_ttl=0"));
    assert_eq!(info_field(&mut c, "expiring_keys"), 100);
    assert_eq!(int(&mut c, &["DBSIZE"]), 101);
    // The lag histogram holds every reclaimed key in its last bucket.
    assert_eq!(info_field(&mut c, "expired_lag_lt_8192ms"), 500);
    let page = metrics(&srv);
    assert_eq!(metric(&page, "directkv_expired_keys_total", ""), 500);
    assert_eq!(metric(&page, "directkv_expiring_keys", ""), 100);
    srv.stop();
}
