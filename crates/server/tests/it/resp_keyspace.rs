//! Keyspace commands over a real socket (TYPE TOUCH EXISTS DEL UNLINK RENAME RENAMENX COPY
//! MSETNX OBJECT MEMORY), with keys on different shards, hostile arguments, and concurrent
//! clients: RENAME, COPY and MSETNX across shards are never seen half done.

use crate::common;

use common::{bulk, ok, start, Client};
use directkv_proto::resp::Reply;

const SHARDS: usize = 3;

fn int(i: i64) -> Reply {
    Reply::Integer(i)
}

fn err(text: &str) -> Reply {
    Reply::Error(text.into())
}

/// The shard that owns `key` (the server's rule: the protocol's shard map over the key hash).
fn shard(key: &str) -> usize {
    usize::from(directkv_proto::native::shard_of_hash(
        directkv_engine::key_hash(key.as_bytes()),
        SHARDS as u16,
    ))
}

/// Two keys with `prefix` on different shards.
fn keys_on_two_shards(prefix: &str) -> (String, String) {
    let a = format!("{prefix}:0");
    let b = (1..)
        .map(|i| format!("{prefix}:{i}"))
        .find(|k| shard(k) != shard(&a))
        .expect("some key lands elsewhere");
    (a, b)
}

#[test]
fn keyspace_commands_across_shards() {
    let srv = start(SHARDS);
    let mut c = Client::connect(&srv);
    let (a, b) = keys_on_two_shards("k");
    assert_eq!(c.cmd(&["SET", &a, "va"]), ok());
    assert_eq!(c.cmd(&["TYPE", &a]), Reply::Simple("string".into()));
    assert_eq!(c.cmd(&["TYPE", &b]), Reply::Simple("none".into()));
    assert_eq!(c.cmd(&["TOUCH", &a, &b, &a]), int(2));
    assert_eq!(c.cmd(&["RENAME", &a, &b]), ok());
    assert_eq!(c.cmd(&["EXISTS", &a, &b, &b]), int(2));
    assert_eq!(c.cmd(&["GET", &b]), bulk("va"));
    assert_eq!(c.cmd(&["RENAME", &a, &b]), err("ERR no such key"));
    assert_eq!(c.cmd(&["COPY", &b, &a]), int(1));
    assert_eq!(c.cmd(&["COPY", &b, &a]), int(0));
    assert_eq!(c.cmd(&["SET", &b, "vb"]), ok());
    assert_eq!(c.cmd(&["COPY", &b, &a, "REPLACE"]), int(1));
    assert_eq!(
        c.cmd(&["MGET", &a, &b]),
        Reply::Array(Some(vec![bulk("vb"), bulk("vb")]))
    );
    assert_eq!(c.cmd(&["RENAMENX", &a, &b]), int(0));
    assert_eq!(c.cmd(&["DEL", &b]), int(1));
    assert_eq!(c.cmd(&["RENAMENX", &a, &b]), int(1));
    assert_eq!(c.cmd(&["MSETNX", &a, "1", &b, "2"]), int(0));
    assert_eq!(c.cmd(&["EXISTS", &a]), int(0));
    assert_eq!(c.cmd(&["DEL", &b]), int(1));
    assert_eq!(c.cmd(&["MSETNX", &a, "1", &b, "2"]), int(1));
    assert_eq!(
        c.cmd(&["MGET", &a, &b]),
        Reply::Array(Some(vec![bulk("1"), bulk("2")]))
    );
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", &a]), bulk("int"));
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "nope"]), Reply::Bulk(None));
    match c.cmd(&["MEMORY", "USAGE", &a]) {
        Reply::Integer(n) => assert!((2..64).contains(&n), "{n}"),
        r => panic!("{r:?}"),
    }
    let big = "x".repeat(1000);
    assert_eq!(c.cmd(&["SET", "big", &big]), ok());
    match c.cmd(&["MEMORY", "USAGE", "big"]) {
        // Its slab block (1024 bytes) and a pointer slot with its share of the bucket.
        Reply::Integer(n) => assert!((1024..1100).contains(&n), "{n}"),
        r => panic!("{r:?}"),
    }
    assert_eq!(c.cmd(&["MEMORY", "USAGE", "nope"]), Reply::Bulk(None));
    srv.stop();
}

#[test]
fn hostile_keyspace_arguments_get_errors_and_the_server_goes_on() {
    let srv = start(SHARDS);
    let mut c = Client::connect(&srv);
    let long = "k".repeat(300);
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    let arity = |name: &str| {
        err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ))
    };
    for (args, want) in [
        (vec!["RENAME", "k"], arity("rename")),
        (vec!["RENAMENX", "k", "a", "b"], arity("renamenx")),
        (vec!["COPY", "k"], arity("copy")),
        (vec!["MSETNX", "a", "1", "b"], arity("msetnx")),
        (vec!["TYPE"], arity("type")),
        (vec!["OBJECT"], arity("object")),
        (vec!["OBJECT", "ENCODING"], arity("object|encoding")),
        (vec!["MEMORY", "USAGE"], arity("memory|usage")),
        (
            vec!["COPY", "k", "d", "DB", "99999999999"],
            err("ERR value is not an integer or out of range"),
        ),
        (
            vec!["COPY", "k", "d", "DB", "-1"],
            err("ERR DB index is out of range"),
        ),
        (
            vec!["COPY", "k", "k"],
            err("ERR source and destination objects are the same"),
        ),
        (
            vec!["MEMORY", "USAGE", "k", "SAMPLES", "-5"],
            err("ERR syntax error"),
        ),
        (
            vec!["OBJECT", "REFCOUNTS", "k"],
            err("ERR unknown subcommand 'REFCOUNTS'. Try OBJECT HELP."),
        ),
    ] {
        assert_eq!(c.cmd(&args), want, "{args:?}");
    }
    // A key over key_len_max (256 bytes by default) is refused, not stored, not moved.
    match c.cmd(&["RENAME", "k", &long]) {
        Reply::Error(e) => assert!(e.contains("key"), "{e}"),
        r => panic!("{r:?}"),
    }
    match c.cmd(&["MSETNX", "a", "1", &long, "2"]) {
        Reply::Error(e) => assert!(e.contains("key"), "{e}"),
        r => panic!("{r:?}"),
    }
    assert_eq!(c.cmd(&["EXISTS", "a"]), int(0));
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    srv.stop();
}

