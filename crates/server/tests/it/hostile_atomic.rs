//! Multi-key writes are all or nothing (issue 19 item 9): at out-of-memory MSET once answered
//! `-OOM` but stored 10 of its 20 keys, and an MSET holding one over-long key answered an error
//! but stored the other keys. Here, over real sockets and with keys on several shards: a refused
//! MSET stores none of its keys; another client never sees a cross-shard MSET half applied;
//! a client that leaves right after sending one leaves the server fully usable; and the commands
//! pipelined around an MSET keep their order and meaning.

use crate::common;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{bulk, config, ok, start_with, Client};
use directkv_proto::resp::Reply;
use directkv_server::ServerConfig;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// Value size of the out-of-memory test: a 4 KiB slab block each.
const VALUE_LEN: usize = 4000;
/// How long a test waits for the server to notice something.
const DEADLINE: Duration = Duration::from_secs(20);

/// The shard of `key` in a server of `shards` shards (the rule the server and the native
/// protocol's shard map share).
fn shard_of(key: &[u8], shards: u16) -> u16 {
    directkv_proto::native::shard_of_hash(directkv_engine::key_hash(key), shards)
}

/// Two keys named `{prefix}N` on shards 0 and 1 of a two-shard server.
fn keys_on_two_shards(prefix: &str) -> (String, String) {
    let mut on = [None, None];
    for i in 0.. {
        let k = format!("{prefix}{i}");
        let s = usize::from(shard_of(k.as_bytes(), 2));
        if on[s].is_none() {
            on[s] = Some(k);
        }
        if let [Some(a), Some(b)] = &on {
            return (a.clone(), b.clone());
        }
    }
    unreachable!()
}

fn dbsize(c: &mut Client) -> i64 {
    match c.cmd(&["DBSIZE"]) {
        Reply::Integer(n) => n,
        r => panic!("DBSIZE answered {r:?}"),
    }
}

fn exists(c: &mut Client, keys: &[String]) -> i64 {
    let mut args = vec!["EXISTS"];
    args.extend(keys.iter().map(String::as_str));
    match c.cmd(&args) {
        Reply::Integer(n) => n,
        r => panic!("EXISTS answered {r:?}"),
    }
}

/// SETs `count` keys `{prefix}N` of `VALUE_LEN` bytes, pipelined by a hundred; returns the names
/// of the ones stored (the others were refused for memory).
fn fill(c: &mut Client, prefix: &str, count: usize) -> Vec<String> {
    let value = vec![b'f'; VALUE_LEN];
    let mut stored = Vec::new();
    for chunk in (0..count).collect::<Vec<_>>().chunks(100) {
        for i in chunk {
            c.send(&[b"SET", format!("{prefix}{i}").as_bytes(), &value]);
        }
        for i in chunk {
            match c.read() {
                r if r == ok() => stored.push(format!("{prefix}{i}")),
                Reply::Error(e) => assert_eq!(e, OOM),
                r => panic!("SET answered {r:?}"),
            }
        }
    }
    stored
}

#[test]
fn mset_of_20_keys_at_out_of_memory_stores_none_of_them() {
    // Two shards of the smallest arena: about a thousand 4 KiB values fill both.
    let srv = start_with(ServerConfig {
        memory_bytes: 8 << 20,
        ..config(2)
    });
    let mut c = Client::connect(&srv);
    let stored = fill(&mut c, "fill", 4000);
    assert!(stored.len() < 4000, "the arena never ran out of memory");
    // Room for a few of the MSET's values on each shard, not for all twenty.
    let freed: Vec<String> = stored.iter().take(8).cloned().collect();
    let mut del = vec!["DEL"];
    del.extend(freed.iter().map(String::as_str));
    assert_eq!(c.cmd(&del), Reply::Integer(8));
    let before = dbsize(&mut c);

    let value = vec![b'm'; VALUE_LEN];
    let keys: Vec<String> = (0..20).map(|i| format!("mset{i}")).collect();
    let shards: std::collections::HashSet<u16> =
        keys.iter().map(|k| shard_of(k.as_bytes(), 2)).collect();
    assert_eq!(shards.len(), 2, "the MSET spans both shards");
    let mut args: Vec<&[u8]> = vec![b"MSET"];
    for k in &keys {
        args.push(k.as_bytes());
        args.push(&value);
    }
    c.send(&args);
    assert_eq!(c.read(), Reply::Error(OOM.into()));
    assert_eq!(exists(&mut c, &keys), 0, "a refused MSET stored some keys");
    assert_eq!(dbsize(&mut c), before);
    assert_eq!(c.cmd(&["GET", "mset0"]), Reply::Bulk(None));

    // The server is still usable, and an MSET that fits is stored whole.
    assert_eq!(c.cmd(&["MSET", "small-a", "1", "small-b", "2"]), ok());
    assert_eq!(
        c.cmd(&["MGET", "small-a", "small-b"]),
        Reply::Array(Some(vec![bulk("1"), bulk("2")]))
    );
    srv.stop();
}

