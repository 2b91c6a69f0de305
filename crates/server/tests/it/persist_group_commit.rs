//! The group commit delay under `appendfsync always` (issue 22; `group_commit_delay_us`,
//! docs/persistence.md "Group commit delay"): a sync round may wait for the connections the
//! last round answered, and nothing else about durability changes. The fdatasyncs of the log
//! are real, or held at a gate (`GateFs`) so that a test decides which writes arrive while a
//! round runs; the counters are read from /metrics, which does not wait for durability. No
//! assertion depends on how long anything took.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use directkv_persist::fs::{Fs, FsFile, RealFs};
use directkv_proto::resp::Reply;
use directkv_server::config::GROUP_COMMIT_DELAY_US_MAX;
use directkv_server::{Server, ServerConfig};

use crate::common::{self, Client};

/// A directory of its own for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "directkv-group-commit-{test}-{}",
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

fn config(dir: &TempDir, delay_us: u64) -> ServerConfig {
    ServerConfig {
        appendonly: true,
        dir: dir.0.clone(),
        appendfsync: "always".to_string(),
        group_commit_delay_us: delay_us,
        prefault_index: false,
        metrics_port: Some(0),
        ..common::config(1)
    }
}

/// A /metrics counter (read over HTTP: a RESP request could itself wait for a sync round).
fn metric(srv: &Server, name: &str) -> u64 {
    let mut s = std::net::TcpStream::connect(srv.metrics_addr().expect("metrics on")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    page.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("/metrics has no {name}"))
        .trim()
        .parse()
        .unwrap()
}

/// Polls `f` until it holds (a deadline, not a sleep: the test fails if it never does).
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A gate the test closes to hold every fdatasync of the log files, and opens to let them go.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    moved: Condvar,
}

#[derive(Default)]
struct GateState {
    closed: bool,
    /// fdatasyncs waiting at the closed gate.
    held: usize,
}

impl Gate {
    fn set_closed(&self, closed: bool) {
        self.state.lock().unwrap().closed = closed;
        self.moved.notify_all();
    }

    fn held(&self) -> usize {
        self.state.lock().unwrap().held
    }

    fn pass(&self) {
        let mut s = self.state.lock().unwrap();
        s.held += 1;
        while s.closed {
            s = self.moved.wait(s).unwrap();
        }
        s.held -= 1;
    }
}

/// Opens the gate when dropped (also while a failed assertion unwinds).
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.set_closed(false);
    }
}

/// `RealFs` whose files' fdatasyncs pass through a `Gate`.
struct GateFs(Arc<Gate>);

struct GateFile(Box<dyn FsFile>, Arc<Gate>);

impl FsFile for GateFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn sync_data(&mut self) -> std::io::Result<()> {
        self.1.pass();
        self.0.sync_data()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn file_len(&self) -> std::io::Result<u64> {
        self.0.file_len()
    }
    fn try_clone(&self) -> std::io::Result<Box<dyn FsFile>> {
        Ok(Box::new(GateFile(self.0.try_clone()?, self.1.clone())))
    }
}

impl GateFs {
    fn gated(&self, f: std::io::Result<Box<dyn FsFile>>) -> std::io::Result<Box<dyn FsFile>> {
        Ok(Box::new(GateFile(f?, self.0.clone())))
    }
}

impl Fs for GateFs {
    fn create_new(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
        self.gated(RealFs.create_new(path))
    }
    fn create_truncate(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
        self.gated(RealFs.create_truncate(path))
    }
    fn open_append(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
        self.gated(RealFs.open_append(path))
    }
    fn open_read(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
        self.gated(RealFs.open_read(path))
    }
    fn truncate(&self, path: &Path, len: u64) -> std::io::Result<()> {
        RealFs.truncate(path, len)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        RealFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        RealFs.sync_dir(dir)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        RealFs.remove(path)
    }
}

