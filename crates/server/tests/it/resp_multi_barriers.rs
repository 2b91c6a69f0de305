//! DBSIZE, FLUSHALL, FLUSHDB and INFO inside MULTI/EXEC (issue 20 item 4): they need every
//! shard, and a transaction that holds one holds every shard for its whole length, so no other
//! client's command runs between its commands. A writer on another connection sets keys one
//! round trip at a time (so its keys are written in their order) while transactions count,
//! flush and count again: every transaction's counts must agree with one cut of the writer's
//! history, the keys before the cut all gone and those after it all present. Before the
//! barriers ran inside the transaction's exclusive section, the writer's keys landed between
//! a transaction's commands (a second DBSIZE above 1, keys after the count flushed).

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{info_field, ok, start, Client};
use directkv_proto::resp::Reply;

const SHARDS: usize = 4;

fn queued() -> Reply {
    Reply::Simple("QUEUED".into())
}

fn writer_key(i: usize) -> String {
    format!("w:{i}")
}

/// How many of `writer_key(from..to)` exist (one EXISTS per 500 keys).
fn existing(c: &mut Client, from: usize, to: usize) -> usize {
    let mut n = 0;
    let mut i = from;
    while i < to {
        let end = (i + 500).min(to);
        let keys: Vec<String> = (i..end).map(writer_key).collect();
        let mut args = vec!["EXISTS"];
        args.extend(keys.iter().map(String::as_str));
        match c.cmd(&args) {
            Reply::Integer(k) => n += k as usize,
            other => panic!("EXISTS answered {other:?}"),
        }
        i = end;
    }
    n
}

/// Waits (with a deadline) until `acked` reaches `n`.
fn wait_for(acked: &AtomicUsize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.load(Ordering::Acquire) < n {
        assert!(Instant::now() < deadline, "the writer made no progress");
        thread::yield_now();
    }
}

#[test]
fn dbsize_and_flushall_inside_exec_see_no_other_client_in_between() {
    const ROUNDS: usize = 30;
    let srv = start(SHARDS);
    let addr = srv.addr();
    let stop = Arc::new(AtomicBool::new(false));
    // Keys w:0 .. w:acked-1 have been written (their SET answered).
    let acked = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (stop, acked) = (stop.clone(), acked.clone());
        thread::spawn(move || {
            let mut c = Client::connect_addr(addr);
            let mut i = 0;
            while !stop.load(Ordering::Acquire) {
                assert_eq!(c.cmd(&["SET", &writer_key(i), "x"]), ok());
                i += 1;
                acked.store(i, Ordering::Release);
            }
        })
    };
    let mut c = Client::connect(&srv);
    // Keys of the writer that no transaction has flushed yet start here.
    let mut cut_before = 0usize;
    for round in 0..ROUNDS {
        wait_for(&acked, cut_before + 5);
        assert_eq!(c.cmd(&["MULTI"]), ok());
        for cmd in [
            &["SET", "a", "1"][..],
            &["DBSIZE"],
            &["FLUSHALL"],
            &["SET", "b", "1"],
            &["DBSIZE"],
        ] {
            assert_eq!(c.cmd(cmd), queued());
        }
        let replies = match c.cmd(&["EXEC"]) {
            Reply::Array(Some(r)) => r,
            other => panic!("EXEC answered {other:?}"),
        };
        let after = acked.load(Ordering::Acquire);
        let int = |r: &Reply| match r {
            Reply::Integer(n) => *n as usize,
            other => panic!("DBSIZE answered {other:?}"),
        };
        assert_eq!(replies[0], ok());
        assert_eq!(replies[2], ok());
        assert_eq!(replies[3], ok());
        // Only `b`: no other client's key between FLUSHALL and this DBSIZE.
        assert_eq!(replies[4], Reply::Integer(1), "round {round}: {replies:?}");
        // `a`, the previous round's `b`, and the writer's keys since the last flush: the
        // writer's first `cut - cut_before` of them, all written before the transaction.
        let others = int(&replies[1]) - 1 - usize::from(round > 0);
        let cut = cut_before + others;
        // The writer's one SET in flight may have been written (and counted) before its
        // reply counted it in `acked`.
        assert!(
            cut <= after + 1,
            "round {round}: counted {cut} keys, {after} written"
        );
        // Those are gone, and every key written since (after the transaction) is there.
        assert_eq!(existing(&mut c, cut_before, cut), 0, "round {round}");
        let after = after.max(cut);
        assert_eq!(existing(&mut c, cut, after), after - cut, "round {round}");
        cut_before = cut;
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    srv.stop();
}

