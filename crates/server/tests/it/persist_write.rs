//! The write path of persistence (issue 22): every door that changes a shard's store writes a
//! log record before its replies leave, so a restart on the same `dir` gives back the same
//! store; a failed write or fdatasync refuses writes with MISCONF, keeps serving reads, and
//! acknowledges nothing that is not in the log. Servers are real (loopback), the file system
//! is the real one or `FaultFs` over it (a planned ENOSPC or EIO).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use directkv_persist::fs::{Fault, FaultFs, Fs, RealFs};
use directkv_proto::resp::Reply;
use directkv_server::{Server, ServerConfig};

use crate::common::{self, Client};
use crate::memcache_client::Mc;

/// A directory of its own for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "directkv-persist-write-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn config(dir: &TempDir, shards: usize, appendfsync: &str) -> ServerConfig {
    ServerConfig {
        appendonly: true,
        dir: dir.0.clone(),
        appendfsync: appendfsync.to_string(),
        prefault_index: false,
        ..common::config(shards)
    }
}

fn start(cfg: ServerConfig, fs: Arc<dyn Fs>) -> Server {
    let mut cfg = cfg;
    cfg.metrics_port = Some(0);
    Server::start_with_fs(cfg, fs).expect("server starts")
}

fn text(r: Reply) -> String {
    match r {
        Reply::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
        Reply::Simple(s) | Reply::Error(s) => s,
        r => format!("{r:?}"),
    }
}

/// Every key with its value and absolute deadline (PEXPIRETIME), through KEYS.
fn dump(c: &mut Client) -> BTreeMap<String, (String, i64)> {
    let keys = match c.cmd(&["KEYS", "*"]) {
        Reply::Array(Some(a)) => a.into_iter().map(text).collect::<Vec<_>>(),
        r => panic!("KEYS: {r:?}"),
    };
    let mut out = BTreeMap::new();
    for k in keys {
        let v = text(c.cmd(&["GET", &k]));
        let at = match c.cmd(&["PEXPIRETIME", &k]) {
            Reply::Integer(n) => n,
            r => panic!("PEXPIRETIME: {r:?}"),
        };
        out.insert(k, (v, at));
    }
    out
}

fn info(c: &mut Client, field: &str) -> String {
    let t = text(c.cmd(&["INFO", "persistence"]));
    t.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO persistence has no {field}: {t}"))
        .trim()
        .to_string()
}

#[test]
fn every_door_that_writes_is_logged_and_a_restart_gives_the_same_store() {
    let dir = TempDir::new("doors");
    let mut cfg = config(&dir, 2, "everysec");
    cfg.expire_sweep_interval_ms = 10;
    let srv = start(cfg.clone(), Arc::new(RealFs));
    let mut c = Client::connect(&srv);
    for i in 0..200 {
        assert_eq!(
            c.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]),
            common::ok()
        );
    }
    for _ in 0..7 {
        c.cmd(&["INCR", "counter"]);
    }
    c.cmd(&["APPEND", "k1", "-more"]);
    c.cmd(&["DEL", "k2", "k3"]);
    c.cmd(&["PEXPIRE", "k4", "100000000"]);
    c.cmd(&["SET", "k5", "soon", "PX", "30"]);
    // Cross-shard all-or-nothing writes and a transaction.
    c.cmd(&["MSET", "m1", "a", "m2", "b", "m3", "c"]);
    c.cmd(&["RENAME", "k6", "renamed"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["INCRBY", "counter", "10"]);
    c.cmd(&["SET", "in-multi", "yes"]);
    assert!(matches!(c.cmd(&["EXEC"]), Reply::Array(Some(_))));
    c.cmd(&["SETRANGE", "k7", "1", "XY"]);
    c.cmd(&["SETBIT", "bits", "9", "1"]);
    // k5 expires and the sweep removes it (a delete record of the sweep's own).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while common::info_field(&mut c, "expired_keys") == 0 {
        assert!(std::time::Instant::now() < deadline, "k5 never swept");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let before = dump(&mut c);
    assert!(!before.contains_key("k5") && !before.contains_key("k2"));
    assert_eq!(before["counter"].0, "17");
    let records: u64 = info(&mut c, "aof_records").parse().unwrap();
    assert!(records >= 200, "{records} records for 200+ writes");
    drop(c);
    srv.stop();

    let srv = start(cfg.clone(), Arc::new(RealFs));
    let mut c = Client::connect(&srv);
    assert_eq!(dump(&mut c), before, "the store after a restart");
    // FLUSHALL is logged too: after another restart the store is what came after it.
    assert_eq!(c.cmd(&["FLUSHALL"]), common::ok());
    c.cmd(&["SET", "after-flush", "1"]);
    drop(c);
    srv.stop();
    let srv = start(cfg, Arc::new(RealFs));
    let mut c = Client::connect(&srv);
    let after = dump(&mut c);
    assert_eq!(after.keys().collect::<Vec<_>>(), vec!["after-flush"]);
    drop(c);
    srv.stop();
}

