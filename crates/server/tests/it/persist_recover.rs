//! Recovery at start over the real server (issue 22 item 3): what a client wrote through RESP
//! is back after a stop and a start on the same `dir` (values, counters, deadlines, deletes,
//! vectors; expired keys stay gone), a log cut at every byte of its last two records still
//! starts with exactly the records before the cut, a bit flip in the middle of a log refuses
//! to start naming the file and offset, a second server on a running one's directory is
//! refused, and the shard-count rule (`persistence/recover.rs`: the stored count or refused).
//! Each test has a directory of its own under the system's temporary one, removed at the end.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{bulk, ok, Client};
use directkv_proto::resp::Reply;
use directkv_server::{Server, ServerConfig};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let d = std::env::temp_dir().join(format!(
            "dkv-it-recover-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn persistent(dir: &Path, shards: usize) -> ServerConfig {
    ServerConfig {
        appendonly: true,
        dir: dir.to_path_buf(),
        memcache_port: 0,
        ..common::config(shards)
    }
}

fn start(cfg: &ServerConfig) -> Server {
    Server::start(cfg.clone()).expect("the server starts on its directory")
}

fn refused(cfg: &ServerConfig) -> String {
    match Server::start(cfg.clone()) {
        Ok(_) => panic!("the server started on a directory it must refuse"),
        Err(e) => e,
    }
}

fn int(c: &mut Client, args: &[&str]) -> i64 {
    match c.cmd(args) {
        Reply::Integer(n) => n,
        r => panic!("{args:?}: {r:?}"),
    }
}

/// Shard 0's first log, the only log of a store no snapshot has rotated.
fn first_log(dir: &Path) -> PathBuf {
    dir.join("log-0000-0000000001.dkvl")
}

/// The offsets where the log's records start, and its length (the end of the last).
fn record_starts(bytes: &[u8]) -> Vec<usize> {
    let mut at = 32;
    let mut starts = vec![];
    while at < bytes.len() {
        starts.push(at);
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 20 + len;
    }
    assert_eq!(at, bytes.len(), "the log ends with a whole record");
    starts.push(at);
    starts
}

#[test]
fn what_a_client_wrote_is_back_after_a_restart() {
    let d = TempDir::new("round-trip");
    let cfg = persistent(&d.0, 2);
    let srv = start(&cfg);
    let mut c = Client::connect(&srv);
    for i in 0..200 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]), ok());
    }
    for _ in 0..7 {
        c.cmd(&["INCR", "counter"]);
    }
    assert_eq!(int(&mut c, &["INCRBY", "counter", "100"]), 107);
    assert_eq!(int(&mut c, &["DEL", "k0", "k1", "k2"]), 3);
    assert_eq!(c.cmd(&["SET", "ttl", "t", "EX", "1000"]), ok());
    assert_eq!(int(&mut c, &["EXPIRE", "k10", "2000"]), 1);
    assert_eq!(c.cmd(&["SET", "short", "s", "PX", "30"]), ok());
    assert_eq!(c.cmd(&["SET", "untouched", "u", "PX", "30"]), ok());
    assert_eq!(c.cmd(&["SET", "persisted", "p", "EX", "1000"]), ok());
    assert_eq!(int(&mut c, &["PERSIST", "persisted"]), 1);
    assert_eq!(c.cmd(&["SET", "appended", "ab"]), ok());
    assert_eq!(int(&mut c, &["APPEND", "appended", "cd"]), 4);
    c.cmd(&["DKV.VSET", "vec", "u32", "1", "2", "3"]);
    c.cmd(&["DKV.UPDATEV", "vec", "add", "u32", "10"]);
    let vec_before = c.cmd(&["DKV.VGET", "vec", "u32"]);
    // Wait (polling, with a deadline) until the short key has expired.
    let deadline = Instant::now() + Duration::from_secs(10);
    while int(&mut c, &["EXISTS", "short"]) == 1 {
        assert!(Instant::now() < deadline, "a 30 ms key did not expire");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(c);
    srv.stop();

    let srv = start(&cfg);
    let mut c = Client::connect(&srv);
    for i in 3..200 {
        assert_eq!(
            c.cmd(&["GET", &format!("k{i}")]),
            bulk(&format!("v{i}")),
            "k{i}"
        );
    }
    for k in ["k0", "k1", "k2", "short", "untouched"] {
        assert_eq!(c.cmd(&["GET", k]), Reply::Bulk(None), "{k} came back");
    }
    assert_eq!(c.cmd(&["GET", "counter"]), bulk("107"));
    let ttl = int(&mut c, &["TTL", "ttl"]);
    assert!((990..=1000).contains(&ttl), "TTL after a restart: {ttl}");
    let ttl = int(&mut c, &["TTL", "k10"]);
    assert!((1990..=2000).contains(&ttl), "TTL after a restart: {ttl}");
    assert_eq!(int(&mut c, &["TTL", "persisted"]), -1);
    assert_eq!(int(&mut c, &["TTL", "k11"]), -1);
    assert_eq!(c.cmd(&["GET", "appended"]), bulk("abcd"));
    assert_eq!(c.cmd(&["DKV.VGET", "vec", "u32"]), vec_before);
    assert_eq!(
        vec_before,
        Reply::Array(Some(vec![bulk("11"), bulk("12"), bulk("13")]))
    );
    // The restarted server goes on logging: a third start sees its writes too.
    assert_eq!(int(&mut c, &["INCR", "counter"]), 108);
    drop(c);
    srv.stop();
    let srv = start(&cfg);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["GET", "counter"]), bulk("108"));
    assert_eq!(int(&mut c, &["DBSIZE"]), 197 + 5);
    drop(c);
    srv.stop();
}

