//! Differential tests of transactions (MULTI, EXEC, DISCARD, WATCH, UNWATCH) against a real
//! redis-server, reply bytes compared (see `differential/mod.rs`): queued replies, refused
//! commands and EXECABORT, errors at run time inside EXEC's array, the errors of misplaced
//! transaction commands, and WATCH with a second client changing (or not changing) a watched
//! key, in RESP2 and RESP3, with directkv on several shards so that one transaction's keys are
//! on different shards.
//!
//! Not compared (deliberate differences): FLUSHALL of a watched key that did not exist (Redis
//! leaves the transaction alone, directkv aborts it: `shard/watches.rs`), and commands inside a
//! transaction that differ outside one too (SET's expiry options).

use crate::common;
use crate::differential;

use common::start_with;
use differential::{hello, Pair};
use directkv_testkit::peer::start_redis;
use directkv_testkit::raw::RawClient;

const SHARDS: usize = 3;

/// Scripts run by one client: every reply compared.
const SCRIPTS: &[&[&[&str]]] = &[
    // Queued replies and the array of results, with a run-time error in the middle.
    &[
        &["MULTI"],
        &["SET", "a", "1"],
        &["INCR", "a"],
        &["SET", "s", "text"],
        &["INCR", "s"],
        &["MSET", "k1", "v1", "k2", "v2", "k3", "v3"],
        &["MGET", "k1", "k2", "k3", "a", "nope"],
        &["DEL", "k1", "k2", "nope"],
        &["EXISTS", "k1", "k3"],
        &["GETSET", "a", "x"],
        &["APPEND", "a", "yz"],
        &["PING"],
        &["ECHO", "e"],
        &["DBSIZE"],
        &["EXEC"],
        &["GET", "a"],
    ],
    // A refused command (unknown, wrong arity) aborts EXEC; nothing queued runs.
    &[
        &["MULTI"],
        &["SET", "x", "1"],
        &["NOSUCHCOMMAND", "arg"],
        &["GET"],
        &["SET", "y", "1"],
        &["EXEC"],
        &["EXISTS", "x", "y"],
        &["MULTI"],
        &["SET", "x", "1"],
        &["MULTI", "extra"],
        &["EXEC"],
        &["EXISTS", "x"],
    ],
    // Misplaced transaction commands.
    &[
        &["EXEC"],
        &["DISCARD"],
        &["MULTI"],
        &["MULTI"],
        &["WATCH", "a"],
        &["SET", "n", "1"],
        &["EXEC"],
        &["GET", "n"],
        &["MULTI"],
        &["SET", "n", "2"],
        &["DISCARD"],
        &["GET", "n"],
        &["WATCH"],
        &["UNWATCH", "x"],
        &["UNWATCH"],
        &["MULTI"],
        &["EXEC"],
    ],
    // WATCH by the client itself: its own write before MULTI aborts; UNWATCH and DISCARD
    // forget the watch; a write that changes nothing (DEL of a missing key, SET NX on an
    // existing one, a failed INCR) does not abort.
    &[
        &["SET", "w", "1"],
        &["WATCH", "w"],
        &["SET", "w", "2"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        &["WATCH", "w"],
        &["SET", "w", "3"],
        &["UNWATCH"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        &["WATCH", "w"],
        &["MULTI"],
        &["DISCARD"],
        &["SET", "w", "4"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        &["SET", "t", "text"],
        &["WATCH", "w", "missing", "t"],
        &["DEL", "missing"],
        &["SET", "w", "5", "NX"],
        &["INCR", "t"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        &["WATCH", "w"],
        &["DEL", "w"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        &["SET", "w", "6"],
        &["WATCH", "w"],
        &["FLUSHALL"],
        &["MULTI"],
        &["PING"],
        &["EXEC"],
    ],
];

/// Two clients per server: `a` watches and runs the transaction, `b` writes meanwhile. Each
/// step: (which client, command).
const TWO_CLIENTS: &[(char, &[&str])] = &[
    ('b', &["SET", "acct", "10"]),
    ('a', &["WATCH", "acct", "other"]),
    ('b', &["SET", "acct", "11"]),
    ('a', &["MULTI"]),
    ('a', &["INCR", "acct"]),
    ('a', &["EXEC"]),
    ('a', &["GET", "acct"]),
    // A write after MULTI but before EXEC aborts too.
    ('a', &["WATCH", "acct"]),
    ('a', &["MULTI"]),
    ('a', &["INCR", "acct"]),
    ('b', &["INCRBY", "acct", "5"]),
    ('a', &["EXEC"]),
    // A write of another key does not.
    ('a', &["WATCH", "acct"]),
    ('b', &["SET", "unrelated", "1"]),
    ('b', &["GET", "acct"]),
    ('a', &["MULTI"]),
    ('a', &["INCR", "acct"]),
    ('a', &["SET", "other", "x"]),
    ('a', &["EXEC"]),
    // The other client's transaction touching the watched key aborts this one.
    ('a', &["WATCH", "other"]),
    ('b', &["MULTI"]),
    ('b', &["SET", "other", "y"]),
    ('b', &["EXEC"]),
    ('a', &["MULTI"]),
    ('a', &["GET", "other"]),
    ('a', &["EXEC"]),
    // UNWATCH queued inside the transaction comes too late.
    ('a', &["WATCH", "acct"]),
    ('b', &["SET", "acct", "1"]),
    ('a', &["MULTI"]),
    ('a', &["UNWATCH"]),
    ('a', &["GET", "acct"]),
    ('a', &["EXEC"]),
    // The final state.
    ('b', &["DEL", "acct"]),
    ('a', &["MGET", "acct", "other", "unrelated"]),
];

#[test]
fn transactions_match_redis_in_both_protocols() {
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
        for script in SCRIPTS {
            p.same(&["FLUSHALL"]);
            for cmd in *script {
                p.same(cmd);
            }
        }
        p.assert_none();
    }
    server.stop();
}

#[test]
fn watch_sees_another_clients_writes_as_redis_does() {
    let Some(redis) = start_redis() else {
        return;
    };
    let server = start_with(common::config(SHARDS));
    for resp3 in [false, true] {
        let label = if resp3 { "RESP3" } else { "RESP2" };
        let mut a = Pair::connect(server.addr(), redis.addr, &format!("{label} client a"));
        let mut b = Pair::connect(server.addr(), redis.addr, &format!("{label} client b"));
        if resp3 {
            a.same_after(&["HELLO", "3"], hello);
            b.same_after(&["HELLO", "3"], hello);
        }
        b.same(&["FLUSHALL"]);
        for (who, cmd) in TWO_CLIENTS {
            match who {
                'a' => a.same(cmd),
                _ => b.same(cmd),
            };
        }
        a.assert_none();
        b.assert_none();
    }
    server.stop();
}

/// A transaction pipelined in one write (as redis-py sends it): the same replies, read one
/// by one.
#[test]
fn a_pipelined_transaction_matches_redis() {
    let Some(redis) = start_redis() else {
        return;
    };
    let server = start_with(common::config(SHARDS));
    let script: &[&[&str]] = &[
        &["SET", "p", "1"],
        &["WATCH", "p"],
        &["MULTI"],
        &["INCR", "p"],
        &["SET", "q", "2"],
        &["BADCMD"],
        &["EXEC"],
        &["MULTI"],
        &["INCR", "p"],
        &["MGET", "p", "q"],
        &["EXEC"],
        &["WATCH", "p"],
        &["SET", "p", "5"],
        &["MULTI"],
        &["INCR", "p"],
        &["EXEC"],
        &["GET", "p"],
    ];
    let mut bytes = Vec::new();
    for cmd in script {
        let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        bytes.extend(directkv_testkit::raw::encode(&a));
    }
    let mut d = RawClient::connect(server.addr());
    let mut r = RawClient::connect(redis.addr);
    assert_eq!(d.cmd(&["FLUSHALL"]), r.cmd(&["FLUSHALL"]));
    d.send_raw(&bytes);
    r.send_raw(&bytes);
    for cmd in script {
        let (dr, rr) = (d.read(), r.read());
        assert_eq!(
            directkv_testkit::raw::show(&dr, 300),
            directkv_testkit::raw::show(&rr, 300),
            "{cmd:?}"
        );
    }
    server.stop();
}
