//! `directkv bench run` as a new user runs it (issue 19 item 11): the README's command, without
//! `--keys`, works against a fresh `directkv serve` and loads a modest default key count; a
//! server that already holds keys is refused before anything is written, unless the user asks
//! for the load (`--load-anyway`) or says the keys are there (`--skip-load`). Every server is a
//! real `directkv serve` process on an ephemeral port, stopped by PID when its guard drops.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output};

use directkv_sys::process::ServerProcess;

const EXE: &str = env!("CARGO_BIN_EXE_directkv");
/// The key count `bench run` loads when `--keys` is not given.
const KEYS_DEFAULT: u64 = 100_000;

fn serve() -> ServerProcess {
    ServerProcess::directkv_serve(Path::new(EXE), &["--shards", "1", "--memory", "64M"], None)
        .expect("directkv serve starts")
}

/// `bench run` against `url` with short timings, so that a test lasts about a second.
fn bench_run(url: &str, extra: &[&str]) -> Output {
    Command::new(EXE)
        .args(["bench", "run", "--target", url, "--workload", "ycsb-b"])
        .args([
            "--depth",
            "64",
            "--seconds",
            "0.3",
            "--warmup",
            "0.1",
            "--json",
        ])
        .args(extra)
        .output()
        .expect("directkv runs")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// One RESP command on a fresh connection; the first line of the reply.
fn resp(addr: SocketAddr, args: &[&str]) -> String {
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd += &format!("${}\r\n{a}\r\n", a.len());
    }
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(cmd.as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line.trim_end().to_string()
}

fn dbsize(addr: SocketAddr) -> u64 {
    let reply = resp(addr, &["DBSIZE"]);
    reply
        .strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("DBSIZE answered {reply:?}"))
}

fn keys_reported(out: &Output) -> u64 {
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)));
    v["keys"].as_u64().expect("keys in the report")
}

#[test]
fn readme_command_without_keys_loads_the_default_count_over_native() {
    let server = serve();
    let out = bench_run(&format!("native://{}", server.addr), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(keys_reported(&out), KEYS_DEFAULT);
    assert_eq!(dbsize(server.addr), KEYS_DEFAULT);
}

#[test]
fn resp_target_without_keys_loads_the_default_count() {
    let server = serve();
    let out = bench_run(&format!("resp://{}", server.addr), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(keys_reported(&out), KEYS_DEFAULT);
    assert_eq!(dbsize(server.addr), KEYS_DEFAULT);
}

#[test]
fn a_server_that_holds_keys_is_refused_unless_asked() {
    let server = serve();
    assert_eq!(
        resp(server.addr, &["SET", "users-own-key", "precious"]),
        "+OK"
    );
    for scheme in ["resp", "native"] {
        let url = format!("{scheme}://{}", server.addr);
        let out = bench_run(&url, &["--keys", "1000"]);
        assert!(!out.status.success(), "{scheme}: {}", text(&out));
        let message = text(&out);
        assert!(
            message.contains("holds 1 key") && message.contains("--load-anyway"),
            "{scheme}: {message}"
        );
        // Refused before the load: nothing was written.
        assert_eq!(dbsize(server.addr), 1, "{scheme}");
    }
    let out = bench_run(
        &format!("resp://{}", server.addr),
        &["--keys", "1000", "--load-anyway"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(dbsize(server.addr), 1001);
    assert_eq!(
        resp(server.addr, &["GET", "users-own-key"]),
        "$8",
        "the user's key is untouched"
    );
    // --skip-load runs against the keys already there, without a check.
    let out = bench_run(
        &format!("resp://{}", server.addr),
        &["--keys", "1000", "--skip-load"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(dbsize(server.addr), 1001);
}

#[test]
fn keys_and_utilization_together_are_refused() {
    let server = serve();
    let out = bench_run(
        &format!("resp://{}", server.addr),
        &["--keys", "1000", "--utilization", "0.5"],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("--keys or --utilization"),
        "{}",
        text(&out)
    );
    assert_eq!(dbsize(server.addr), 0);
}

#[test]
fn a_target_that_never_answers_the_key_count_is_refused() {
    // Accepts connections and never answers: the key count must time out, not hang the run.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    // Holds the connections open, silent, until the test's own second connection arrives.
    let held = std::thread::spawn(move || {
        (0..2)
            .map_while(|_| silent.accept().ok())
            .collect::<Vec<_>>()
    });
    let started = std::time::Instant::now();
    let out = bench_run(&format!("resp://{addr}"), &[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("no answer to the key count"),
        "{}",
        text(&out)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    drop(TcpStream::connect(addr));
    drop(held.join().unwrap());
}
