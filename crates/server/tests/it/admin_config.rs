//! CONFIG over real sockets (issue 20 item 3): GET with globs and several patterns answers
//! every setting with its real value; SET changes behaviour at once (timeout, maxclients,
//! requirepass, maxmemory-clients), all or nothing, with Redis's error texts; RESETSTAT.

use crate::common;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{config, info_field, ok, start_with, Client};
use directkv_proto::resp::Reply;
use directkv_server::ServerConfig;

/// A server without the datagram protocols, so that a password may be set live.
fn server() -> directkv_server::Server {
    start_with(ServerConfig {
        udp: Some(false),
        ocsm: Some(false),
        ..config(2)
    })
}

fn pairs(r: Reply) -> HashMap<String, String> {
    let items = match r {
        Reply::Array(Some(items)) => items,
        r => panic!("not an array: {r:?}"),
    };
    assert_eq!(items.len() % 2, 0);
    items
        .chunks(2)
        .map(|kv| match (&kv[0], &kv[1]) {
            (Reply::Bulk(Some(k)), Reply::Bulk(Some(v))) => (
                String::from_utf8(k.clone()).unwrap(),
                String::from_utf8(v.clone()).unwrap(),
            ),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn get_answers_every_setting_by_glob() {
    let srv = server();
    let mut c = Client::connect(&srv);
    let all = pairs(c.cmd(&["CONFIG", "GET", "*"]));
    for key in ServerConfig::keys() {
        assert!(all.contains_key(&key.replace('_', "-")), "{key} missing");
    }
    let d = ServerConfig::default();
    assert_eq!(all["maxclients"], d.connections_max.to_string());
    assert_eq!(all["maxmemory"], (32u64 << 20).to_string());
    assert_eq!(all["maxmemory-clients"], d.maxmemory_clients.to_string());
    assert_eq!(all["value-len-max"], d.value_len_max.to_string());
    assert_eq!(all["proto-max-bulk-len"], d.value_len_max.to_string());
    assert_eq!(all["timeout"], "0");
    assert_eq!(all["requirepass"], "");
    assert_eq!(all["bind"], "127.0.0.1");
    assert_eq!(all["save"], "");
    assert_eq!(all["appendonly"], "no");
    assert_eq!(all["databases"], "1");
    assert_eq!(all["udp"], "no");
    let mem = pairs(c.cmd(&["CONFIG", "GET", "maxmemory*", "TIMEOUT", "timeout"]));
    let mut names: Vec<&str> = mem.keys().map(|k| k.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "TIMEOUT",
            "maxmemory",
            "maxmemory-clients",
            "maxmemory-policy"
        ]
    );
    assert_eq!(pairs(c.cmd(&["CONFIG", "GET", "max?lients"])).len(), 1);
    assert!(pairs(c.cmd(&["CONFIG", "GET", "nosuch"])).is_empty());
    assert_eq!(
        c.cmd(&["CONFIG", "GET"]),
        err("ERR wrong number of arguments for 'config|get' command")
    );
    srv.stop();
}

#[test]
fn set_changes_behaviour_at_once_and_refuses_what_cannot_change() {
    let srv = server();
    let mut admin = Client::connect(&srv);
    // maxclients: two open, the third refused; raised again, admitted.
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxclients", "2"]), ok());
    let mut second = Client::connect(&srv);
    assert_eq!(second.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let mut third = Client::connect(&srv);
    assert_eq!(third.read(), err("ERR max number of clients reached"));
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxclients", "10"]), ok());
    let mut fourth = Client::connect(&srv);
    assert_eq!(fourth.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(
        pairs(admin.cmd(&["CONFIG", "GET", "maxclients"]))["maxclients"],
        "10"
    );
    // timeout: a silent client is closed; the counter says why.
    assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "1"]), ok());
    // `second` was waiting for input before the change: the sweeper closes it.
    assert!(second.closed(), "an idle client is closed after timeout");
    // So is `admin`, silent as long; a new connection turns the timeout off.
    let mut admin = Client::connect(&srv);
    assert!(info_field(&mut admin, "idle_timeouts") >= 1);
    assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "0"]), ok());
    // requirepass: new connections must log in; connections already in stay in.
    assert_eq!(admin.cmd(&["CONFIG", "SET", "requirepass", "s3cret"]), ok());
    assert_eq!(admin.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let mut newcomer = Client::connect(&srv);
    assert_eq!(
        newcomer.cmd(&["GET", "k"]),
        err("NOAUTH Authentication required.")
    );
    assert_eq!(
        newcomer.cmd(&["AUTH", "wrong"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(newcomer.cmd(&["AUTH", "s3cret"]), ok());
    assert_eq!(newcomer.cmd(&["GET", "k"]), Reply::Bulk(None));
    assert_eq!(admin.cmd(&["CONFIG", "SET", "requirepass", ""]), ok());
    let mut open = Client::connect(&srv);
    assert_eq!(open.cmd(&["GET", "k"]), Reply::Bulk(None));
    // Refusals, each with Redis's text, and nothing applied by a refused SET.
    for (args, e) in [
        (vec!["port", "1"], "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"),
        (vec!["nosuch", "1"], "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"),
        (vec!["timeout", "x"], "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer"),
        (vec!["timeout", "7", "timeout", "8"], "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter"),
        (vec!["timeout", "7", "maxclients", "0"], "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive"),
        (vec!["timeout"], "ERR wrong number of arguments for 'config|set' command"),
    ] {
        let mut cmd = vec!["CONFIG", "SET"];
        cmd.extend(args);
        assert_eq!(admin.cmd(&cmd), err(e), "{cmd:?}");
    }
    assert_eq!(
        pairs(admin.cmd(&["CONFIG", "GET", "timeout"]))["timeout"],
        "0"
    );
    srv.stop();
}

#[test]
fn maxmemory_clients_set_live_evicts_but_not_a_no_evict_client() {
    let srv = server();
    let mut admin = Client::connect(&srv);
    assert_eq!(admin.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "maxmemory-clients", "64k"]),
        ok()
    );
    assert_eq!(
        pairs(admin.cmd(&["CONFIG", "GET", "maxmemory-clients"]))["maxmemory-clients"],
        "65536"
    );
    // A client sending half a megabyte in one command grows its input past the cap. (The
    // server closes it with input unread, so the close may arrive as a reset.)
    let mut big = std::net::TcpStream::connect(srv.addr()).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let value = "x".repeat(512 << 10);
    let cmd = format!(
        "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{value}\r\n",
        value.len()
    );
    let _ = big.write_all(cmd.as_bytes());
    let mut buf = [0u8; 1024];
    let closed = loop {
        match big.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) => break e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    };
    assert!(closed, "the client holding the most is evicted");
    eventually("the eviction to be counted", || {
        info_field(&mut admin, "evicted_clients") >= 1
    });
    assert_eq!(admin.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "maxmemory-clients", "0"]),
        ok()
    );
    srv.stop();
}

#[test]
fn resetstat_zeroes_the_counters_redis_resets() {
    let srv = server();
    let mut c = Client::connect(&srv);
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["GET", "k"]);
    c.cmd(&["GET", "nosuch"]);
    assert!(info_field(&mut c, "keyspace_hits") >= 1);
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(info_field(&mut c, "keyspace_hits"), 0);
    assert_eq!(info_field(&mut c, "keyspace_misses"), 0);
    assert_eq!(info_field(&mut c, "total_connections_received"), 0);
    // Only the commands since the reset (RESETSTAT and these INFOs) are counted.
    assert!(info_field(&mut c, "total_commands_processed") <= 6);
    assert_eq!(
        c.cmd(&["CONFIG", "RESETSTAT", "x"]),
        err("ERR wrong number of arguments for 'config|resetstat' command")
    );
    srv.stop();
}
