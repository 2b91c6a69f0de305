//! Transactions over real sockets (issue 20 item 4): queued replies, EXECABORT, run-time
//! errors inside EXEC, WATCH against another client on keys of other shards, DISCARD, the
//! limits, the counters, and the concurrency guarantees: no reader ever sees a cross-shard
//! transaction half applied, and WATCH retry loops of concurrent clients lose no increment.
//! The replies' exact bytes against Redis are `redis_differential_multi.rs`.

use crate::common;

use std::thread;

use common::{bulk, info_field, ok, start, start_with, Client};
use directkv_proto::resp::Reply;

const SHARDS: usize = 4;

/// The shard of `key` on a server of `SHARDS` shards (the server's rule: the protocol's shard
/// function over the engine's key hash).
fn shard(key: &str) -> usize {
    usize::from(directkv_proto::native::shard_of_hash(
        directkv_engine::key_hash(key.as_bytes()),
        SHARDS as u16,
    ))
}

/// `n` keys named `prefix:i`, each on a different shard.
fn keys_on_distinct_shards(prefix: &str, n: usize) -> Vec<String> {
    let mut taken = Vec::new();
    let mut keys = Vec::new();
    for i in 0.. {
        let k = format!("{prefix}:{i}");
        if !taken.contains(&shard(&k)) {
            taken.push(shard(&k));
            keys.push(k);
            if keys.len() == n {
                break;
            }
        }
    }
    keys
}

fn queued() -> Reply {
    Reply::Simple("QUEUED".into())
}

fn err(text: &str) -> Reply {
    Reply::Error(text.into())
}

#[test]
fn exec_runs_the_queue_and_errors_stay_inside_the_array() {
    let srv = start(SHARDS);
    let mut c = Client::connect(&srv);
    let k = keys_on_distinct_shards("k", 3);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", &k[0], "1"]), queued());
    assert_eq!(c.cmd(&["SET", &k[1], "text"]), queued());
    assert_eq!(c.cmd(&["INCR", &k[1]]), queued());
    assert_eq!(c.cmd(&["INCR", &k[0]]), queued());
    assert_eq!(c.cmd(&["MSET", &k[2], "m", &k[1], "n"]), queued());
    assert_eq!(c.cmd(&["MGET", &k[0], &k[1], &k[2]]), queued());
    assert_eq!(c.cmd(&["GET", &k[2]]), queued());
    // Not run until EXEC.
    let mut other = Client::connect(&srv);
    assert_eq!(
        other.cmd(&["EXISTS", &k[0], &k[1], &k[2]]),
        Reply::Integer(0)
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        Reply::Array(Some(vec![
            ok(),
            ok(),
            err("ERR value is not an integer or out of range"),
            Reply::Integer(2),
            ok(),
            Reply::Array(Some(vec![bulk("2"), bulk("n"), bulk("m")])),
            bulk("m"),
        ]))
    );
    assert_eq!(c.cmd(&["EXEC"]), err("ERR EXEC without MULTI"));
    assert_eq!(info_field(&mut c, "multi_exec"), 1);
    srv.stop();
}

#[test]
fn a_refused_command_discards_the_transaction() {
    let srv = start(SHARDS);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "a", "1"]), queued());
    assert_eq!(
        c.cmd(&["NOPE", "x"]),
        err("ERR unknown command 'NOPE', with args beginning with: 'x' ")
    );
    assert_eq!(
        c.cmd(&["SET", "b"]),
        err("ERR wrong number of arguments for 'set' command")
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.cmd(&["GET", "a"]), Reply::Bulk(None));
    // DISCARD drops the queue; the connection goes on as before.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "a", "1"]), queued());
    assert_eq!(c.cmd(&["DISCARD"]), ok());
    assert_eq!(c.cmd(&["GET", "a"]), Reply::Bulk(None));
    assert_eq!(c.cmd(&["DISCARD"]), err("ERR DISCARD without MULTI"));
    srv.stop();
}