#[test]
fn mset_with_one_over_long_key_or_value_stores_nothing() {
    let srv = start_with(ServerConfig {
        value_len_max: 1000,
        ..config(2)
    });
    let mut c = Client::connect(&srv);
    let long_key = "k".repeat(300);
    let big = "x".repeat(1001);
    let single_key_error = c.cmd(&["SET", &long_key, "v"]);
    let single_value_error = c.cmd(&["SET", "k", &big]);
    assert!(matches!(&single_key_error, Reply::Error(e) if e.contains("key_len_max")));
    assert!(matches!(&single_value_error, Reply::Error(e) if e.contains("value_len_max")));

    let keys: Vec<String> = (0..10).map(|i| format!("good{i}")).collect();
    for (bad_key, bad_value, expected) in [
        (long_key.as_str(), "v", &single_key_error),
        ("bad", big.as_str(), &single_value_error),
    ] {
        let mut args: Vec<&str> = vec!["MSET"];
        for k in &keys[..5] {
            args.extend([k.as_str(), "v"]);
        }
        args.extend([bad_key, bad_value]);
        for k in &keys[5..] {
            args.extend([k.as_str(), "v"]);
        }
        assert_eq!(&c.cmd(&args), expected, "the same error as a single SET");
        assert_eq!(
            exists(&mut c, &keys),
            0,
            "an MSET with a bad argument stored keys"
        );
        assert_eq!(dbsize(&mut c), 0);
    }
    srv.stop();
}

#[test]
fn another_client_never_sees_a_cross_shard_mset_or_del_half_applied() {
    let srv = start_with(config(2));
    let (a, b) = keys_on_two_shards("iso");
    let mut w = Client::connect(&srv);
    assert_eq!(w.cmd(&["MSET", &a, "0", &b, "0"]), ok());
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (done, a, b) = (done.clone(), a.clone(), b.clone());
        let mut r = Client::connect(&srv);
        std::thread::spawn(move || {
            let (mut reads, mut torn) = (0u64, Vec::new());
            while !done.load(Ordering::Relaxed) || reads == 0 {
                match r.cmd(&["MGET", &a, &b]) {
                    Reply::Array(Some(v)) if v.len() == 2 => {
                        if v[0] != v[1] && torn.len() < 5 {
                            torn.push(v);
                        }
                    }
                    r => panic!("MGET answered {r:?}"),
                }
                reads += 1;
            }
            (reads, torn)
        })
    };
    for i in 1..=3000 {
        if i % 5 == 0 {
            // DEL of keys on two shards is a multi-key write too: both gone at once.
            assert_eq!(w.cmd(&["DEL", &a, &b]), Reply::Integer(2));
            continue;
        }
        let i = i.to_string();
        assert_eq!(w.cmd(&["MSET", &a, &i, &b, &i]), ok());
    }
    done.store(true, Ordering::Relaxed);
    let (reads, torn) = reader.join().unwrap();
    assert!(reads > 0);
    assert!(torn.is_empty(), "MGET saw a half-applied MSET: {torn:?}");
    srv.stop();
}

