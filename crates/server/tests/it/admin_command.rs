//! COMMAND over real sockets (issue 20 item 3): COUNT, LIST, INFO, DOCS and GETKEYS are
//! generated from the command table, so every command the server takes is described.
//! (Byte-for-byte agreement with Redis on shared commands is in redis_differential_scripted.)

use crate::common;
use common::{bulk, start, Client};
use directkv_proto::resp::Reply;

fn array(r: Reply) -> Vec<Reply> {
    match r {
        Reply::Array(Some(items)) => items,
        r => panic!("not an array: {r:?}"),
    }
}

#[test]
fn every_listed_command_has_details_and_docs() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    let list = array(c.cmd(&["COMMAND", "LIST"]));
    assert_eq!(
        c.cmd(&["COMMAND", "COUNT"]),
        Reply::Integer(list.len() as i64)
    );
    assert_eq!(array(c.cmd(&["COMMAND"])).len(), list.len());
    for name in &list {
        let Reply::Bulk(Some(name)) = name else {
            panic!("{name:?}")
        };
        let name = String::from_utf8(name.clone()).unwrap();
        let info = array(c.cmd(&["COMMAND", "INFO", &name]));
        let entry = array(info[0].clone());
        assert_eq!(entry.len(), 10, "{name}");
        assert_eq!(entry[0], bulk(&name));
        let Reply::Integer(arity) = entry[1] else {
            panic!("{name}: {entry:?}")
        };
        assert_ne!(arity, 0, "{name}");
        let docs = array(c.cmd(&["COMMAND", "DOCS", &name]));
        assert_eq!(docs[0], bulk(&name));
        assert!(
            array(docs[1].clone()).contains(&bulk("summary")),
            "{name} has no summary"
        );
    }
    // Subcommands of the containers are listed with their own arity.
    let client = array(array(c.cmd(&["COMMAND", "INFO", "client"]))[0].clone());
    let subs = array(client[9].clone());
    assert!(subs.len() >= 8, "{subs:?}");
    assert_eq!(
        array(c.cmd(&["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"])),
        [bulk("a"), bulk("b")]
    );
    assert_eq!(
        array(c.cmd(&["COMMAND", "GETKEYS", "dkv.vget", "v", "u32"])),
        [bulk("v")]
    );
    assert!(array(c.cmd(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "string"])).len() >= 10);
    assert_eq!(
        array(c.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "dkv.v*"])),
        [bulk("dkv.vset"), bulk("dkv.vget")]
    );
    srv.stop();
}

#[test]
fn time_and_lastsave_answer_the_clock_and_the_start() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let t = array(c.cmd(&["TIME"]));
    let secs: i64 = match &t[0] {
        Reply::Bulk(Some(b)) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        r => panic!("{r:?}"),
    };
    assert!((secs - now).abs() <= 5);
    let Reply::Integer(last) = c.cmd(&["LASTSAVE"]) else {
        panic!()
    };
    assert!(last <= secs && now - last < 600);
    srv.stop();
}

#[test]
fn shutdown_stops_the_server_and_save_is_refused() {
    let srv = start(1);
    let mut c = Client::connect(&srv);
    // With appendonly no there is nothing to save into: refused, and this connection closed
    // (SHUTDOWN SAVE always closes it, `resp/cmd/save.rs`).
    assert!(
        matches!(c.cmd(&["SHUTDOWN", "SAVE"]), Reply::Error(e) if e.contains("persistence is off"))
    );
    assert!(!srv.shutdown_requested());
    let mut c = Client::connect(&srv);
    c.send(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(c.closed(), "SHUTDOWN closes the connection without a reply");
    assert!(srv.shutdown_requested());
    srv.stop();
}