#[test]
fn a_lone_client_never_waits_for_the_delay() {
    let dir = TempDir::new("lone");
    // The longest delay: a lone client that waited for it even once would show in the counter.
    let srv = Server::start(config(&dir, GROUP_COMMIT_DELAY_US_MAX)).expect("server starts");
    let mut c = Client::connect(&srv);
    for i in 0..200 {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), common::ok());
        assert_eq!(c.cmd(&["GET", &format!("k{i}")]), common::bulk("v"));
    }
    assert_eq!(metric(&srv, "directkv_aof_group_commit_waits_total"), 0);
    // One round per write, each answering that write's one wait.
    let asks = metric(&srv, "directkv_aof_sync_round_asks_total");
    assert_eq!(asks, metric(&srv, "directkv_aof_durable_waits_total"));
    assert_eq!(asks, 200);
    assert_eq!(metric(&srv, "directkv_aof_sync_rounds_total"), 200);
    drop(c);
    srv.stop();
}

#[test]
fn a_round_waits_for_the_connection_the_last_one_answered() {
    let dir = TempDir::new("gate");
    let gate = Arc::new(Gate::default());
    let cfg = config(&dir, GROUP_COMMIT_DELAY_US_MAX);
    let srv = Server::start_with_fs(cfg.clone(), Arc::new(GateFs(gate.clone()))).unwrap();
    let mut a = Client::connect(&srv);
    let mut b = Client::connect(&srv);
    let rounds0 = metric(&srv, "directkv_aof_sync_rounds_total");
    // Round 1 takes A's write and is held in its fdatasync; B writes meanwhile.
    gate.set_closed(true);
    a.send(&[b"SET", b"a1", b"v"]);
    wait_until("round 1 is in its fdatasync", || gate.held() == 1);
    b.send(&[b"SET", b"b1", b"v"]);
    wait_until("B waits for durability", || {
        metric(&srv, "directkv_aof_durable_waits_total") == 2
    });
    gate.set_closed(false);
    // Round 1 answered A while B waited: round 2 expects A back, so A's next write joins B's.
    assert_eq!(a.read(), common::ok());
    assert_eq!(a.cmd(&["SET", "a2", "v"]), common::ok());
    assert_eq!(b.read(), common::ok());
    let rounds = metric(&srv, "directkv_aof_sync_rounds_total") - rounds0;
    let timeouts = metric(&srv, "directkv_aof_group_commit_timeouts_total");
    // Two rounds for three writes, unless the delay ran out before A came back (then B went
    // alone and A's second write took a third round). Round 2 usually waits for A
    // (`group_commit_waits` >= 1), but on a loaded machine A's second write can arrive before
    // the sync thread looks, and then it has nothing to wait for: the rounds are what tell.
    // Without the delay (main before it) round 2 took B alone: three rounds, no timeout.
    assert!(
        (rounds == 2 && timeouts == 0) || (rounds == 3 && timeouts == 1),
        "{rounds} rounds, {timeouts} timeouts"
    );
    assert_eq!(metric(&srv, "directkv_aof_sync_round_asks_total"), 3);
    drop((a, b));
    srv.stop();
    let srv = Server::start(cfg).expect("server restarts");
    let mut c = Client::connect(&srv);
    for k in ["a1", "b1", "a2"] {
        assert_eq!(c.cmd(&["GET", k]), common::bulk("v"), "{k}");
    }
    drop(c);
    srv.stop();
}

#[test]
fn a_rounds_fdatasyncs_of_several_logs_run_at_the_same_time() {
    // One MSET of keys on all three shards: its round syncs three logs. With the gate closed
    // the round's fdatasyncs are held where they begin, so three held at once means they ran
    // at the same time (`persistence/fanout.rs`); one after another (main before it) never
    // gets past one held.
    let dir = TempDir::new("fanout");
    let gate = Arc::new(Gate::default());
    let cfg = ServerConfig {
        shards: 3,
        ..config(&dir, 0)
    };
    let srv = Server::start_with_fs(cfg.clone(), Arc::new(GateFs(gate.clone()))).unwrap();
    let mut c = Client::connect(&srv);
    let fsyncs0 = metric(&srv, "directkv_aof_fsyncs_total");
    let rounds0 = metric(&srv, "directkv_aof_sync_rounds_total");
    let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for k in &keys {
        mset.push(k.as_bytes());
        mset.push(b"v");
    }
    gate.set_closed(true);
    // Opened again however the wait ends, so a failure stops the server instead of hanging.
    let opened = OpenOnDrop(gate.clone());
    c.send(&mset);
    wait_until("the three logs' fdatasyncs are in progress at once", || {
        gate.held() == 3
    });
    drop(opened);
    assert_eq!(c.read(), common::ok());
    assert_eq!(metric(&srv, "directkv_aof_fsyncs_total") - fsyncs0, 3);
    assert_eq!(metric(&srv, "directkv_aof_sync_rounds_total") - rounds0, 1);
    // The helpers keep serving: more rounds, each with every log, all acknowledged.
    for round in 0..20 {
        c.send(&mset);
        assert_eq!(c.read(), common::ok(), "round {round}");
    }
    drop(c);
    srv.stop();
    let srv = Server::start(cfg).expect("server restarts");
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(64));
    drop(c);
    srv.stop();
}

