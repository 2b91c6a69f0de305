//! Snapshots while serving (issue 22 items 2 and 4) over real sockets: BGSAVE while a client
//! writes, then a restart that must bring every key back from the snapshot and the new log;
//! SAVE, LASTSAVE and INFO's fields; SHUTDOWN SAVE; automatic snapshots that let the log go;
//! SAVE and BGSAVE with persistence off. (Crashes at every step of a snapshot are the unit
//! test `persistence::snapshot::tests`, over the fault-injecting file system.)

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{config, info_field, ok, start_with, Client};
use directkv_proto::resp::Reply;
use directkv_server::{Server, ServerConfig};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("dkv-it-snap-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn persistent(dir: &Path, shards: usize) -> ServerConfig {
    ServerConfig {
        dir: dir.to_path_buf(),
        appendonly: true,
        ..config(shards)
    }
}

fn info_text(c: &mut Client) -> String {
    match c.cmd(&["INFO", "persistence"]) {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        r => panic!("{r:?}"),
    }
}

/// Field `name` of an INFO `text`.
fn field_of(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO has no {name}: {text}"))
        .trim()
        .to_string()
}

fn info_str(c: &mut Client, name: &str) -> String {
    field_of(&info_text(c), name)
}

/// Polls until no snapshot round runs, with a deadline.
fn wait_idle(c: &mut Client) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(c, "rdb_bgsave_in_progress") != 0 {
        assert!(Instant::now() < deadline, "BGSAVE never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sets `k{i}` to `v{i}` for `range`, pipelined 100 at a time.
fn set_keys(c: &mut Client, range: std::ops::Range<usize>) {
    let keys: Vec<usize> = range.collect();
    for chunk in keys.chunks(100) {
        for i in chunk {
            let (k, v) = (format!("k{i}"), format!("v{i}"));
            c.send(&[b"SET", k.as_bytes(), v.as_bytes()]);
        }
        for _ in chunk {
            assert_eq!(c.read(), ok());
        }
    }
}

fn check_keys(c: &mut Client, n: usize) {
    assert_eq!(c.cmd(&["DBSIZE"]), Reply::Integer(n as i64));
    for i in (0..n).step_by(97).chain([n - 1]) {
        let k = format!("k{i}");
        assert_eq!(
            c.cmd(&["GET", &k]),
            common::bulk(&format!("v{i}")),
            "{k} after restart"
        );
    }
}

/// The manifest's shard lines.
fn manifest_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("MANIFEST"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("shard "))
        .map(str::to_string)
        .collect()
}

fn log_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".dkvl"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn bgsave_while_writing_then_restart_has_every_key() {
    let dir = TempDir::new("bgsave");
    const N: usize = 30_000;
    let srv = start_with(persistent(&dir.0, 2));
    let mut c = Client::connect(&srv);
    set_keys(&mut c, 0..N / 2);
    let addr = srv.addr();
    let writer = std::thread::spawn(move || {
        let mut w = Client::connect_addr(addr);
        set_keys(&mut w, N / 2..N);
    });
    assert_eq!(
        c.cmd(&["BGSAVE"]),
        Reply::Simple("Background saving started".into())
    );
    wait_idle(&mut c);
    writer.join().unwrap();
    assert_eq!(info_str(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_saves"), 1);
    assert_eq!(info_field(&mut c, "snapshots_done"), 2);
    srv.stop();
    // Each shard: its snapshot and the one log started at the snapshot's instant.
    for line in manifest_lines(&dir.0) {
        let w: Vec<&str> = line.split(' ').collect();
        assert!(w[3].starts_with("snap-"), "{line}");
        assert_eq!(w.len(), 6, "one log after the snapshot: {line}");
    }
    let srv = start_with(persistent(&dir.0, 2));
    let mut c = Client::connect(&srv);
    check_keys(&mut c, N);
    srv.stop();
}

#[test]
fn save_lastsave_and_info_fields() {
    let dir = TempDir::new("save");
    let srv = start_with(persistent(&dir.0, 2));
    let mut c = Client::connect(&srv);
    let started = match c.cmd(&["LASTSAVE"]) {
        Reply::Integer(t) => t,
        r => panic!("{r:?}"),
    };
    assert_eq!(info_field(&mut c, "rdb_saves"), 0);
    assert_eq!(info_str(&mut c, "rdb_last_bgsave_time_sec"), "-1");
    set_keys(&mut c, 0..500);
    assert!(info_field(&mut c, "rdb_changes_since_last_save") > 0);
    assert_eq!(c.cmd(&["SAVE"]), ok());
    assert_eq!(info_field(&mut c, "rdb_saves"), 1);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), 0);
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), 0);
    assert_eq!(info_str(&mut c, "rdb_current_bgsave_time_sec"), "-1");
    assert_eq!(info_str(&mut c, "rdb_last_bgsave_status"), "ok");
    match c.cmd(&["LASTSAVE"]) {
        Reply::Integer(t) => assert!(t >= started, "{t} < {started}"),
        r => panic!("{r:?}"),
    }
    assert_eq!(
        info_field(&mut c, "rdb_last_save_time"),
        match c.cmd(&["LASTSAVE"]) {
            Reply::Integer(t) => t as u64,
            r => panic!("{r:?}"),
        }
    );
    // Redis's argument errors.
    assert_eq!(
        c.cmd(&["BGSAVE", "foo"]),
        Reply::Error("ERR syntax error".into())
    );
    assert_eq!(
        c.cmd(&["SAVE", "x"]),
        Reply::Error("ERR wrong number of arguments for 'save' command".into())
    );
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["SAVE"]),
        Reply::Error("ERR Command not allowed inside a transaction".into())
    );
    assert_eq!(c.cmd(&["DISCARD"]), ok());
    // BGSAVE SCHEDULE starts one when none runs.
    assert_eq!(
        c.cmd(&["BGSAVE", "SCHEDULE"]),
        Reply::Simple("Background saving scheduled".into())
    );
    wait_idle(&mut c);
    assert_eq!(info_field(&mut c, "rdb_saves"), 2);
    // The metrics rows (snapshot progress) are there too.
    let page = common::metrics(&srv);
    assert!(page.contains("directkv_snapshot_buckets_done"), "{page}");
    assert_eq!(
        common::metric(&page, "directkv_snapshots_done_total", ""),
        4
    );
    srv.stop();
    let srv = start_with(persistent(&dir.0, 2));
    let mut c = Client::connect(&srv);
    check_keys(&mut c, 500);
    srv.stop();
}

