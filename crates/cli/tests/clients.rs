//! Real Redis clients against a real `directkv serve` process: redis-cli, redis-benchmark and
//! redis-py (installed by `scripts/test.sh`, redis-py in the virtual environment `.venv/`). The
//! server is stopped by process id at the end. A missing client skips its test, or fails it
//! where peers are required (`directkv_testkit::peer`: scripts/test.sh and CI).
//!
//! The Python that runs redis-py is `DIRECTKV_PYTHON` (scripts/test.sh points it at
//! `.venv/bin/python`), else `python3`.

use std::path::{Path, PathBuf};
use std::process::Command;

use directkv_sys::process::ServerProcess;
use directkv_testkit::peer::{require_peer, require_program};

/// Names the Python interpreter that has redis-py.
const PYTHON_ENV: &str = "DIRECTKV_PYTHON";
const PYTHON_DEFAULT: &str = "python3";

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

/// A command running `name` (from Debian's `package`), or `None` when it is missing and
/// peers are not required.
fn tool(name: &str, package: &str) -> Option<Command> {
    require_program(name, package).map(Command::new)
}

/// The Python interpreter of `DIRECTKV_PYTHON` (or `python3`) if it can import redis-py.
fn python_with_redis_py() -> Result<PathBuf, String> {
    let python = std::env::var_os(PYTHON_ENV).unwrap_or_else(|| PYTHON_DEFAULT.into());
    let out = Command::new(&python)
        .args(["-c", "import redis"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.to_string_lossy()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import redis ({}); bash scripts/test.sh installs redis-py in .venv/ \
             and sets {PYTHON_ENV}=.venv/bin/python",
            python.to_string_lossy(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(PathBuf::from(python))
}

#[test]
fn redis_cli_works() {
    if tool("redis-cli", "redis-tools").is_none() {
        return;
    }
    let s = serve();
    let p = s.addr.port().to_string();
    let run = |args: &[&str]| {
        let out = tool("redis-cli", "redis-tools")
            .expect("redis-cli is installed")
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
    let Some(mut timeout) = tool("timeout", "coreutils") else {
        return;
    };
    if tool("redis-benchmark", "redis-tools").is_none() {
        return;
    }
    let s = serve();
    // `timeout` bounds the run even if the server misbehaves.
    let out = timeout
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
    let Some(python) = require_peer("redis-py", python_with_redis_py()) else {
        return;
    };
    let s = serve();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/redis_py_check.py");
    let out = Command::new(python)
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

/// redis-py's transactions: `pipeline()` (MULTI/EXEC), `transaction()` with WATCH, and two
/// processes' WATCH retry loops on one counter, exact at the end (issue 20 item 4).
#[test]
fn redis_py_transactions_work() {
    run_redis_py_script("redis_py_multi.py");
}

#[test]
fn redis_py_admin_commands_work() {
    run_redis_py_script("redis_py_admin.py");
}

/// Runs `tests/py/SCRIPT PORT` with redis-py against a fresh `directkv serve`.
fn run_redis_py_script(script: &str) {
    let Some(python) = require_peer("redis-py", python_with_redis_py()) else {
        return;
    };
    let s = serve();
    let script = format!("{}/tests/py/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python)
        .arg(&script)
        .arg(s.addr.port().to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// redis-cli's admin commands, then SHUTDOWN, which stops the real process.
#[test]
fn redis_cli_admin_and_shutdown() {
    if tool("redis-cli", "redis-tools").is_none() {
        return;
    }
    let s = serve();
    let p = s.addr.port().to_string();
    let run = |args: &[&str]| {
        let out = tool("redis-cli", "redis-tools")
            .expect("redis-cli is installed")
            .args(["-p", &p])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert!(run(&["CLIENT", "LIST"]).contains("cmd=client|list"));
    assert_eq!(run(&["CONFIG", "GET", "maxclients"]), "maxclients\n10000");
    assert_eq!(run(&["CONFIG", "SET", "timeout", "300"]), "OK");
    assert_eq!(run(&["CONFIG", "GET", "timeout"]), "timeout\n300");
    assert!(run(&["COMMAND", "COUNT"]).parse::<u32>().unwrap() >= 40);
    assert!(run(&["COMMAND", "INFO", "get"]).contains("@read"));
    assert!(run(&["SHUTDOWN", "SAVE"]).contains("no persistence"));
    run(&["SHUTDOWN", "NOSAVE"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while directkv_sys::process::tcp_accepts(s.addr) {
        assert!(
            std::time::Instant::now() < deadline,
            "the server still accepts after SHUTDOWN"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
