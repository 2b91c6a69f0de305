//! Busy polling (`busy_poll_us`): a shard polls its sockets for the window after each request
//! and then parks, so an idle server sleeps; it stops polling while another thread wants its
//! core (adaptive); with 0 it never polls.
//!
//! A test binary of its own (not in `tests/it/`): it reads the CPU time of this process's
//! `shard-0` threads, which every other in-process server of the binary would also have.

use directkv_testkit::server as common;

use std::time::Duration;

use common::{bulk, info_field, ok, start_with, Client};
use directkv_server::ServerConfig;

fn server(busy_poll_us: u64) -> directkv_server::Server {
    start_with(ServerConfig {
        port: 0,
        shards: 1,
        memory_bytes: 32 << 20,
        busy_poll_us,
        appendonly: false,
        ..ServerConfig::default()
    })
}

/// The idle gap after each request, well past the 50 ms window even on a loaded machine.
const IDLE: Duration = Duration::from_millis(400);

/// Held by the tests that measure or load the shards' CPU: every server's shard 0 is named
/// `shard-0` and pinned to the same CPU, so they must not run side by side.
static CPU_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// CPU ticks (utime + stime, 1/100 s) of this process's threads named `shard-0`.
fn shard_cpu_ticks() -> u64 {
    let mut ticks = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "shard-0" {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesized name: state is the first, utime the 12th.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        ticks += f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    }
    ticks
}

#[test]
fn a_shard_polls_after_requests_and_parks_when_idle() {
    let _serial = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server(50_000);
    let mut c = Client::connect(&srv);
    assert_eq!(info_field(&mut c, "busy_poll_us"), 50_000);
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    std::thread::sleep(IDLE);
    // INFO is a request too: each one starts a window that ends in a park during the gap.
    let sleeps_1 = info_field(&mut c, "busy_poll_sleeps");
    assert!(sleeps_1 >= 1, "the shard never stopped polling: {sleeps_1}");
    assert!(info_field(&mut c, "busy_polls") > 0);
    for round in 0..2 {
        std::thread::sleep(IDLE);
        // A parked poller is woken by the next request (and the request is answered).
        let before = info_field(&mut c, "busy_poll_sleeps");
        assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
        std::thread::sleep(IDLE);
        let after = info_field(&mut c, "busy_poll_sleeps");
        assert!(
            after > before,
            "round {round}: no park after the GET's window ({before} -> {after})"
        );
    }
    // Parked, the shard sleeps: over an idle stretch after the window it uses (nearly) no
    // CPU, where a shard that kept polling would use most of a core.
    std::thread::sleep(IDLE);
    let t0 = shard_cpu_ticks();
    std::thread::sleep(IDLE);
    let idle_ticks = shard_cpu_ticks() - t0;
    assert!(
        idle_ticks <= 5,
        "an idle shard used {idle_ticks} ticks in 0.4 s"
    );
    // While requests keep coming (each GET restarts the window), it polls between them, unless
    // (adaptive polling) another thread wanted its core meanwhile: on a busy machine it then
    // backs off, and the back-off counter says so.
    let backoffs_0 = info_field(&mut c, "busy_poll_backoffs");
    let t0 = shard_cpu_ticks();
    let until = std::time::Instant::now() + IDLE;
    while std::time::Instant::now() < until {
        assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
        std::thread::sleep(Duration::from_millis(5));
    }
    let busy_ticks = shard_cpu_ticks() - t0;
    let backed_off = info_field(&mut c, "busy_poll_backoffs") > backoffs_0;
    assert!(
        busy_ticks >= 10 || backed_off,
        "a shard polling between requests 5 ms apart used only {busy_ticks} ticks in 0.4 s, \
         and never backed off"
    );
    srv.stop();
}

/// How long the contention test may take to see a back-off on a machine loaded by others.
const DEADLINE: Duration = Duration::from_secs(30);

#[test]
fn a_shard_whose_core_is_wanted_stops_polling_and_still_serves() {
    let _serial = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    // A one-second window: without the adaptive policy the shard would spin on without pause
    // while requests come every few milliseconds.
    let srv = server(1_000_000);
    let mut c = Client::connect(&srv);
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    // Not necessarily 0: on a machine busy with other work the shard may have backed off.
    let before = info_field(&mut c, "busy_poll_backoffs");
    // A thread that never sleeps, on the CPU the shard pinned itself to (shard 0 takes the
    // first CPU this process may run on): the scheduler must share that core between them.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hog = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            directkv_sys::cpu::pin_current_thread_to_nth_allowed(0);
            let mut x = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        })
    };
    let until = std::time::Instant::now() + DEADLINE;
    let mut backoffs = before;
    while backoffs == before && std::time::Instant::now() < until {
        // Every request is answered while the shard shares its core.
        assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
        std::thread::sleep(Duration::from_millis(2));
        backoffs = info_field(&mut c, "busy_poll_backoffs");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    hog.join().unwrap();
    assert!(
        backoffs > before,
        "the shard never stopped polling while another thread wanted its core"
    );
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    srv.stop();
}

#[test]
fn zero_turns_busy_polling_off() {
    let srv = server(0);
    let mut c = Client::connect(&srv);
    for i in 0..50 {
        let k = format!("k{i}");
        assert_eq!(c.cmd(&["SET", &k, "v"]), ok());
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(info_field(&mut c, "busy_polls"), 0);
    assert_eq!(info_field(&mut c, "busy_poll_sleeps"), 0);
    assert_eq!(c.cmd(&["GET", "k7"]), bulk("v"));
    srv.stop();
}

#[test]
fn a_window_over_one_second_is_refused() {
    let cfg = ServerConfig {
        port: 0,
        busy_poll_us: 1_000_001,
        appendonly: false,
        ..ServerConfig::default()
    };
    let err = directkv_server::Server::start(cfg).err().expect("refused");
    assert!(err.contains("busy_poll_us"), "{err}");
}