/// One client moves a value back and forth between two keys on different shards; others read
/// both keys at once (MGET) and must always find exactly one of them, with the value.
#[test]
fn concurrent_renames_across_shards_are_never_seen_half_done() {
    let srv = start(SHARDS);
    let (a, b) = keys_on_two_shards("r");
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", &a, "the-value"]), ok());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut c = Client::connect(&srv);
                let mut reads = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) || reads < 100 {
                    let Reply::Array(Some(v)) = c.cmd(&["MGET", &a, &b]) else {
                        panic!("MGET");
                    };
                    let present: Vec<_> = v.iter().filter(|r| **r != Reply::Bulk(None)).collect();
                    assert_eq!(present, vec![&bulk("the-value")], "torn: {v:?}");
                    reads += 1;
                }
            });
        }
        let mut c = Client::connect(&srv);
        for i in 0..500 {
            let (from, to) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
            assert_eq!(c.cmd(&["RENAME", from, to]), ok());
            // COPY under the same races: the copy is the value or nothing.
            let r = c.cmd(&["COPY", to, "copy", "REPLACE"]);
            assert_eq!(r, int(1));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(c.cmd(&["GET", "copy"]), bulk("the-value"));
    assert_eq!(c.cmd(&["EXISTS", &a, &b]), int(1));
    srv.stop();
}

/// Clients race MSETNX over the same keys (on every shard): exactly one wins each round, and
/// every key holds the winner's value.
#[test]
fn concurrent_msetnx_across_shards_sets_all_or_none() {
    const CLIENTS: usize = 4;
    const ROUNDS: usize = 100;
    const KEYS: usize = 6;
    let srv = start(SHARDS);
    let barrier = std::sync::Barrier::new(CLIENTS);
    let wins: Vec<Vec<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let (srv, barrier) = (&srv, &barrier);
                s.spawn(move || {
                    let mut c = Client::connect(srv);
                    let mut won = Vec::new();
                    for round in 0..ROUNDS {
                        let keys: Vec<String> =
                            (0..KEYS).map(|i| format!("m{round}:{i}")).collect();
                        let me = t.to_string();
                        let mut args = vec!["MSETNX"];
                        for k in &keys {
                            args.push(k);
                            args.push(&me);
                        }
                        barrier.wait();
                        match c.cmd(&args) {
                            Reply::Integer(1) => won.push(round),
                            Reply::Integer(0) => {}
                            r => panic!("{r:?}"),
                        }
                    }
                    won
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut c = Client::connect(&srv);
    for round in 0..ROUNDS {
        let winners: Vec<usize> = (0..CLIENTS).filter(|t| wins[*t].contains(&round)).collect();
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let mut mget = vec!["MGET".to_string()];
        mget.extend((0..KEYS).map(|i| format!("m{round}:{i}")));
        let args: Vec<&str> = mget.iter().map(String::as_str).collect();
        let want = bulk(&winners[0].to_string());
        assert_eq!(
            c.cmd(&args),
            Reply::Array(Some(vec![want; KEYS])),
            "round {round}"
        );
    }
    srv.stop();
}

#[test]
fn rename_and_copy_keep_the_deadline_across_shards() {
    // Redis's RENAME and COPY carry the source's TTL; a plain SET of the destination before
    // does not leave its own deadline behind.
    let srv = start(SHARDS);
    let mut c = Client::connect(&srv);
    let (a, b) = keys_on_two_shards("ttl-move");
    let pxat = "4102444800123";
    assert_eq!(c.cmd(&["SET", &a, "v", "PXAT", pxat]), ok());
    assert_eq!(c.cmd(&["SET", &b, "old", "PXAT", "4102444999000"]), ok());
    assert_eq!(c.cmd(&["RENAME", &a, &b]), ok());
    assert_eq!(c.cmd(&["PEXPIRETIME", &b]), int(4102444800123));
    assert_eq!(c.cmd(&["GET", &b]), bulk("v"));
    assert_eq!(c.cmd(&["COPY", &b, &a]), int(1));
    assert_eq!(c.cmd(&["PEXPIRETIME", &a]), int(4102444800123));
    // A source without a deadline gives a destination without one.
    assert_eq!(c.cmd(&["SET", &a, "plain"]), ok());
    assert_eq!(c.cmd(&["COPY", &a, &b, "REPLACE"]), int(1));
    assert_eq!(c.cmd(&["PEXPIRETIME", &b]), int(-1));
    assert_eq!(c.cmd(&["RENAMENX", &b, "ttl-move:fresh"]), int(1));
    assert_eq!(c.cmd(&["PEXPIRETIME", "ttl-move:fresh"]), int(-1));
    srv.stop();
}
