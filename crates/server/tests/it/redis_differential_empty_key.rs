//! The empty key against a real redis-server (issue 20): Redis accepts `""` as a key like any
//! other, and so does directkv (the engine stores it as a record: `index/bucket.rs`). A fixed
//! script of the string, keyspace, expiry and transaction commands on it, reply bytes
//! compared, on one shard and on several, in RESP2 and RESP3. Deadlines are absolute and far
//! in the future (EXPIREAT 2100), or relative and compared only by their reply (EXPIRE's 1),
//! so that timing cannot change a reply.

use crate::common;
use crate::differential;

use differential::Pair;
use directkv_testkit::peer::start_redis;
use directkv_testkit::raw::RawClient;

const SCRIPT: &[&[&str]] = &[
    &["GET", ""],
    &["EXISTS", ""],
    &["SET", "", "v"],
    &["GET", ""],
    &["EXISTS", "", "", "nope"],
    &["TYPE", ""],
    &["OBJECT", "ENCODING", ""],
    &["STRLEN", ""],
    &["APPEND", "", "w"],
    &["GETRANGE", "", "0", "-1"],
    &["SETRANGE", "", "1", "X"],
    &["GET", ""],
    &["INCR", ""],
    &["SET", "", "41"],
    &["INCR", ""],
    &["INCRBY", "", "-2"],
    &["DECR", ""],
    &["INCRBYFLOAT", "", "0.5"],
    &["SETBIT", "", "3", "1"],
    &["GETBIT", "", "3"],
    &["BITCOUNT", ""],
    &["SET", "", "v", "NX"],
    &["SET", "", "v2", "XX", "GET"],
    &["GETSET", "", "v3"],
    &["SETNX", "", "no"],
    &["EXPIRE", "", "10"],
    &["EXPIRE", "", "10", "NX"],
    &["PERSIST", ""],
    &["TTL", ""],
    &["EXPIREAT", "", "4102444800"],
    &["EXPIRETIME", ""],
    &["PEXPIRETIME", ""],
    &["GETEX", "", "PERSIST"],
    &["TTL", ""],
    &["KEYS", "*"],
    &["KEYS", ""],
    &["SCAN", "0"],
    &["SCAN", "0", "MATCH", ""],
    &["RANDOMKEY"],
    &["DBSIZE"],
    &["RENAME", "", "x"],
    &["EXISTS", ""],
    &["GET", "x"],
    &["RENAME", "x", ""],
    &["RENAMENX", "", ""],
    &["RENAME", "", ""],
    &["COPY", "", "c"],
    &["COPY", "c", "", "REPLACE"],
    &["MSET", "", "m0", "a", "m1", "b", "m2"],
    &["MGET", "", "a", "nope", "b", ""],
    &["MSETNX", "", "no", "z", "no"],
    &["EXISTS", "z"],
    &["DEL", "", "a", "b", "c"],
    &["DEL", ""],
    &["GET", ""],
    &["MSETNX", "", "yes", "z", "yes"],
    &["GETDEL", ""],
    &["GETDEL", ""],
    &["SET", "", "t"],
    &["UNLINK", "", "z"],
    &["SETEX", "", "100", "e"],
    &["TOUCH", ""],
    &["PSETEX", "", "100000", "p"],
    &["GET", ""],
    &["MULTI"],
    &["SET", "", "1"],
    &["INCR", ""],
    &["GET", ""],
    &["DEL", ""],
    &["EXEC"],
    &["WATCH", ""],
    &["SET", "", "w"],
    &["MULTI"],
    &["GET", ""],
    &["EXEC"],
    &["DBSIZE"],
    &["FLUSHALL"],
    &["GET", ""],
];

#[test]
fn the_empty_key_is_a_key_as_in_redis() {
    let Some(redis) = start_redis() else {
        return;
    };
    for (shards, resp3) in [(1, false), (3, true)] {
        let server = common::start(shards);
        let mut flush = RawClient::connect(redis.addr);
        assert_eq!(flush.cmd(&["FLUSHALL"]), b"+OK\r\n");
        let mut p = Pair::connect(server.addr(), redis.addr, "empty-key");
        if resp3 {
            let (d, r) = p.both(&[b"HELLO", b"3"]);
            assert!(d.starts_with(b"%") && r.starts_with(b"%"));
        }
        for args in SCRIPT {
            p.same(args);
        }
        p.assert_none();
        server.stop();
    }
}