/// The log cut at every byte offset of its last two records (SET a, SET b): the server starts,
/// truncates the log to the last whole record, holds exactly the records before the cut, and
/// keeps logging after it.
#[test]
fn a_log_cut_at_every_byte_of_its_last_two_records_starts_with_the_records_before() {
    let d = TempDir::new("torn");
    let cfg = persistent(&d.0, 1);
    let srv = start(&cfg);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "base", "0"]), ok());
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(c.cmd(&["SET", "b", "2"]), ok());
    drop(c);
    srv.stop();
    let log = first_log(&d.0);
    let whole = std::fs::read(&log).unwrap();
    let starts = record_starts(&whole);
    assert_eq!(starts.len(), 4, "three records: {starts:?}");
    let (a, b, end) = (starts[1], starts[2], starts[3]);
    let manifest = std::fs::read(d.0.join("MANIFEST")).unwrap();
    // A server's stop takes about 200 ms, so the cuts run on a few threads, each in a copy of
    // the store of its own.
    const THREADS: usize = 4;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (whole, manifest) = (&whole, &manifest);
            s.spawn(move || {
                let copy = TempDir::new(&format!("torn-{t}"));
                std::fs::create_dir_all(&copy.0).unwrap();
                std::fs::write(copy.0.join("MANIFEST"), manifest).unwrap();
                for cut in (a..end).skip(t).step_by(THREADS) {
                    one_cut(&copy.0, whole, cut, a, b);
                }
            });
        }
    });
}