#[test]
fn a_second_bgsave_while_one_runs_gets_redis_error() {
    let dir = TempDir::new("second");
    let srv = start_with(persistent(&dir.0, 1));
    let mut c = Client::connect(&srv);
    set_keys(&mut c, 0..20_000);
    // In one write: the second and SAVE run while the first round runs (the shard takes its
    // snapshot in a task of its own, after this connection's commands).
    c.send_raw(b"*1\r\n$6\r\nBGSAVE\r\n*1\r\n$6\r\nBGSAVE\r\n*1\r\n$4\r\nSAVE\r\n");
    assert_eq!(c.read(), Reply::Simple("Background saving started".into()));
    let in_progress = Reply::Error("ERR Background save already in progress".into());
    assert_eq!(c.read(), in_progress);
    assert_eq!(c.read(), in_progress);
    wait_idle(&mut c);
    assert_eq!(info_field(&mut c, "rdb_saves"), 1);
    srv.stop();
}

#[test]
fn shutdown_save_snapshots_then_stops() {
    let dir = TempDir::new("shutdown");
    let srv = start_with(persistent(&dir.0, 2));
    let mut c = Client::connect(&srv);
    set_keys(&mut c, 0..1000);
    c.send(&[b"SHUTDOWN", b"SAVE"]);
    assert!(
        c.closed(),
        "SHUTDOWN SAVE closes the connection without a reply"
    );
    assert!(srv.shutdown_requested());
    srv.stop();
    for line in manifest_lines(&dir.0) {
        assert!(line.contains(" snapshot snap-"), "{line}");
    }
    let srv = start_with(persistent(&dir.0, 2));
    let mut c = Client::connect(&srv);
    check_keys(&mut c, 1000);
    srv.stop();
}

#[test]
fn auto_snapshot_lets_the_log_go() {
    let dir = TempDir::new("auto");
    let cfg = ServerConfig {
        auto_snapshot_log_bytes: 64 << 10,
        ..persistent(&dir.0, 1)
    };
    let srv = start_with(cfg.clone());
    let mut c = Client::connect(&srv);
    // Each SET's record is about 40 bytes: well past 64 KiB of log.
    set_keys(&mut c, 0..5000);
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(&mut c, "snapshots_auto") == 0 {
        assert!(Instant::now() < deadline, "no automatic snapshot");
        std::thread::sleep(Duration::from_millis(10));
    }
    while info_field(&mut c, "snapshot_in_progress") != 0 {
        assert!(
            Instant::now() < deadline,
            "the automatic snapshot never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The log before the snapshot is gone: what is left is far below what was written.
    let left = log_bytes(&dir.0);
    assert!(
        left < 64 << 10,
        "{left} bytes of log left after the snapshot"
    );
    let line = &manifest_lines(&dir.0)[0];
    assert!(line.contains(" snapshot snap-"), "{line}");
    // A plain BGSAVE is refused only while an automatic snapshot runs; now it starts.
    assert_eq!(
        c.cmd(&["BGSAVE"]),
        Reply::Simple("Background saving started".into())
    );
    wait_idle(&mut c);
    srv.stop();
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    check_keys(&mut c, 5000);
    srv.stop();
}

#[test]
fn save_and_bgsave_with_persistence_off_say_so() {
    let srv: Server = common::start(1);
    let mut c = Client::connect(&srv);
    for cmd in [&["SAVE"][..], &["BGSAVE"], &["BGSAVE", "SCHEDULE"]] {
        match c.cmd(cmd) {
            Reply::Error(e) => assert!(e.contains("persistence is off"), "{cmd:?}: {e}"),
            r => panic!("{cmd:?}: {r:?}"),
        }
    }
    assert!(matches!(c.cmd(&["LASTSAVE"]), Reply::Integer(t) if t > 0));
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), 0);
    // Still serving.
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    srv.stop();
}

