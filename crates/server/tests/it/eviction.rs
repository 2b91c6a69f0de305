//! Eviction over real sockets (issue 20 item 2): a full server refuses writes under the
//! default `noeviction`; CONFIG SET maxmemory-policy allkeys-lru takes effect at once and
//! every write is then stored, `evicted_keys` grows in INFO and /metrics, INFO memory shows
//! the policy; a bad policy gets Redis's exact error and changes nothing.

use crate::common;

use common::{bulk, config, info_field, metric, metrics, ok, start_with, Client};
use directkv_proto::resp::Reply;
use directkv_server::ServerConfig;

/// Two shards of 4 MiB, without the datagram protocols.
fn server(policy: &str) -> directkv_server::Server {
    start_with(ServerConfig {
        memory_bytes: 8 << 20,
        udp: Some(false),
        ocsm: Some(false),
        maxmemory_policy: policy.into(),
        ..config(2)
    })
}

/// INFO's text field `name`.
fn info_text(c: &mut Client, name: &str) -> String {
    let text = match c.cmd(&["INFO", "memory"]) {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        r => panic!("{r:?}"),
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO has no {name}: {text}"))
        .to_string()
}

/// SETs `prefix:i` for i in `from..to` with 200-byte values, pipelined 100 at a time;
/// returns the error replies.
fn set_many(c: &mut Client, prefix: &str, from: u64, to: u64) -> Vec<String> {
    let value = [b'v'; 200];
    let mut errors = Vec::new();
    let mut i = from;
    while i < to {
        let end = (i + 100).min(to);
        for j in i..end {
            let k = format!("{prefix}:{j}");
            c.send(&[&b"SET"[..], k.as_bytes(), &value[..]]);
        }
        for _ in i..end {
            match c.read() {
                Reply::Simple(s) if s == "OK" => {}
                Reply::Error(e) => errors.push(e),
                r => panic!("SET: {r:?}"),
            }
        }
        i = end;
    }
    errors
}

fn get_policy(c: &mut Client) -> Reply {
    c.cmd(&["CONFIG", "GET", "maxmemory-policy"])
}

fn policy_reply(p: &str) -> Reply {
    Reply::Array(Some(vec![bulk("maxmemory-policy"), bulk(p)]))
}

#[test]
fn allkeys_lru_set_live_turns_out_of_memory_into_eviction() {
    let srv = server("noeviction");
    let mut c = Client::connect(&srv);
    assert_eq!(get_policy(&mut c), policy_reply("noeviction"));
    assert_eq!(info_text(&mut c, "maxmemory_policy"), "noeviction");
    // 8 MiB cannot hold 60000 values of 200 bytes: out-of-memory errors, nothing evicted.
    let errors = set_many(&mut c, "a", 0, 60_000);
    assert!(!errors.is_empty(), "the arena never filled");
    assert!(errors[0].starts_with("OOM"), "{}", errors[0]);
    assert_eq!(info_field(&mut c, "evicted_keys"), 0);

    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        ok()
    );
    assert_eq!(get_policy(&mut c), policy_reply("allkeys-lru"));
    assert_eq!(info_text(&mut c, "maxmemory_policy"), "allkeys-lru");
    let errors = set_many(&mut c, "b", 0, 60_000);
    assert!(
        errors.is_empty(),
        "{} errors, first {:?}",
        errors.len(),
        errors[0]
    );
    let evicted = info_field(&mut c, "evicted_keys");
    assert!(evicted > 0);
    // The newest keys are there; the keys counted are the ones written less the evicted.
    assert_eq!(c.cmd(&["GET", "b:59999"]), bulk(&"v".repeat(200)));
    let page = metrics(&srv);
    assert!(metric(&page, "directkv_evicted_keys_total", "") >= evicted);

    // Back to noeviction: out-of-memory again, nothing more evicted.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        ok()
    );
    let before = info_field(&mut c, "evicted_keys");
    let errors = set_many(&mut c, "c", 0, 60_000);
    assert!(!errors.is_empty());
    assert_eq!(info_field(&mut c, "evicted_keys"), before);
    srv.stop();
}

