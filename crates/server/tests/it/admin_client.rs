//! CLIENT over real sockets (issue 20 item 3): LIST and INFO lines with the fields Redis
//! tools read, ID, SETNAME/GETNAME, SETINFO, NO-EVICT, and KILL in both forms, where a killed
//! connection is really closed and its slot released.

use crate::common;
use std::time::{Duration, Instant};

use common::{bulk, info_field, ok, start, Client};
use directkv_proto::resp::Reply;

fn text(r: Reply) -> String {
    match r {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        r => panic!("not a bulk string: {r:?}"),
    }
}

fn int(r: Reply) -> i64 {
    match r {
        Reply::Integer(n) => n,
        r => panic!("not an integer: {r:?}"),
    }
}

fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

/// `field=value` of a CLIENT LIST line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.trim_end()
        .split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// Polls `cond` until it holds or 10 seconds pass.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn list_and_info_show_every_connection_with_redis_fields() {
    let srv = start(2);
    let mut a = Client::connect(&srv);
    let mut b = Client::connect(&srv);
    let id_a = int(a.cmd(&["CLIENT", "ID"]));
    let id_b = int(b.cmd(&["CLIENT", "ID"]));
    assert_ne!(id_a, id_b);
    assert_eq!(a.cmd(&["CLIENT", "SETNAME", "alpha"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "GETNAME"]), bulk("alpha"));
    // b speaks RESP3 and runs a SET: its line shows both once the batch is done.
    assert!(matches!(b.cmd(&["HELLO", "3"]), Reply::Map(_)));
    assert_eq!(b.cmd(&["SET", "k", "v"]), ok());
    let list = text(a.cmd(&["CLIENT", "LIST"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    let la = lines
        .iter()
        .find(|l| field(l, "id") == id_a.to_string())
        .unwrap();
    let lb = lines
        .iter()
        .find(|l| field(l, "id") == id_b.to_string())
        .unwrap();
    for name in [
        "id",
        "addr",
        "laddr",
        "fd",
        "name",
        "age",
        "idle",
        "flags",
        "db",
        "sub",
        "psub",
        "multi",
        "qbuf",
        "qbuf-free",
        "obl",
        "oll",
        "omem",
        "tot-mem",
        "events",
        "cmd",
        "user",
        "resp",
    ] {
        field(la, name);
    }
    assert_eq!(field(la, "name"), "alpha");
    assert_eq!(field(la, "cmd"), "client|list");
    assert_eq!(field(la, "laddr"), srv.addr().to_string());
    assert_eq!(field(la, "flags"), "N");
    assert_eq!(field(la, "user"), "default");
    assert_eq!(field(la, "resp"), "2");
    assert!(field(la, "tot-mem").parse::<u64>().unwrap() > 0);
    assert_eq!(field(lb, "cmd"), "set");
    assert_eq!(field(lb, "resp"), "3");
    assert_eq!(field(lb, "name"), "");
    // TYPE and ID filters.
    assert_eq!(
        text(a.cmd(&["CLIENT", "LIST", "TYPE", "normal"]))
            .lines()
            .count(),
        2
    );
    assert_eq!(text(a.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"])), "");
    assert_eq!(
        a.cmd(&["CLIENT", "LIST", "TYPE", "x"]),
        err("ERR Unknown client type 'x'")
    );
    let only_b = text(a.cmd(&["CLIENT", "LIST", "ID", &id_b.to_string(), "999"]));
    assert_eq!(only_b.lines().count(), 1);
    assert_eq!(field(&only_b, "id"), id_b.to_string());
    assert_eq!(
        a.cmd(&["CLIENT", "LIST", "ID", "x"]),
        err("ERR Invalid client ID")
    );
    assert_eq!(a.cmd(&["CLIENT", "LIST", "ID"]), err("ERR syntax error"));
    // INFO: this connection's line alone.
    let info = text(a.cmd(&["CLIENT", "INFO"]));
    assert_eq!(info.lines().count(), 1);
    assert!(info.ends_with('\n'));
    assert_eq!(field(&info, "id"), id_a.to_string());
    assert_eq!(field(&info, "cmd"), "client|info");
    // HELLO reports the same id.
    match a.cmd(&["HELLO", "2"]) {
        Reply::Array(Some(items)) => assert_eq!(items[7], Reply::Integer(id_a)),
        r => panic!("{r:?}"),
    }
    srv.stop();
}

#[test]
fn setinfo_no_evict_and_errors_read_as_in_redis() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "SETINFO", "lib-ver", "5.0"]), ok());
    assert_eq!(
        c.cmd(&["CLIENT", "SETINFO", "lib-name", "a b"]),
        err("ERR lib-name cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "SETINFO", "x", "y"]),
        err("ERR Unrecognized option 'x'")
    );
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    let info = text(c.cmd(&["CLIENT", "INFO"]));
    assert_eq!(field(&info, "lib-name"), "redis-py");
    assert_eq!(field(&info, "lib-ver"), "5.0");
    assert_eq!(field(&info, "flags"), "e");
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "OFF"]), ok());
    assert_eq!(field(&text(c.cmd(&["CLIENT", "INFO"])), "flags"), "N");
    assert_eq!(
        c.cmd(&["CLIENT", "NO-EVICT", "maybe"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "a\nb"]),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "NO-EVICT"]),
        err("ERR wrong number of arguments for 'client|no-evict' command")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "NOPE"]),
        err("ERR unknown subcommand 'NOPE'. Try CLIENT HELP.")
    );
    assert!(matches!(c.cmd(&["CLIENT", "HELP"]), Reply::Array(Some(l)) if l.len() > 10));
    srv.stop();
}