#[test]
fn evictions_are_logged_so_a_restart_keeps_exactly_the_keys_kept() {
    let dir = TempDir::new("evict");
    let mut cfg = config(&dir, 1, "no");
    cfg.memory_bytes = directkv_engine::engine::MEMORY_BYTES_MIN;
    cfg.maxmemory_policy = "allkeys-lru".into();
    let srv = start(cfg.clone(), Arc::new(RealFs));
    let mut c = Client::connect(&srv);
    let value = "x".repeat(200);
    let mut i = 0;
    while common::info_field(&mut c, "evicted_keys") < 500 {
        for _ in 0..100 {
            c.cmd(&["SET", &format!("e{i}"), &value]);
            i += 1;
        }
        assert!(i < 2_000_000, "no eviction after {i} keys");
    }
    let before = dump(&mut c);
    assert!(before.len() < i, "{} keys kept of {i}", before.len());
    drop(c);
    srv.stop();
    let srv = start(cfg, Arc::new(RealFs));
    let mut c = Client::connect(&srv);
    assert_eq!(dump(&mut c), before);
    drop(c);
    srv.stop();
}

#[test]
fn a_failed_log_write_refuses_writes_with_misconf_and_serves_reads() {
    let dir = TempDir::new("enospc");
    let cfg = config(&dir, 1, "everysec");
    // Write number 40 is cut short and every later one fails with ENOSPC (a full disk that
    // stays full, so no repair succeeds): the store's own files take the first few, records
    // the rest.
    let fs = FaultFs::new(Some(Fault::ShortWrite(40)));
    let srv = start(cfg.clone(), Arc::new(fs));
    let mut c = Client::connect(&srv);
    let mut acked = Vec::new();
    let mut refused = None;
    for i in 0..100 {
        let k = format!("w{i}");
        match c.cmd(&["SET", &k, "v"]) {
            Reply::Simple(s) if s == "OK" => acked.push(k),
            Reply::Error(e) => {
                assert!(e.starts_with("MISCONF"), "{e}");
                refused = Some(k);
                break;
            }
            r => panic!("{r:?}"),
        }
    }
    let refused = refused.expect("a write was refused");
    assert!(!acked.is_empty());
    // Writes stay refused, reads are served, the connection and the server stay usable.
    let e = text(c.cmd(&["SET", "later", "v"]));
    assert!(e.starts_with("MISCONF"), "{e}");
    let e = text(c.cmd(&["INCR", "counter"]));
    assert!(e.starts_with("MISCONF"), "{e}");
    let e = text(c.cmd(&["FLUSHALL"]));
    assert!(e.starts_with("MISCONF"), "{e}");
    assert_eq!(c.cmd(&["GET", &acked[0]]), common::bulk("v"));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(info(&mut c, "aof_last_write_status"), "err");
    drop(c);
    srv.stop();
    // Every acknowledged write is in the log; the refused ones are not.
    let (srv, mut c) = restart_with_acked(cfg, &acked);
    assert_eq!(
        c.cmd(&["EXISTS", &refused, "later", "counter"]),
        Reply::Integer(0)
    );
    assert_eq!(info(&mut c, "aof_last_write_status"), "ok");
    drop(c);
    srv.stop();
}

/// The memcached side of a failed log: a set and a `flush_all` (at once, with a delay, with
/// noreply) are refused with a `SERVER_ERROR` line, as FLUSHALL's MISCONF over RESP, and
/// nothing is flushed; gets are served and the connection stays usable.
#[test]
fn a_failed_log_write_refuses_memcached_writes_and_flush_all_with_server_error() {
    let dir = TempDir::new("enospc-memcache");
    let cfg = config(&dir, 2, "everysec");
    // A disk that stays full (no repair succeeds while the test looks).
    let fs = FaultFs::new(Some(Fault::ShortWrite(40)));
    let srv = start(cfg, Arc::new(fs));
    let mut mc = Mc::connect(&srv);
    let mut acked = Vec::new();
    let mut refused = false;
    for i in 0..100 {
        let k = format!("w{i}");
        match mc.cmd(&format!("set {k} 7 0 1\r\nv\r\n")).as_str() {
            "STORED" => acked.push(k),
            line => {
                assert!(line.starts_with("SERVER_ERROR "), "{line}");
                assert!(line.contains("persistence log failed"), "{line}");
                refused = true;
                break;
            }
        }
    }
    assert!(refused, "a set was refused");
    assert!(!acked.is_empty());
    for request in [
        "flush_all\r\n",
        "flush_all 0\r\n",
        "flush_all 1\r\n",
        "flush_all noreply\r\n",
    ] {
        let line = mc.cmd(request);
        assert!(line.starts_with("SERVER_ERROR "), "{request:?}: {line}");
        assert!(line.contains("persistence log failed"), "{line}");
    }
    // Nothing was flushed: every acknowledged item is still there, on both shards, once the
    // refused delayed flush's second has passed (time passing, not readiness, is waited for).
    std::thread::sleep(std::time::Duration::from_millis(1200));
    for k in &acked {
        mc.expect(
            &format!("get {k}\r\n"),
            &[&format!("VALUE {k} 7 1"), "v", "END"],
        );
    }
    mc.expect("version\r\n", &["VERSION 1.6.18"]);
    let mut c = Client::connect(&srv);
    assert_eq!(info(&mut c, "aof_last_write_status"), "err");
    drop(c);
    drop(mc);
    srv.stop();
}