/// An automatic snapshot's start as INFO showed it (`snapshot_in_progress` turning 1): when,
/// the shard time it took (`snapshot_work_us` until its `snapshots_done`), and the log and base
/// sizes its decision was made on (`aof_current_size`, `aof_base_size`: the task does not look
/// again while it runs).
#[derive(Debug, Clone, Copy)]
struct AutoStart {
    at: Instant,
    work_us: u64,
    log: u64,
    base: u64,
}

/// Automatic snapshots of a shard of `keys` keys under a writer that keeps its log past the
/// limit (64 KiB) for `run`, with `auto_snapshot_cpu_percent` `percent`. Also returns the
/// writer's log bytes per second.
fn auto_snapshot_timeline(
    name: &str,
    keys: usize,
    percent: u32,
    run: Duration,
) -> (Vec<AutoStart>, f64) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = TempDir::new(name);
    let cfg = ServerConfig {
        auto_snapshot_log_bytes: AUTO_LIMIT as usize,
        auto_snapshot_cpu_percent: percent,
        ..persistent(&dir.0, 1)
    };
    let srv = start_with(cfg);
    let mut c = Client::connect(&srv);
    set_keys(&mut c, 0..keys);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, mut w) = (stop.clone(), Client::connect(&srv));
        std::thread::spawn(move || {
            // Overwrites, 100 pipelined at a time.
            while !stop.load(Ordering::Relaxed) {
                set_keys(&mut w, 0..keys);
            }
        })
    };
    let field = |text: &str, name: &str| -> u64 { field_of(text, name).parse().unwrap() };
    let mut starts: Vec<AutoStart> = Vec::new();
    let (mut running, mut done, mut work_at_done) = (0, 0, 0);
    let begun = Instant::now();
    let written0 = field(&info_text(&mut c), "aof_written_bytes");
    while begun.elapsed() < run {
        let text = info_text(&mut c);
        let (r, d, w) = (
            field(&text, "snapshot_in_progress"),
            field(&text, "snapshots_done"),
            field(&text, "snapshot_work_us"),
        );
        if r == 1 && running == 0 {
            starts.push(AutoStart {
                at: Instant::now(),
                work_us: 0,
                log: field(&text, "aof_current_size"),
                base: field(&text, "aof_base_size"),
            });
        }
        if d > done {
            // One shard: snapshots follow one another, so this is the work of the last one.
            if let Some(last) = starts.last_mut() {
                last.work_us = w - work_at_done;
            }
            (done, work_at_done) = (d, w);
        }
        running = r;
        std::thread::sleep(Duration::from_millis(2));
    }
    let rate = (field(&info_text(&mut c), "aof_written_bytes") - written0) as f64
        / begun.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    srv.stop();
    (starts, rate)
}

/// `auto_snapshot_log_bytes` of the share tests.
const AUTO_LIMIT: u64 = 64 << 10;

/// Whether `next` began sooner after `prev` than `percent` allows (the one before's work x
/// 100 / percent), less `slack` for what polling INFO misses.
fn before_its_budget(prev: &AutoStart, next: &AutoStart, percent: u32, slack: Duration) -> bool {
    next.at - prev.at + slack < Duration::from_micros(prev.work_us) * 100 / percent
}

/// Whether the log had outgrown the budget's wait when `s` began (`LOG_GROWTH_OVER_BUDGET`).
fn log_outgrew_the_wait(s: &AutoStart) -> bool {
    s.log >= 4 * AUTO_LIMIT.max(s.base)
}