#[test]
fn kill_closes_the_connection_and_releases_its_slot() {
    let srv = start(2);
    let mut admin = Client::connect(&srv);
    let mut victim = Client::connect(&srv);
    let mut other = Client::connect(&srv);
    let victim_id = int(victim.cmd(&["CLIENT", "ID"]));
    let victim_addr = field(&text(victim.cmd(&["CLIENT", "INFO"])), "addr").to_string();
    assert_eq!(info_field(&mut admin, "connected_clients"), 3);
    // The old form, by address.
    assert_eq!(admin.cmd(&["CLIENT", "KILL", &victim_addr]), ok());
    assert!(victim.closed(), "the killed connection is closed");
    eventually("the slot to be released", || {
        info_field(&mut admin, "connected_clients") == 2
    });
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", &victim_addr]),
        err("ERR No such client")
    );
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "ID", &victim_id.to_string()]),
        Reply::Integer(0)
    );
    // The new form, by id; and filters that match nothing.
    let other_id = int(other.cmd(&["CLIENT", "ID"]));
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]),
        Reply::Integer(0)
    );
    assert_eq!(
        admin.cmd(&[
            "CLIENT",
            "KILL",
            "ID",
            &other_id.to_string(),
            "USER",
            "default"
        ]),
        Reply::Integer(1)
    );
    assert!(other.closed());
    // SKIPME (default yes) spares the caller; LADDR matches every client of this port.
    let laddr = srv.addr().to_string();
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "LADDR", &laddr]),
        Reply::Integer(0)
    );
    for (args, e) in [
        (vec!["ID", "0"], "ERR client-id should be greater than 0"),
        (vec!["USER", "bob"], "ERR No such user 'bob'"),
        (vec!["TYPE", "x"], "ERR Unknown client type 'x'"),
        (vec!["SKIPME", "maybe"], "ERR syntax error"),
        (vec!["ID", "1", "ADDR"], "ERR syntax error"),
    ] {
        let mut cmd = vec!["CLIENT", "KILL"];
        cmd.extend(args);
        assert_eq!(admin.cmd(&cmd), err(e), "{cmd:?}");
    }
    // Killing oneself: the reply, then the close.
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "LADDR", &laddr, "SKIPME", "no"]),
        Reply::Integer(1)
    );
    assert!(admin.closed());
    let mut fresh = Client::connect(&srv);
    eventually("every killed slot to be released", || {
        info_field(&mut fresh, "connected_clients") == 1
    });
    assert_eq!(text(fresh.cmd(&["CLIENT", "LIST"])).lines().count(), 1);
    srv.stop();
}