/// Starts on the log cut at `cut` (records at `a` and `b`, then the end) and checks it.
fn one_cut(dir: &Path, whole: &[u8], cut: usize, a: usize, b: usize) {
    let cfg = persistent(dir, 1);
    let log = first_log(dir);
    std::fs::write(&log, &whole[..cut]).unwrap();
    let srv = start(&cfg);
    let mut c = Client::connect(&srv);
    let want_a = if cut >= b {
        bulk("1")
    } else {
        Reply::Bulk(None)
    };
    assert_eq!(c.cmd(&["GET", "base"]), bulk("0"), "cut at {cut}");
    assert_eq!(c.cmd(&["GET", "a"]), want_a, "cut at {cut}");
    assert_eq!(c.cmd(&["GET", "b"]), Reply::Bulk(None), "cut at {cut}");
    let good = if cut >= b { b } else { a };
    assert_eq!(
        std::fs::metadata(&log).unwrap().len() as usize,
        good,
        "cut at {cut}: truncated to the last whole record"
    );
    if cut == a + 7 {
        // The server goes on logging after the cut.
        assert_eq!(c.cmd(&["SET", "after", "x"]), ok());
        drop(c);
        srv.stop();
        let srv = start(&cfg);
        let mut c = Client::connect(&srv);
        assert_eq!(c.cmd(&["GET", "after"]), bulk("x"));
        assert_eq!(c.cmd(&["GET", "a"]), Reply::Bulk(None));
        assert_eq!(c.cmd(&["DEL", "after"]), Reply::Integer(1));
        drop(c);
        srv.stop();
    } else {
        drop(c);
        srv.stop();
    }
}

#[test]
fn a_bit_flip_in_the_middle_of_a_log_refuses_to_start_naming_file_and_offset() {
    let d = TempDir::new("flip");
    let cfg = persistent(&d.0, 1);
    let srv = start(&cfg);
    let mut c = Client::connect(&srv);
    for i in 0..5 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), ok());
    }
    drop(c);
    srv.stop();
    let log = first_log(&d.0);
    let mut bytes = std::fs::read(&log).unwrap();
    let starts = record_starts(&bytes);
    bytes[starts[1] + 24] ^= 0x04;
    std::fs::write(&log, &bytes).unwrap();
    let e = refused(&cfg);
    assert!(
        e.contains(&log.display().to_string())
            && e.contains(&format!("corrupt at offset {}", starts[1]))
            && e.contains("directkv check")
            && e.contains("--repair"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(&log).unwrap(),
        bytes,
        "a refused start changes nothing"
    );
}

#[test]
fn a_second_server_on_a_running_servers_directory_is_refused() {
    let d = TempDir::new("lock");
    let cfg = persistent(&d.0, 1);
    let srv = start(&cfg);
    let e = refused(&cfg);
    assert!(
        e.contains("in use by another directkv process")
            && e.contains(&format!("pid {}", std::process::id())),
        "{e}"
    );
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "still", "serving"]), ok());
    drop(c);
    srv.stop();
    // Once the first has stopped, the directory is free.
    let srv = start(&cfg);
    assert_eq!(
        Client::connect(&srv).cmd(&["GET", "still"]),
        bulk("serving")
    );
    srv.stop();
}

/// `--shards 0` keeps the stored count; another count re-shards the store at start: every key
/// is served from its new shard, with its value and TTL, and the new count sticks.
#[test]
fn a_store_keeps_its_shard_count_or_is_resharded() {
    let d = TempDir::new("shards");
    let srv = start(&persistent(&d.0, 2));
    let mut c = Client::connect(&srv);
    for i in 0..100 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), &i.to_string()]), ok());
    }
    assert_eq!(int(&mut c, &["EXPIRE", "k7", "1000"]), 1);
    drop(c);
    srv.stop();
    let check = |shards: usize| {
        let srv = start(&persistent(&d.0, shards));
        let mut c = Client::connect(&srv);
        for i in 0..100 {
            assert_eq!(
                c.cmd(&["GET", &format!("k{i}")]),
                bulk(&i.to_string()),
                "k{i} with --shards {shards}"
            );
        }
        assert_eq!(int(&mut c, &["DBSIZE"]), 100);
        let ttl = int(&mut c, &["TTL", "k7"]);
        assert!((990..=1000).contains(&ttl), "{ttl}");
        assert_eq!(int(&mut c, &["TTL", "k8"]), -1);
        drop(c);
        srv.stop();
    };
    // The stored count, then 3 shards (re-sharded), which the store keeps, then back to 1.
    check(0);
    check(3);
    check(0);
    assert!(
        d.0.join("snap-0002-0000000002.dkvs").exists(),
        "three shards stored"
    );
    check(1);
    check(0);
}
