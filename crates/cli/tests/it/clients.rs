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
    let run = |args: &[&str]| redis_cli(s.addr.port(), args);
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
    // SHUTDOWN's exit status is not checked, only what redis-cli prints.
    let run = |args: &[&str]| redis_cli_output(s.addr.port(), args).1;
    assert!(run(&["CLIENT", "LIST"]).contains("cmd=client|list"));
    assert_eq!(run(&["CONFIG", "GET", "maxclients"]), "maxclients\n10000");
    assert_eq!(run(&["CONFIG", "SET", "timeout", "300"]), "OK");
    assert_eq!(run(&["CONFIG", "GET", "timeout"]), "timeout\n300");
    assert!(run(&["COMMAND", "COUNT"]).parse::<u32>().unwrap() >= 40);
    assert!(run(&["COMMAND", "INFO", "get"]).contains("@read"));
    assert!(run(&["SHUTDOWN", "SAVE"]).contains("persistence is off"));
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

// Issue 20 item 7: every client runs a real workload with expiry, first against redis-server
// (which proves the harness and its checks), then against directkv. The runs against directkv
// that need key expiry or MULTI/EXEC are ignored until those land (issue 20); each is a switch
// (a script part or a function) so un-ignoring it is the whole change. Jedis is in
// clients_jvm.rs.