/// FLUSHALL inside a transaction marks another client's watch as it does outside one.
#[test]
fn flushall_inside_exec_aborts_another_clients_watch() {
    let srv = start(SHARDS);
    let mut a = Client::connect(&srv);
    let mut b = Client::connect(&srv);
    assert_eq!(a.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(b.cmd(&["WATCH", "k"]), ok());
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["FLUSHDB"]), queued());
    assert_eq!(a.cmd(&["DBSIZE"]), queued());
    assert_eq!(
        a.cmd(&["EXEC"]),
        Reply::Array(Some(vec![ok(), Reply::Integer(0)]))
    );
    assert_eq!(b.cmd(&["MULTI"]), ok());
    assert_eq!(b.cmd(&["SET", "k", "2"]), queued());
    assert_eq!(b.cmd(&["EXEC"]), Reply::Array(None));
    assert_eq!(b.cmd(&["EXISTS", "k"]), Reply::Integer(0));
    srv.stop();
}

/// A transaction whose watched key changed runs nothing, its FLUSHALL included.
#[test]
fn an_aborted_transaction_does_not_flush() {
    let srv = start(SHARDS);
    let mut a = Client::connect(&srv);
    let mut b = Client::connect(&srv);
    assert_eq!(a.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(a.cmd(&["WATCH", "k"]), ok());
    assert_eq!(b.cmd(&["SET", "k", "2"]), ok());
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["FLUSHALL"]), queued());
    assert_eq!(a.cmd(&["EXEC"]), Reply::Array(None));
    assert_eq!(a.cmd(&["DBSIZE"]), Reply::Integer(1));
    srv.stop();
}

/// INFO inside a transaction reports the keys as the transaction left them at its place, on a
/// server of one shard (nothing to park) and of several.
#[test]
fn info_inside_exec_sees_the_transactions_own_writes() {
    for shards in [1, SHARDS] {
        let srv = start(shards);
        let mut c = Client::connect(&srv);
        assert_eq!(c.cmd(&["MULTI"]), ok());
        for cmd in [
            &["MSET", "x", "1", "y", "2", "z", "3"][..],
            &["INFO", "keyspace"],
            &["DEL", "x"],
            &["INFO", "keyspace"],
            &["FLUSHALL", "ASYNC"],
            &["INFO", "nosuchsection"],
        ] {
            assert_eq!(c.cmd(cmd), queued());
        }
        let replies = match c.cmd(&["EXEC"]) {
            Reply::Array(Some(r)) => r,
            other => panic!("EXEC answered {other:?}"),
        };
        let text = |r: &Reply| match r {
            Reply::Bulk(Some(v)) => String::from_utf8(v.clone()).unwrap(),
            other => panic!("INFO answered {other:?}"),
        };
        assert_eq!(replies.len(), 6);
        assert!(text(&replies[1]).contains("db0:keys=3,"), "{replies:?}");
        assert_eq!(replies[2], Reply::Integer(1));
        assert!(text(&replies[3]).contains("db0:keys=2,"), "{replies:?}");
        assert_eq!(replies[4], ok());
        assert_eq!(text(&replies[5]), "");
        assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(0));
        assert_eq!(info_field(&mut c, "multi_exec"), 1);
        srv.stop();
    }
}

/// SHUTDOWN inside MULTI is refused with Redis 7's text and EXEC aborts (redis-server 7.0.15
/// answers the same): queued, it used to stop the server at EXEC.
#[test]
fn shutdown_inside_multi_is_refused_and_exec_aborts() {
    let srv = start(SHARDS);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SHUTDOWN", "NOSAVE"]),
        Reply::Error("ERR Command not allowed inside a transaction".into())
    );
    assert_eq!(c.cmd(&["SET", "k", "v"]), queued());
    assert_eq!(
        c.cmd(&["EXEC"]),
        Reply::Error("EXECABORT Transaction discarded because of previous errors.".into())
    );
    assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Integer(0));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    srv.stop();
}