/// A watched key on one shard, the transaction's key on another, a second client's write in
/// between: EXEC answers null and runs nothing; RESP3's null is `_`.
#[test]
fn watch_sees_another_clients_write_on_another_shard() {
    let srv = start(SHARDS);
    let k = keys_on_distinct_shards("w", 2);
    let (watched, written) = (&k[0], &k[1]);
    let mut a = Client::connect(&srv);
    let mut b = Client::connect(&srv);
    for resp3 in [false, true] {
        if resp3 {
            assert!(matches!(a.cmd(&["HELLO", "3"]), Reply::Map(_)));
        }
        assert_eq!(a.cmd(&["WATCH", watched]), ok());
        assert_eq!(b.cmd(&["SET", watched, "changed"]), ok());
        assert_eq!(a.cmd(&["MULTI"]), ok());
        assert_eq!(a.cmd(&["SET", written, "x"]), queued());
        let null = if resp3 {
            Reply::Null
        } else {
            Reply::Array(None)
        };
        assert_eq!(a.cmd(&["EXEC"]), null);
        assert_eq!(b.cmd(&["GET", written]), Reply::Bulk(None));
        // EXEC forgot the watch: the next transaction runs.
        assert_eq!(b.cmd(&["SET", watched, "again"]), ok());
        assert_eq!(a.cmd(&["MULTI"]), ok());
        assert_eq!(a.cmd(&["SET", written, "x"]), queued());
        assert_eq!(a.cmd(&["EXEC"]), Reply::Array(Some(vec![ok()])));
        assert_eq!(b.cmd(&["DEL", written]), Reply::Integer(1));
    }
    // An UNWATCH queued inside the transaction does not forget the watch before EXEC checks
    // it (Redis checks the watches before it runs any queued command).
    assert_eq!(a.cmd(&["WATCH", watched]), ok());
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["UNWATCH"]), queued());
    assert_eq!(a.cmd(&["SET", written, "y"]), queued());
    assert_eq!(b.cmd(&["SET", watched, "meanwhile"]), ok());
    assert_eq!(a.cmd(&["EXEC"]), Reply::Null);
    assert_eq!(b.cmd(&["GET", written]), Reply::Bulk(None));
    assert_eq!(info_field(&mut b, "multi_watch_aborted"), 3);
    srv.stop();
}

#[test]
fn the_limits_refuse_and_leave_the_connection_usable() {
    let srv = start_with(directkv_server::ServerConfig {
        multi_commands_max: 3,
        multi_bytes_max: 200,
        watch_keys_max: 2,
        ..common::config(SHARDS)
    });
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    for i in 0..3 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), queued());
    }
    assert_eq!(
        c.cmd(&["SET", "k3", "v"]),
        err("ERR transaction too long: more than multi_commands_max (3) queued commands")
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.cmd(&["EXISTS", "k0", "k1", "k2"]), Reply::Integer(0));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    let big = "x".repeat(300);
    assert_eq!(
        c.cmd(&["SET", "k", &big]),
        err("ERR transaction too large: more than multi_bytes_max (200) queued bytes")
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(
        c.cmd(&["WATCH", "a", "b", "c"]),
        err("ERR too many watched keys: more than watch_keys_max (2)")
    );
    // Nothing was watched: another client's write of `a` aborts nothing.
    let mut other = Client::connect(&srv);
    assert_eq!(other.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(Some(vec![])));
    assert_eq!(c.cmd(&["WATCH", "a", "b"]), ok());
    assert_eq!(
        c.cmd(&["WATCH", "c"]),
        err("ERR too many watched keys: more than watch_keys_max (2)")
    );
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "k", "v"]), queued());
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(Some(vec![ok()])));
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    srv.stop();
}

/// A client that leaves inside MULTI runs nothing; one that leaves while watching leaves no
/// watch behind that a later client could trip on.
#[test]
fn a_closed_connection_leaves_nothing_behind() {
    let srv = start(SHARDS);
    {
        let mut gone = Client::connect(&srv);
        assert_eq!(gone.cmd(&["WATCH", "x"]), ok());
        assert_eq!(gone.cmd(&["MULTI"]), ok());
        assert_eq!(gone.cmd(&["SET", "x", "1"]), queued());
    }
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["WATCH", "y"]), ok());
    assert_eq!(c.cmd(&["SET", "x", "2"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["GET", "x"]), queued());
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(Some(vec![bulk("2")])));
    srv.stop();
}