/// Runs tests/py/redis_py_depth.py with `parts` (plain | expiry | multi) against `port`, or
/// returns without running when redis-py is missing and peers are not required.
fn redis_py_depth(port: u16, parts: &[&str]) {
    let Some(python) = require_peer("redis-py", python_with_redis_py()) else {
        return;
    };
    if tool("timeout", "coreutils").is_none() {
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/redis_py_depth.py");
    let out = Command::new("timeout")
        .args(["120"])
        .arg(python)
        .arg(script)
        .arg(port.to_string())
        .args(parts)
        .output()
        .expect("timeout runs python");
    let report = format!(
        "redis_py_depth.py {parts:?} on port {port}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{report}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("redis-py depth ok"),
        "{report}"
    );
}

#[test]
fn redis_py_depth_passes_every_part_against_redis_server() {
    let Some(redis) = directkv_testkit::peer::start_redis() else {
        return;
    };
    redis_py_depth(redis.addr.port(), &["plain", "expiry", "multi"]);
}

/// asyncio, RESP3 (HELLO 3 map, reply types) and pipeline(transaction=False) against directkv.
#[test]
fn redis_py_depth_plain_against_directkv() {
    let s = serve();
    redis_py_depth(s.addr.port(), &["plain"]);
}

#[test]
fn redis_py_depth_expiry_against_directkv() {
    let s = serve();
    redis_py_depth(s.addr.port(), &["expiry"]);
}

#[test]
fn redis_py_depth_transactions_against_directkv() {
    let s = serve();
    redis_py_depth(s.addr.port(), &["multi"]);
}

/// One redis-cli command against `port`: how it ended, and its standard output trimmed.
fn redis_cli_output(port: u16, args: &[&str]) -> (std::process::Output, String) {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    let text = String::from_utf8(out.stdout.clone())
        .unwrap()
        .trim()
        .to_string();
    (out, text)
}

/// One redis-cli command against `port`: its trimmed output (it must exit 0).
fn redis_cli(port: u16, args: &[&str]) -> String {
    let (out, text) = redis_cli_output(port, args);
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    text
}

/// A whole number in `low..=high` printed by redis-cli.
fn assert_int_within(what: &str, text: &str, low: i64, high: i64) {
    let n: i64 = text
        .parse()
        .unwrap_or_else(|_| panic!("{what}: not an integer: {text:?}"));
    assert!(
        (low..=high).contains(&n),
        "{what}: {n} not in {low}..={high}"
    );
}

/// A redis-cli session with expiry: SET EX, TTL, PEXPIRE, PTTL, PERSIST, SETEX, GETEX, and
/// EXPIRE 0 deleting the key.
fn redis_cli_expiry_session(port: u16) {
    if tool("redis-cli", "redis-tools").is_none() {
        return;
    }
    let run = |args: &[&str]| redis_cli(port, args);
    assert_eq!(run(&["DEL", "cli:ex", "cli:sx"]).len(), 1);
    assert_eq!(run(&["SET", "cli:ex", "v", "EX", "100"]), "OK");
    assert_int_within("TTL after SET EX 100", &run(&["TTL", "cli:ex"]), 1, 100);
    assert_eq!(run(&["PEXPIRE", "cli:ex", "50000"]), "1");
    assert_int_within("PTTL after PEXPIRE", &run(&["PTTL", "cli:ex"]), 1, 50_000);
    assert_eq!(run(&["PERSIST", "cli:ex"]), "1");
    assert_eq!(run(&["TTL", "cli:ex"]), "-1");
    assert_eq!(run(&["SETEX", "cli:sx", "30", "sv"]), "OK");
    assert_int_within("TTL after SETEX 30", &run(&["TTL", "cli:sx"]), 1, 30);
    assert_eq!(run(&["GETEX", "cli:sx", "PX", "20000"]), "sv");
    assert_int_within("PTTL after GETEX PX", &run(&["PTTL", "cli:sx"]), 1, 20_000);
    assert_eq!(run(&["EXPIRE", "cli:sx", "0"]), "1");
    assert_eq!(run(&["EXISTS", "cli:sx"]), "0");
    assert_eq!(run(&["TTL", "cli:sx"]), "-2");
    assert!(run(&["SET", "cli:ex", "v", "EX", "0"]).contains("invalid expire time"));
    assert_eq!(run(&["GET", "cli:ex"]), "v");
}

#[test]
fn redis_cli_expiry_session_against_redis_server() {
    let Some(redis) = directkv_testkit::peer::start_redis() else {
        return;
    };
    redis_cli_expiry_session(redis.addr.port());
}

#[test]
fn redis_cli_expiry_session_against_directkv() {
    let s = serve();
    redis_cli_expiry_session(s.addr.port());
}

/// redis-benchmark with expiring keys: `-t set,get`, then SET of random keys with EX 100, then
/// SET of one key with EX 100 whose TTL redis-cli reads back. Every run must complete without
/// an error (redis-benchmark stops with "Error from server" at the first error reply).
fn redis_benchmark_with_expiry(port: u16) {
    if tool("redis-benchmark", "redis-tools").is_none() || tool("timeout", "coreutils").is_none() {
        return;
    }
    let p = port.to_string();
    let runs: [&[&str]; 3] = [
        &["-t", "set,get", "-n", "5000", "-P", "16"],
        &[
            "-n",
            "5000",
            "-r",
            "1000",
            "-P",
            "16",
            "SET",
            "bench:ex:__rand_int__",
            "v",
            "EX",
            "100",
        ],
        &["-n", "200", "SET", "bench:ex", "__rand_int__", "EX", "100"],
    ];
    for args in runs {
        let out = Command::new("timeout")
            .args(["120", "redis-benchmark", "-p", &p, "-q"])
            .args(args)
            .output()
            .expect("redis-benchmark runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "redis-benchmark {args:?}: {text}");
        let lower = text.to_lowercase();
        assert!(
            !lower.contains("error") && !lower.contains("warning"),
            "{text}"
        );
        assert!(text.contains("requests per second"), "{text}");
    }
    assert_int_within(
        "TTL of bench:ex",
        &redis_cli(port, &["TTL", "bench:ex"]),
        1,
        100,
    );
}

#[test]
fn redis_benchmark_with_expiry_against_redis_server() {
    let Some(redis) = directkv_testkit::peer::start_redis() else {
        return;
    };
    redis_benchmark_with_expiry(redis.addr.port());
}

#[test]
fn redis_benchmark_with_expiry_against_directkv() {
    let s = serve();
    redis_benchmark_with_expiry(s.addr.port());
}

/// Issue 20: redis-cli `--scan` (with and without `--pattern`), `KEYS *` and redis-py's
/// `scan_iter` return every key exactly once from a `directkv serve` of one and of two shards,
/// with 7 keys and with 200 000; 7 keys are one SCAN call that answers cursor 0.
#[test]
fn redis_cli_and_redis_py_scan_every_key_exactly_once() {
    if tool("redis-cli", "redis-tools").is_none() {
        return;
    }
    let python = require_peer("redis-py", python_with_redis_py());
    for shards in ["1", "2"] {
        let s = ServerProcess::directkv_serve(
            Path::new(env!("CARGO_BIN_EXE_directkv")),
            &["--shards", shards, "--memory", "256M"],
            None,
        )
        .expect("directkv serve starts");
        let port = s.addr.port();
        let mut loaded = 0;
        for n in [7usize, 200_000] {
            load_keys(port, loaded..n);
            loaded = n;
            let what = format!("{shards} shards, {n} keys");
            let check = |args: &[&str], want: usize| {
                let text = redis_cli(port, args);
                let mut keys: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
                assert_eq!(keys.len(), want, "{what}: redis-cli {args:?}");
                keys.sort_unstable();
                keys.dedup();
                assert_eq!(
                    keys.len(),
                    want,
                    "{what}: redis-cli {args:?} gave a key twice"
                );
            };
            let ones = (0..n).filter(|i| i.to_string().starts_with('1')).count();
            check(&["--scan"], n);
            check(&["--scan", "--pattern", "key:1*"], ones);
            check(&["KEYS", "*"], n);
            if n < 10 {
                let text = redis_cli(port, &["SCAN", "0"]);
                assert_eq!(text.lines().next(), Some("0"), "{what}: {text}");
            }
            if let Some(python) = &python {
                let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/redis_py_scan.py");
                let out = Command::new(python)
                    .args([script, &port.to_string(), &n.to_string()])
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{what}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// SETs `key:i v` for every i of `range` through `redis-cli --pipe`.
fn load_keys(port: u16, range: std::ops::Range<usize>) {
    use std::io::Write;
    let mut input = Vec::new();
    for i in range {
        let k = format!("key:{i}");
        write!(
            input,
            "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n$1\r\nv\r\n",
            k.len()
        )
        .unwrap();
    }
    let mut child = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--pipe"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli runs");
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("errors: 0"), "{text}");
}
