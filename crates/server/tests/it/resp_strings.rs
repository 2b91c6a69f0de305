//! String and counter commands over a real socket, on one and on several shards.

use crate::common;
use common::{bulk, ok, start, Client};
use directkv_proto::resp::Reply;

#[test]
fn get_set_and_conditional_sets() {
    for shards in [1, 3] {
        let srv = start(shards);
        let mut c = Client::connect(&srv);
        assert_eq!(c.cmd(&["GET", "k"]), Reply::Bulk(None));
        assert_eq!(c.cmd(&["SET", "k", "v1"]), ok());
        assert_eq!(c.cmd(&["GET", "k"]), bulk("v1"));
        assert_eq!(c.cmd(&["SET", "k", "v2", "NX"]), Reply::Bulk(None));
        assert_eq!(c.cmd(&["SET", "k", "v2", "XX", "GET"]), bulk("v1"));
        assert_eq!(c.cmd(&["SET", "new", "x", "XX"]), Reply::Bulk(None));
        assert_eq!(c.cmd(&["GETSET", "k", "v3"]), bulk("v2"));
        assert_eq!(c.cmd(&["GETDEL", "k"]), bulk("v3"));
        assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Integer(0));
        assert_eq!(c.cmd(&["SET", "k", "v", "EX", "10"]), ok());
        assert_eq!(c.cmd(&["TTL", "k"]), Reply::Integer(10));
        assert_eq!(
            c.cmd(&["SET", "k", "v", "BOGUS"]),
            Reply::Error("ERR syntax error".into())
        );
        srv.stop();
    }
}

#[test]
fn multi_key_commands_cross_shards() {
    let srv = start(4);
    let mut c = Client::connect(&srv);
    let mut mset = vec!["MSET"];
    let keys: Vec<String> = (0..50).map(|i| format!("key:{i}")).collect();
    for k in &keys {
        mset.push(k);
        mset.push(k);
    }
    assert_eq!(c.cmd(&mset), ok());
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    mget.push("missing");
    match c.cmd(&mget) {
        Reply::Array(Some(v)) => {
            assert_eq!(v.len(), 51);
            for (i, r) in v[..50].iter().enumerate() {
                assert_eq!(r, &bulk(&keys[i]));
            }
            assert_eq!(v[50], Reply::Bulk(None));
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(50));
    let mut del = vec!["DEL"];
    del.extend(keys[..10].iter().map(String::as_str));
    del.push("missing");
    assert_eq!(c.cmd(&del), Reply::Integer(10));
    assert_eq!(
        c.cmd(&["EXISTS", "key:10", "key:0", "key:11"]),
        Reply::Integer(2)
    );
    // Only ASYNC or SYNC may follow FLUSHALL/FLUSHDB; anything else flushes nothing.
    for bad in [&["FLUSHALL", "bogus"][..], &["FLUSHDB", "ASYNC", "SYNC"]] {
        assert_eq!(c.cmd(bad), Reply::Error("ERR syntax error".into()));
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(40));
    assert_eq!(c.cmd(&["FLUSHDB", "sync"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(0));
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(c.cmd(&["FLUSHALL", "Async"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(0));
    assert_eq!(
        c.cmd(&["MSET", "a"]),
        Reply::Error("ERR wrong number of arguments for 'mset' command".into())
    );
    srv.stop();
}

#[test]
fn counters_are_decimal_strings() {
    let srv = start(2);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["INCR", "n"]), Reply::Integer(1));
    assert_eq!(c.cmd(&["INCRBY", "n", "41"]), Reply::Integer(42));
    assert_eq!(c.cmd(&["DECR", "n"]), Reply::Integer(41));
    assert_eq!(c.cmd(&["DECRBY", "n", "50"]), Reply::Integer(-9));
    assert_eq!(c.cmd(&["GET", "n"]), bulk("-9"));
    assert_eq!(
        c.cmd(&["INCRBY", "n", "x"]),
        Reply::Error("ERR value is not an integer or out of range".into())
    );
    assert_eq!(c.cmd(&["SET", "s", "abc"]), ok());
    assert_eq!(
        c.cmd(&["INCR", "s"]),
        Reply::Error("ERR value is not an integer or out of range".into())
    );
    // An empty string is a value, not a missing key: Redis refuses to count from it.
    assert_eq!(c.cmd(&["SET", "empty", ""]), ok());
    assert_eq!(
        c.cmd(&["INCR", "empty"]),
        Reply::Error("ERR value is not an integer or out of range".into())
    );
    assert_eq!(
        c.cmd(&["INCRBYFLOAT", "empty", "1"]),
        Reply::Error("ERR value is not a valid float".into())
    );
    assert_eq!(c.cmd(&["GET", "empty"]), bulk(""));
    assert_eq!(c.cmd(&["SET", "big", "9223372036854775807"]), ok());
    assert_eq!(
        c.cmd(&["INCR", "big"]),
        Reply::Error("ERR increment or decrement would overflow".into())
    );
    // Negating i64::MIN overflows before the key is read; Redis says so in its own words.
    assert_eq!(
        c.cmd(&["DECRBY", "nokey", "-9223372036854775808"]),
        Reply::Error("ERR decrement would overflow".into())
    );
    assert_eq!(c.cmd(&["EXISTS", "nokey"]), Reply::Integer(0));
    assert_eq!(
        c.cmd(&["INCRBY", "big", "-9223372036854775808"]),
        Reply::Integer(-1)
    );
    // Infinity is a float to Redis; the sum it makes is refused with a text of its own.
    for inc in ["inf", "-Infinity", "+INF"] {
        assert_eq!(
            c.cmd(&["INCRBYFLOAT", "f", inc]),
            Reply::Error("ERR increment would produce NaN or Infinity".into())
        );
    }
    assert_eq!(
        c.cmd(&["INCRBYFLOAT", "f", "nan"]),
        Reply::Error("ERR value is not a valid float".into())
    );
    assert_eq!(c.cmd(&["SET", "inf", "inf"]), ok());
    assert_eq!(
        c.cmd(&["INCRBYFLOAT", "inf", "1"]),
        Reply::Error("ERR increment would produce NaN or Infinity".into())
    );
    assert_eq!(c.cmd(&["EXISTS", "f"]), Reply::Integer(0));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "10.5"]), bulk("10.5"));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "0.1"]), bulk("10.6"));
    assert_eq!(c.cmd(&["APPEND", "s", "def"]), Reply::Integer(6));
    assert_eq!(c.cmd(&["STRLEN", "s"]), Reply::Integer(6));
    assert_eq!(c.cmd(&["STRLEN", "nope"]), Reply::Integer(0));
    srv.stop();
}

#[test]
fn pipelined_commands_answer_in_order() {
    let srv = start(3);
    let mut c = Client::connect(&srv);
    let mut bytes = Vec::new();
    for i in 0..2000 {
        let k = format!("p{}", i % 37);
        let a: Vec<&[u8]> = vec![b"INCR", k.as_bytes()];
        directkv_proto::resp::encode_command(&a, &mut bytes);
    }
    c.send_raw(&bytes);
    let mut seen = std::collections::HashMap::new();
    for i in 0..2000 {
        let n = seen.entry(i % 37).or_insert(0i64);
        *n += 1;
        assert_eq!(c.read(), Reply::Integer(*n));
    }
    srv.stop();
}