#[test]
fn a_client_that_leaves_right_after_a_cross_shard_mset_leaves_the_server_usable() {
    let srv = start_with(config(2));
    let keys: Vec<String> = (0..32).map(|i| format!("gone{i}")).collect();
    for round in 0..50 {
        let mut c = Client::connect(&srv);
        let v = round.to_string();
        let mut args: Vec<&str> = vec!["MSET"];
        for k in &keys {
            args.extend([k.as_str(), v.as_str()]);
        }
        let mut bytes = Vec::new();
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        directkv_proto::resp::encode_command(&a, &mut bytes);
        c.send_raw(&bytes);
        drop(c);
    }
    // Every shard still serves: clients on both shards (connections alternate) read and write,
    // and every MGET sees one MSET whole. The departed clients' MSETs may still be running
    // (their commands were read before their connections closed), so "final" wins only once
    // they are done: poll for it with a deadline.
    let start = Instant::now();
    let mut round = 0;
    loop {
        let mut c = Client::connect(&srv);
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
        let mut args: Vec<&str> = vec!["MSET"];
        for k in &keys {
            args.extend([k.as_str(), "final"]);
        }
        assert_eq!(c.cmd(&args), ok());
        let mut get: Vec<&str> = vec!["MGET"];
        get.extend(keys.iter().map(String::as_str));
        let values = match c.cmd(&get) {
            Reply::Array(Some(v)) => v,
            r => panic!("MGET answered {r:?}"),
        };
        assert!(
            values.iter().all(|r| *r == values[0]),
            "an MSET seen half applied: {values:?}"
        );
        assert_eq!(dbsize(&mut c), keys.len() as i64);
        round += 1;
        if values[0] == bulk("final") && round >= 4 {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the departed clients' MSETs never finished"
        );
    }
    srv.stop();
}

#[test]
fn commands_pipelined_around_an_mset_keep_their_order() {
    let srv = start_with(config(2));
    let (a, b) = keys_on_two_shards("pipe");
    let mut c = Client::connect(&srv);
    let long_key = "k".repeat(300);
    let cmds: Vec<Vec<&str>> = vec![
        vec!["SET", &a, "1"],
        vec!["MSET", &a, "2", &b, "2"],
        vec!["GET", &a],
        vec!["MSET", &a, "3", &long_key, "3"],
        vec!["GET", &a],
        vec!["SET", &b, "4"],
        vec!["MGET", &a, &b],
    ];
    let mut bytes = Vec::new();
    for cmd in &cmds {
        let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        directkv_proto::resp::encode_command(&a, &mut bytes);
    }
    c.send_raw(&bytes);
    assert_eq!(c.read(), ok());
    assert_eq!(c.read(), ok());
    assert_eq!(c.read(), bulk("2"));
    assert!(matches!(c.read(), Reply::Error(e) if e.contains("key_len_max")));
    assert_eq!(c.read(), bulk("2"));
    assert_eq!(c.read(), ok());
    assert_eq!(c.read(), Reply::Array(Some(vec![bulk("2"), bulk("4")])));
    srv.stop();
}

#[test]
fn the_server_stops_while_cross_shard_msets_are_in_flight() {
    let srv = start_with(config(2));
    let keys: Vec<String> = (0..16).map(|i| format!("stop{i}")).collect();
    let started = Arc::new(std::sync::Barrier::new(5));
    let writers: Vec<_> =
        (0..4)
            .map(|_| {
                let mut c = Client::connect(&srv);
                let (keys, started) = (keys.clone(), started.clone());
                std::thread::spawn(move || {
                    let mut args: Vec<&str> = vec!["MSET"];
                    for k in &keys {
                        args.extend([k.as_str(), "v"]);
                    }
                    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
                    let mut bytes = Vec::new();
                    for _ in 0..64 {
                        directkv_proto::resp::encode_command(&a, &mut bytes);
                    }
                    started.wait();
                    // Pipelines of MSETs until the server goes away, their replies read meanwhile.
                    let mut w = c.writer();
                    let writer = std::thread::spawn(move || {
                        while std::io::Write::write_all(&mut w, &bytes).is_ok() {}
                    });
                    while !c.closed() {}
                    writer.join().unwrap();
                })
            })
            .collect();
    started.wait();
    // Some MSETs have run: the server is mid-stream.
    let mut c = Client::connect(&srv);
    let start = Instant::now();
    while dbsize(&mut c) == 0 {
        assert!(start.elapsed() < DEADLINE, "no MSET ran");
    }
    drop(c);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        srv.stop();
        let _ = tx.send(());
    });
    rx.recv_timeout(DEADLINE)
        .expect("the server stops with cross-shard MSETs in flight (no shard left parked)");
    for w in writers {
        w.join().unwrap();
    }
}