#[test]
fn automatic_snapshots_keep_to_their_share_of_the_shard() {
    let slack = Duration::from_millis(20);
    // Without a limit the shard snapshots again as soon as its log passes the rule: the
    // starts come sooner than a 1% share would allow, with logs under the growth bound (the
    // check below can fail).
    let (free, rate) = auto_snapshot_timeline("share-free", 20_000, 0, Duration::from_millis(1500));
    assert!(free.len() >= 3, "{} automatic snapshots", free.len());
    assert!(
        free.windows(2)
            .any(|w| before_its_budget(&w[0], &w[1], 1, slack) && !log_outgrew_the_wait(&w[1])),
        "snapshots without a limit already kept to 1% (writer {rate:.0} B/s): {free:?}"
    );
    // With 1%, each waits a hundred times the last one's work from the last one's start,
    // unless its log has grown to 4 times the size rule's bytes meanwhile.
    let (kept, rate) = auto_snapshot_timeline("share-kept", 20_000, 1, Duration::from_secs(3));
    eprintln!("writer {rate:.0} B/s: {kept:?}");
    assert!(kept.len() >= 2, "{} automatic snapshots", kept.len());
    // (The last may still be running when the run ends.)
    let finished = &kept[..kept.len() - 1];
    assert!(
        finished.iter().all(|s| s.work_us > 0),
        "work counted: {kept:?}"
    );
    for w in kept.windows(2) {
        assert!(
            !before_its_budget(&w[0], &w[1], 1, slack) || log_outgrew_the_wait(&w[1]),
            "too soon, with {} bytes of log over a base of {}: {kept:?}",
            w[1].log,
            w[1].base
        );
    }
}

#[test]
fn config_set_changes_the_automatic_snapshot_settings_live() {
    let dir = TempDir::new("config-auto");
    let srv = start_with(persistent(&dir.0, 1));
    let mut c = Client::connect(&srv);
    let get = |c: &mut Client, name: &str| match c.cmd(&["CONFIG", "GET", name]) {
        Reply::Array(Some(a)) if a.len() == 2 => a[1].clone(),
        r => panic!("{name}: {r:?}"),
    };
    assert_eq!(
        get(&mut c, "auto-snapshot-log-bytes"),
        common::bulk("67108864")
    );
    assert_eq!(
        get(&mut c, "auto-aof-rewrite-min-size"),
        common::bulk("67108864")
    );
    assert_eq!(get(&mut c, "auto-snapshot-cpu-percent"), common::bulk("1"));
    for (args, why) in [
        (
            &["auto-snapshot-cpu-percent", "101"][..],
            "argument must be between 0 and 100 inclusive",
        ),
        (&["auto-snapshot-cpu-percent", "some"], "couldn't be parsed"),
        (
            &["auto-snapshot-log-bytes", "lots"],
            "must be a memory value",
        ),
        (
            &[
                "auto-aof-rewrite-min-size",
                "1",
                "auto-snapshot-log-bytes",
                "2",
            ],
            "duplicate parameter",
        ),
    ] {
        let mut cmd = vec!["CONFIG", "SET"];
        cmd.extend_from_slice(args);
        match c.cmd(&cmd) {
            Reply::Error(e) => assert!(e.contains(why), "{args:?}: {e}"),
            r => panic!("{args:?}: {r:?}"),
        }
    }
    assert_eq!(
        get(&mut c, "auto-snapshot-log-bytes"),
        common::bulk("67108864")
    );
    // Well past 64 KiB of log, far below 64 MiB: no automatic snapshot at the default.
    set_keys(&mut c, 0..5000);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info_field(&mut c, "snapshots_auto"), 0);
    // Redis's name for it, with Redis's units: the next check snapshots.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "auto-aof-rewrite-min-size", "64kb"]),
        ok()
    );
    assert_eq!(
        get(&mut c, "auto-snapshot-log-bytes"),
        common::bulk("65536")
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut c, "snapshots_auto") == 0 {
        assert!(
            Instant::now() < deadline,
            "no automatic snapshot after CONFIG SET"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // 0 turns them off: once the running one ends, more log brings no other.
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "auto-snapshot-log-bytes",
            "0",
            "auto-snapshot-cpu-percent",
            "0"
        ]),
        ok()
    );
    assert_eq!(get(&mut c, "auto-snapshot-cpu-percent"), common::bulk("0"));
    while info_field(&mut c, "snapshot_in_progress") != 0 {
        assert!(
            Instant::now() < deadline,
            "the automatic snapshot never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let auto = info_field(&mut c, "snapshots_auto");
    set_keys(&mut c, 0..20_000);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info_field(&mut c, "snapshots_auto"), auto);
    srv.stop();
    let srv = start_with(persistent(&dir.0, 1));
    let mut c = Client::connect(&srv);
    check_keys(&mut c, 20_000);
    srv.stop();
}