#[test]
fn pipelining_connections_under_the_delay_lose_no_acknowledged_write() {
    let dir = TempDir::new("pipelines");
    let cfg = config(&dir, 2_000);
    let srv = Server::start(cfg.clone()).expect("server starts");
    let addr = srv.addr();
    let conns: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Client::connect_addr(addr);
                for batch in 0..20 {
                    for i in 0..64 {
                        let k = format!("t{t}-{batch}-{i}");
                        c.send(&[b"SET", k.as_bytes(), b"v"]);
                    }
                    for _ in 0..64 {
                        assert_eq!(c.read(), common::ok());
                    }
                }
            })
        })
        .collect();
    for t in conns {
        t.join().unwrap();
    }
    let asks = metric(&srv, "directkv_aof_sync_round_asks_total");
    assert_eq!(asks, metric(&srv, "directkv_aof_durable_waits_total"));
    let rounds = metric(&srv, "directkv_aof_sync_rounds_total");
    assert!((1..=asks).contains(&rounds), "{rounds} rounds, {asks} asks");
    assert!(
        metric(&srv, "directkv_aof_group_commit_timeouts_total")
            <= metric(&srv, "directkv_aof_group_commit_waits_total")
    );
    srv.stop();
    let srv = Server::start(cfg).expect("server restarts");
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(4 * 20 * 64));
    for t in 0..4 {
        assert_eq!(c.cmd(&["GET", &format!("t{t}-19-63")]), common::bulk("v"));
    }
    drop(c);
    srv.stop();
}

#[test]
fn the_delay_is_a_named_limit_set_live() {
    let dir = TempDir::new("limit");
    let bad = format!("group_commit_delay_us = {}", GROUP_COMMIT_DELAY_US_MAX + 1);
    let e = ServerConfig::from_toml(&bad)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(e.contains("group_commit_delay_us"), "{e}");
    let cfg = ServerConfig::from_toml("group-commit-delay-us = 0").unwrap();
    assert_eq!(cfg.group_commit_delay_us, 0);
    assert!(ServerConfig::from_toml("group_commit_delay_us = -1").is_err());
    let srv = Server::start(config(&dir, 700)).expect("server starts");
    let mut c = Client::connect(&srv);
    let get = |c: &mut Client| match c.cmd(&["CONFIG", "GET", "group-commit-delay-us"]) {
        Reply::Array(Some(a)) => a[1].clone(),
        r => panic!("{r:?}"),
    };
    assert_eq!(get(&mut c), common::bulk("700"));
    for (value, why) in [
        ("100001", "argument must be between 0 and 100000 inclusive"),
        ("-1", "argument must be between 0 and 100000 inclusive"),
        ("soon", "argument couldn't be parsed into an integer"),
    ] {
        match c.cmd(&["CONFIG", "SET", "group-commit-delay-us", value]) {
            Reply::Error(e) => assert!(e.contains(why), "{value}: {e}"),
            r => panic!("{value}: {r:?}"),
        }
    }
    assert_eq!(get(&mut c), common::bulk("700"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "group-commit-delay-us", "0"]),
        common::ok()
    );
    assert_eq!(get(&mut c), common::bulk("0"));
    // With no delay nothing waits, and writes are acknowledged as before.
    assert_eq!(c.cmd(&["SET", "k", "v"]), common::ok());
    assert_eq!(metric(&srv, "directkv_aof_group_commit_waits_total"), 0);
    let t = match c.cmd(&["INFO", "persistence"]) {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        r => panic!("{r:?}"),
    };
    for field in [
        "aof_sync_rounds:",
        "aof_sync_round_asks:",
        "aof_group_commit_waits:",
    ] {
        assert!(t.contains(field), "INFO persistence has no {field}\n{t}");
    }
    drop(c);
    srv.stop();
}