/// Transfers of 1 between two keys on different shards, from two clients, while readers read
/// both keys (MGET, and GETs inside a transaction): every read sums to the total.
#[test]
fn no_reader_sees_a_transfer_half_done() {
    const TOTAL: i64 = 1000;
    const TRANSFERS: usize = 2000;
    const READS: usize = 3000;
    let srv = start(SHARDS);
    let k = keys_on_distinct_shards("acct", 2);
    let (a, b) = (k[0].clone(), k[1].clone());
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", &a, &TOTAL.to_string()]), ok());
    assert_eq!(c.cmd(&["SET", &b, "0"]), ok());
    let addr = srv.addr();
    let movers: Vec<_> = (0..2)
        .map(|m| {
            let (a, b) = (a.clone(), b.clone());
            thread::spawn(move || {
                let mut c = Client::connect_addr(addr);
                let (from, to) = if m == 0 { (&a, &b) } else { (&b, &a) };
                for _ in 0..TRANSFERS {
                    // Pipelined, as redis-py sends a transaction.
                    for cmd in [&["MULTI"][..], &["DECR", from], &["INCR", to], &["EXEC"]] {
                        let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
                        c.send(&args);
                    }
                    assert_eq!(c.read(), ok());
                    assert_eq!(c.read(), queued());
                    assert_eq!(c.read(), queued());
                    match c.read() {
                        Reply::Array(Some(r)) if r.len() == 2 => {}
                        other => panic!("EXEC answered {other:?}"),
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (a, b) = (a.clone(), b.clone());
            thread::spawn(move || {
                let mut c = Client::connect_addr(addr);
                let int = |r: &Reply| match r {
                    Reply::Bulk(Some(v)) => std::str::from_utf8(v).unwrap().parse::<i64>().unwrap(),
                    other => panic!("not a number: {other:?}"),
                };
                for _ in 0..READS {
                    let values = if r == 0 {
                        match c.cmd(&["MGET", &a, &b]) {
                            Reply::Array(Some(v)) => v,
                            other => panic!("MGET answered {other:?}"),
                        }
                    } else {
                        c.cmd(&["MULTI"]);
                        c.cmd(&["GET", &a]);
                        c.cmd(&["GET", &b]);
                        match c.cmd(&["EXEC"]) {
                            Reply::Array(Some(v)) => v,
                            other => panic!("EXEC answered {other:?}"),
                        }
                    };
                    let sum = int(&values[0]) + int(&values[1]);
                    assert_eq!(sum, TOTAL, "a reader saw {values:?}");
                }
            })
        })
        .collect();
    for t in movers.into_iter().chain(readers) {
        t.join().unwrap();
    }
    assert_eq!(c.cmd(&["MGET", &a, &b]), {
        Reply::Array(Some(vec![bulk(&TOTAL.to_string()), bulk("0")]))
    });
    srv.stop();
}

/// The optimistic-locking loop redis-py's `transaction()` runs: WATCH, read, MULTI, write,
/// EXEC, again on a null reply. Two clients, each adding 1 to a counter many times with
/// GET + SET (not INCR): none of the increments is lost.
#[test]
fn watch_retry_loops_lose_no_increment() {
    const ROUNDS: usize = 500;
    let srv = start(SHARDS);
    let addr = srv.addr();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            thread::spawn(move || {
                let mut c = Client::connect_addr(addr);
                let mut retries = 0;
                for _ in 0..ROUNDS {
                    loop {
                        assert_eq!(c.cmd(&["WATCH", "counter"]), ok());
                        let n = match c.cmd(&["GET", "counter"]) {
                            Reply::Bulk(Some(v)) => String::from_utf8(v).unwrap().parse().unwrap(),
                            _ => 0u64,
                        };
                        assert_eq!(c.cmd(&["MULTI"]), ok());
                        assert_eq!(c.cmd(&["SET", "counter", &(n + 1).to_string()]), queued());
                        match c.cmd(&["EXEC"]) {
                            Reply::Array(Some(_)) => break,
                            Reply::Array(None) => retries += 1,
                            other => panic!("EXEC answered {other:?}"),
                        }
                    }
                }
                retries
            })
        })
        .collect();
    let retries: usize = workers.into_iter().map(|t| t.join().unwrap()).sum();
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["GET", "counter"]), bulk(&(2 * ROUNDS).to_string()));
    assert_eq!(info_field(&mut c, "multi_watch_aborted"), retries as u64);
    srv.stop();
}

/// INFO, DBSIZE and FLUSHALL inside a transaction run at their place.
#[test]
fn barriers_run_in_order_inside_exec() {
    let srv = start(SHARDS);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    for cmd in [
        &["SET", "b", "2"][..],
        &["DBSIZE"],
        &["FLUSHALL"],
        &["DBSIZE"],
        &["SET", "c", "3"],
        &["DBSIZE"],
    ] {
        assert_eq!(c.cmd(cmd), queued());
    }
    assert_eq!(
        c.cmd(&["EXEC"]),
        Reply::Array(Some(vec![
            ok(),
            Reply::Integer(2),
            ok(),
            Reply::Integer(0),
            ok(),
            Reply::Integer(1),
        ]))
    );
    srv.stop();
}