#[test]
fn a_failed_fsync_under_always_acknowledges_nothing_after_it() {
    let dir = TempDir::new("eio");
    let cfg = config(&dir, 1, "always");
    let fs = FaultFs::new(Some(Fault::FailSync(30)));
    let srv = start(cfg.clone(), Arc::new(fs.clone()));
    let mut acked = Vec::new();
    let mut closed = false;
    let mut s = std::net::TcpStream::connect(srv.addr()).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    for i in 0..100 {
        let k = format!("s{i}");
        let mut req = Vec::new();
        directkv_proto::resp::encode_command(&[b"SET", k.as_bytes(), b"v"], &mut req);
        s.write_all(&req).unwrap();
        // Under `always` a reply waits for its fdatasync; the failed one closes the
        // connection without the reply.
        let mut got = [0u8; 5];
        match s.read_exact(&mut got) {
            Ok(()) => {
                assert_eq!(&got, b"+OK\r\n");
                acked.push(k);
            }
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    assert!(closed, "no connection was closed by the failed fdatasync");
    assert!(!acked.is_empty());
    // The disk stays unwritable for now: no repair (the first comes a second after the
    // failure) can succeed while the test looks.
    fs.set_full(true);
    let mut c = Client::connect(&srv);
    let e = text(c.cmd(&["SET", "later", "v"]));
    assert!(e.starts_with("MISCONF"), "{e}");
    assert_eq!(c.cmd(&["GET", &acked[0]]), common::bulk("v"));
    // Freed: the shard writes a new snapshot and log, and writes are taken again; this
    // connection saw the failure, and its next reply waits for its fdatasync as usual.
    // (Another connection watches, so that `c`'s next reply is its first since the failure.)
    fs.set_full(false);
    let mut watch = Client::connect(&srv);
    wait_repaired(&mut watch);
    let waits = |c: &mut Client| -> u64 { info(c, "aof_durable_waits").parse().unwrap() };
    // (The first reply after the repair waits for a round that syncs the new log: one more
    // INFO so that `watch`'s own replies wait for nothing.)
    waits(&mut watch);
    let before = waits(&mut watch);
    assert_eq!(waits(&mut watch), before, "an INFO waited for a sync");
    assert_eq!(c.cmd(&["SET", "after", "v"]), Reply::Simple("OK".into()));
    assert!(
        waits(&mut watch) > before,
        "the reply did not wait for its fdatasync"
    );
    drop((c, watch));
    srv.stop();
    let (srv, mut c) = restart_with_acked(cfg, &acked);
    assert_eq!(c.cmd(&["GET", "after"]), common::bulk("v"));
    assert_eq!(c.cmd(&["EXISTS", "later"]), Reply::Integer(0));
    drop(c);
    srv.stop();
}

/// The server started again on `cfg`'s directory (the real file system), every key of
/// `acked` checked to hold "v"; the server and a client, for the caller's further checks.
fn restart_with_acked(cfg: ServerConfig, acked: &[String]) -> (Server, Client) {
    let srv = start(cfg, Arc::new(RealFs));
    let mut c = Client::connect(&srv);
    for k in acked {
        assert_eq!(c.cmd(&["GET", k]), common::bulk("v"), "{k}");
    }
    (srv, c)
}

/// Polls INFO until the store takes writes again (a repair: every shard wrote a new
/// snapshot and log); the wait doubles after each failed repair, from a second.
fn wait_repaired(c: &mut Client) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while info(c, "aof_last_write_status") != "ok" {
        assert!(
            std::time::Instant::now() < deadline,
            "the store was not repaired within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A disk that fills up and is freed (Redis's behaviour: writes refused with MISCONF while
/// its AOF cannot be written, accepted again once it can, without a restart): writes are
/// refused while full, reads served, repairs fail and are retried; once freed, every shard
/// writes a new snapshot and log, the old files go, writes are accepted on the same
/// connection, and a restart gives back every acknowledged write (and the batch whose record
/// failed: it ran in memory, and the repair's snapshot holds it).
#[test]
fn a_full_disk_refuses_writes_until_freed_then_the_store_repairs_itself() {
    let dir = TempDir::new("full-freed");
    let cfg = config(&dir, 2, "everysec");
    let fs = FaultFs::new(None);
    let srv = start(cfg.clone(), Arc::new(fs.clone()));
    let mut c = Client::connect(&srv);
    let mut acked = Vec::new();
    for i in 0..50 {
        let k = format!("a{i}");
        assert_eq!(c.cmd(&["SET", &k, "v"]), Reply::Simple("OK".into()));
        acked.push(k);
    }
    assert_eq!(c.cmd(&["INCRBY", "counter", "5"]), Reply::Integer(5));
    fs.set_full(true);
    let e = text(c.cmd(&["SET", "failed", "v"]));
    assert!(e.starts_with("MISCONF"), "{e}");
    let e = text(c.cmd(&["INCR", "counter"]));
    assert!(e.starts_with("MISCONF"), "{e}");
    assert_eq!(c.cmd(&["GET", "a0"]), common::bulk("v"));
    assert_eq!(info(&mut c, "aof_last_write_status"), "err");
    // The first repair comes after a second, and fails on the full disk.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(info(&mut c, "aof_last_write_status"), "err");
    let e = text(c.cmd(&["SET", "refused", "v"]));
    assert!(e.starts_with("MISCONF"), "{e}");
    let failed_snapshots: u64 = info(&mut c, "snapshots_failed").parse().unwrap();
    assert!(failed_snapshots >= 1, "no repair was tried");
    fs.set_full(false);
    wait_repaired(&mut c);
    assert_eq!(info(&mut c, "aof_repairs"), "1");
    // Each shard's files are its repair's snapshot and log; the old ones are gone.
    let mut names: Vec<String> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(
        !names.contains(&"log-0000-0000000001.dkvl".to_string()),
        "{names:?}"
    );
    for (i, k) in ["b0", "b1", "b2"].iter().enumerate() {
        assert_eq!(c.cmd(&["SET", k, "v"]), Reply::Simple("OK".into()), "{i}");
        acked.push(k.to_string());
    }
    assert_eq!(c.cmd(&["INCR", "counter"]), Reply::Integer(6));
    drop(c);
    srv.stop();
    let (srv, mut c) = restart_with_acked(cfg, &acked);
    assert_eq!(c.cmd(&["GET", "counter"]), common::bulk("6"));
    assert_eq!(c.cmd(&["GET", "failed"]), common::bulk("v"));
    assert_eq!(c.cmd(&["EXISTS", "refused"]), Reply::Integer(0));
    drop(c);
    srv.stop();
}

#[test]
fn appendfsync_is_set_live_and_reported() {
    let dir = TempDir::new("config");
    let srv = start(config(&dir, 1, "no"), Arc::new(RealFs));
    let mut c = Client::connect(&srv);
    let get = |c: &mut Client, name: &str| match c.cmd(&["CONFIG", "GET", name]) {
        Reply::Array(Some(a)) => text(a[1].clone()),
        r => panic!("{r:?}"),
    };
    assert_eq!(get(&mut c, "appendonly"), "yes");
    assert_eq!(get(&mut c, "appendfsync"), "no");
    assert_eq!(info(&mut c, "aof_enabled"), "1");
    let e = text(c.cmd(&["CONFIG", "SET", "appendfsync", "sometimes"]));
    assert!(e.contains("always, everysec, no"), "{e}");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendfsync", "ALWAYS"]),
        common::ok()
    );
    assert_eq!(get(&mut c, "appendfsync"), "always");
    assert_eq!(info(&mut c, "aof_fsync_policy"), "always");
    let fsyncs: u64 = info(&mut c, "aof_fsyncs").parse().unwrap();
    for i in 0..5 {
        c.cmd(&["SET", &format!("a{i}"), "v"]);
    }
    let after: u64 = info(&mut c, "aof_fsyncs").parse().unwrap();
    assert!(
        after >= fsyncs + 5,
        "{fsyncs} -> {after} fsyncs for 5 writes under always"
    );
    let waits: u64 = info(&mut c, "aof_durable_waits").parse().unwrap();
    assert!(waits >= 5, "{waits}");
    drop(c);
    srv.stop();
    // Without persistence CONFIG and INFO say so.
    let srv = common::start(1);
    let mut c = Client::connect(&srv);
    assert_eq!(get(&mut c, "appendonly"), "no");
    assert_eq!(info(&mut c, "aof_enabled"), "0");
    drop(c);
    srv.stop();
}
