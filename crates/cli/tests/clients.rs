//! Real Redis clients against a real `directkv serve` process: redis-cli, redis-benchmark and
//! redis-py (installed by `scripts/test.sh`). The server is stopped by process id at the end.

use std::path::Path;
use std::process::Command;

use directkv_sys::process::ServerProcess;

/// Starts `directkv serve` with two shards on an ephemeral port, learned from its start-up line
/// so that parallel tests never race for a port; stopped by process id when dropped.
fn serve() -> ServerProcess {
    ServerProcess::directkv_serve(
        Path::new(env!("CARGO_BIN_EXE_directkv")),
        &["--shards", "2", "--memory", "64M"],
        None,
    )
    .expect("directkv serve starts")
}

fn tool(name: &str) -> Command {
    assert!(
        Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .unwrap()
            .status
            .success(),
        "{name} is not installed: run scripts/test.sh, which installs it"
    );
    Command::new(name)
}

#[test]
fn redis_cli_works() {
    let s = serve();
    let p = s.addr.port().to_string();
    let run = |args: &[&str]| {
        let out = tool("redis-cli")
            .args(["-p", &p])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(run(&["PING"]), "PONG");
    assert_eq!(run(&["SET", "cli:k", "hello world"]), "OK");
    assert_eq!(run(&["GET", "cli:k"]), "hello world");
    assert_eq!(run(&["INCR", "cli:n"]), "1");
    assert_eq!(run(&["DEL", "cli:k"]), "1");
    assert!(run(&["NOSUCH"]).contains("unknown command"));
    assert!(run(&["INFO"]).contains("connected_clients"));
}

#[test]
fn redis_benchmark_runs_without_warnings() {
    let s = serve();
    // `timeout` bounds the run even if the server misbehaves.
    let out = tool("timeout")
        .args([
            "120",
            "redis-benchmark",
            "-p",
            &s.addr.port().to_string(),
            "-t",
            "ping,set,get,incr,mset",
            "-P",
            "64",
            "-n",
            "20000",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!text.to_lowercase().contains("warning"), "{text}");
    for t in ["PING_INLINE", "SET", "GET", "INCR", "MSET"] {
        assert!(text.contains(t), "no {t} result in {text}");
    }
}

#[test]
fn redis_py_works() {
    let s = serve();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/redis_py_check.py");
    let out = tool("python3")
        .args([script, &s.addr.port().to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