#[test]
fn volatile_ttl_evicts_only_keys_with_a_deadline() {
    let srv = server("volatile-ttl");
    let mut c = Client::connect(&srv);
    assert_eq!(get_policy(&mut c), policy_reply("volatile-ttl"));
    let value = "w".repeat(200);
    for i in 0..1000 {
        assert_eq!(c.cmd(&["SET", &format!("keep:{i}"), &value]), ok());
    }
    // Keys with a deadline, many more than fit: the evicted ones make room.
    let v = [b'v'; 200];
    for i in 0..60_000u64 {
        let k = format!("t:{i}");
        c.send(&[&b"SET"[..], k.as_bytes(), &v[..], b"EX", b"3600"]);
        if i % 100 == 99 {
            for _ in 0..100 {
                assert_eq!(c.read(), ok());
            }
        }
    }
    assert!(info_field(&mut c, "evicted_keys") > 0);
    for i in 0..1000 {
        assert_eq!(c.cmd(&["GET", &format!("keep:{i}")]), bulk(&value));
    }
    srv.stop();
}

#[test]
fn a_bad_policy_gets_redis_error_and_changes_nothing() {
    let srv = server("noeviction");
    let mut c = Client::connect(&srv);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "foo"]),
        Reply::Error(
            "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction".into()
        )
    );
    assert_eq!(get_policy(&mut c), policy_reply("noeviction"));
    // Redis has LFU, directkv has not: refused with its reason.
    match c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]) {
        Reply::Error(e) => assert!(e.contains("no LFU eviction"), "{e}"),
        r => panic!("{r:?}"),
    }
    // Any case, shown as Redis shows it.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "ALLKEYS-RANDOM"]),
        ok()
    );
    assert_eq!(get_policy(&mut c), policy_reply("allkeys-random"));
    // All or nothing: a bad pair refuses the good one before it.
    assert!(matches!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "maxmemory-policy",
            "volatile-lru",
            "timeout",
            "x"
        ]),
        Reply::Error(_)
    ));
    assert_eq!(get_policy(&mut c), policy_reply("allkeys-random"));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    srv.stop();
}

#[test]
fn the_configuration_file_names_the_policy() {
    let cfg = ServerConfig::from_toml("maxmemory_policy = \"volatile-lru\"\n").unwrap();
    assert_eq!(
        cfg.eviction_policy(),
        Some(directkv_engine::EvictionPolicy::VolatileLru)
    );
    cfg.validate().unwrap();
    let bad = ServerConfig::from_toml("maxmemory_policy = \"lru\"\n").unwrap();
    assert!(bad.validate().unwrap_err().contains("maxmemory_policy"));
    let bad = ServerConfig::from_toml("eviction_watermark = 0.9\n").unwrap();
    assert!(bad.validate().unwrap_err().contains("eviction_watermark"));
}

/// Keys named `{prefix}N` on shard `shard` of a two-shard server.
fn keys_on(prefix: &str, shard: u16, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| {
            directkv_proto::native::shard_of_hash(directkv_engine::key_hash(k.as_bytes()), 2)
                == shard
        })
        .take(n)
        .collect()
}

/// Issue 20: a key evicted by the check of a cross-shard MSET aborts a transaction that
/// watches it. The MSET asks shard 0 for more than its whole arena, so the check evicts every
/// key there (the watched one too) and the write is then refused: no batch of it ever runs on
/// shard 0. The check reports its evictions itself (`ShardCtx::check_atomic`); before, they
/// waited for the shard's next batch, which EXEC's look-up of its watched keys happens to be.
#[test]
fn a_key_evicted_by_a_refused_cross_shard_write_aborts_exec() {
    let srv = server("allkeys-lru");
    let mut c = Client::connect(&srv);
    let watched = &keys_on("watched:", 0, 1)[0];
    assert_eq!(c.cmd(&["SET", watched, "1"]), ok());
    assert_eq!(c.cmd(&["WATCH", watched]), ok());
    // Six values of 600 KB on shard 0 (an arena of 4 MiB with its index: they cannot fit
    // together) and one small key on shard 1.
    let big = vec![b'b'; 600_000];
    let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
    for k in keys_on("big:", 0, 6) {
        args.push(k.into_bytes());
        args.push(big.clone());
    }
    args.push(keys_on("small:", 1, 1)[0].clone().into_bytes());
    args.push(b"v".to_vec());
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    c.send(&args);
    match c.read() {
        Reply::Error(e) => assert!(e.starts_with("OOM"), "{e}"),
        r => panic!("the MSET was not refused: {r:?}"),
    }
    assert!(info_field(&mut c, "evicted_keys") > 0);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        ok()
    );
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SET", "after", "1"]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(None));
    assert_eq!(c.cmd(&["EXISTS", watched, "after"]), Reply::Integer(0));
    srv.stop();
}
