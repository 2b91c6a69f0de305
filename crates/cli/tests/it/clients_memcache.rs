//! Real memcached clients against a real `directkv serve` process's memcached port (issue 21):
//! pymemcache (in the virtual environment `.venv/` that scripts/test.sh makes, found through
//! `DIRECTKV_PYTHON`) and libmemcached's command-line tools (Debian's `libmemcached-tools`,
//! which names them memccp, memccat, memcrm, memcexist, memctouch, memcflush, memcstat,
//! memcping, memcslap, memcaslap). Every workload runs first against a memcached 1.6 started
//! by the test, which proves its expectations, then against directkv. Servers are stopped by
//! process id at the end. A missing client skips its test, or fails it where peers are
//! required (`directkv_testkit::peer`: scripts/test.sh and CI).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use directkv_sys::process::ServerProcess;
use directkv_testkit::peer::{require_peer, require_program};

/// Names the Python interpreter that has pymemcache (and redis-py).
const PYTHON_ENV: &str = "DIRECTKV_PYTHON";
const PYTHON_DEFAULT: &str = "python3";
/// Seconds any one client command may take before `timeout` ends it.
const TOOL_TIMEOUT_S: &str = "120";

/// `directkv serve` with two shards (so multi-gets cross shards) and its memcached port on an
/// ephemeral port; returns the process and that port's address.
fn serve() -> (ServerProcess, SocketAddr) {
    let s = ServerProcess::directkv_serve(
        Path::new(env!("CARGO_BIN_EXE_directkv")),
        &["--shards", "2", "--memory", "64M"],
        None,
    )
    .expect("directkv serve starts");
    let addr = s
        .memcache_addr()
        .unwrap_or_else(|| panic!("no memcached address in {:?}", s.start_log));
    (s, addr)
}

/// A memcached of the test's own, or `None` (skipped) when it is not installed and peers are
/// not required.
fn memcached() -> Option<ServerProcess> {
    require_program("memcached", "memcached")?;
    let mut last = String::new();
    // The port can be taken between the probe and memcached's bind: try again.
    for _ in 0..5 {
        match ServerProcess::memcached(64, None) {
            Ok(m) => return Some(m),
            Err(e) => last = e,
        }
    }
    panic!("memcached did not start: {last}");
}

/// The Python interpreter of `DIRECTKV_PYTHON` (or `python3`) if it can import pymemcache.
fn python_with_pymemcache() -> Result<PathBuf, String> {
    let python = std::env::var_os(PYTHON_ENV).unwrap_or_else(|| PYTHON_DEFAULT.into());
    let out = Command::new(&python)
        .args(["-c", "import pymemcache, redis"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.to_string_lossy()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import pymemcache and redis ({}); bash scripts/test.sh installs them in \
             .venv/ and sets {PYTHON_ENV}=.venv/bin/python",
            python.to_string_lossy(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(PathBuf::from(python))
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// tests/py/pymemcache_check.py against memcached, then against directkv (with its RESP port,
/// for the keys that cross protocols).
#[test]
fn pymemcache_works() {
    let Some(python) = require_peer("pymemcache", python_with_pymemcache()) else {
        return;
    };
    let Some(reference) = memcached() else {
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/pymemcache_check.py");
    let run = |ports: &[u16]| {
        let mut c = Command::new("timeout");
        c.args([TOOL_TIMEOUT_S]).arg(&python).arg(script);
        c.args(ports.iter().map(u16::to_string));
        c.output().unwrap()
    };
    let out = run(&[reference.addr.port()]);
    assert!(out.status.success(), "against memcached: {}", text(&out));
    drop(reference);
    let (s, mc) = serve();
    let out = run(&[mc.port(), s.addr.port()]);
    assert!(out.status.success(), "against directkv: {}", text(&out));
    assert!(text(&out).contains("pymemcache ok"), "{}", text(&out));
}

/// One libmemcached tool's run: its output, after checking the exit status.
fn tool(addr: SocketAddr, name: &str, args: &[&str], ok: bool) -> String {
    let out = Command::new("timeout")
        .args([
            TOOL_TIMEOUT_S,
            name,
            &format!("--servers=127.0.0.1:{}", addr.port()),
        ])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let said = text(&out);
    assert_eq!(
        out.status.success(),
        ok,
        "{name} {args:?} against {addr}: {said}"
    );
    said
}

/// The libmemcached workload against the server at `addr`; `dir` holds the files copied.
fn libmemcached_workload(addr: SocketAddr, dir: &Path) {
    let one = dir.join("one.txt");
    let two = dir.join("two.txt");
    std::fs::write(&one, b"first file").unwrap();
    std::fs::write(&two, b"second\nfile\n").unwrap();
    let (one, two) = (one.to_str().unwrap(), two.to_str().unwrap());
    assert!(tool(addr, "memcping", &[], true).is_empty());
    tool(addr, "memcflush", &[], true);
    // memccp stores each file under its base name, with flags and an absolute exptime (2033).
    tool(
        addr,
        "memccp",
        &["--flags=7", "--expire=2000000000", one, two],
        true,
    );
    assert_eq!(
        tool(addr, "memccat", &["--flags", "one.txt", "two.txt"], true),
        "7\nfirst file\n7\nsecond\nfile\n\n"
    );
    tool(addr, "memcexist", &["one.txt"], true);
    tool(addr, "memcexist", &["missing.txt"], false);
    // --add refuses a key that is there; --replace one that is not.
    tool(addr, "memccp", &["--add", one], false);
    tool(addr, "memccp", &["--replace", one], true);
    tool(addr, "memcrm", &["two.txt"], true);
    tool(addr, "memccp", &["--replace", two], false);
    tool(addr, "memccat", &["two.txt"], false);
    // memctouch with a past absolute time expires the item at once.
    tool(addr, "memctouch", &["--expire=2000000000", "one.txt"], true);
    tool(addr, "memcexist", &["one.txt"], true);
    tool(addr, "memctouch", &["--expire=1000000000", "one.txt"], true);
    tool(addr, "memcexist", &["one.txt"], false);
    tool(
        addr,
        "memctouch",
        &["--expire=2000000000", "one.txt"],
        false,
    );
    let stats = tool(addr, "memcstat", &[], true);
    for field in [
        "pid:",
        "uptime:",
        "curr_items:",
        "cmd_get:",
        "get_hits:",
        "version:",
    ] {
        assert!(stats.contains(field), "memcstat has no {field}: {stats}");
    }
    // memcslap: sets, gets and multi-gets from two threads, and noreply sets.
    for test in ["set", "get", "mget"] {
        let said = tool(
            addr,
            "memcslap",
            &[
                "--flush",
                "--test",
                test,
                "--concurrency=2",
                "--execute-number=2000",
            ],
            true,
        );
        assert!(
            said.contains(&format!("Time to {test}")),
            "memcslap {test}: {said}"
        );
    }
    tool(
        addr,
        "memcslap",
        &["--test", "set", "--noreply", "--execute-number=2000"],
        true,
    );
    tool(addr, "memcflush", &[], true);
    tool(addr, "memcexist", &["one.txt"], false);
}

/// memcaslap: a mixed get/set load that verifies what it reads back.
fn memcaslap(addr: SocketAddr) {
    let out = Command::new("timeout")
        .args([
            TOOL_TIMEOUT_S,
            "memcaslap",
            "-s",
            &format!("127.0.0.1:{}", addr.port()),
        ])
        .args([
            "--execute_number=20000",
            "--threads=1",
            "--concurrency=4",
            "--verify=0.2",
        ])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "memcaslap against {addr}: {said}");
    assert!(said.contains("Run time:"), "{said}");
    // A fifth of the gets check the value read against the one memcaslap set.
    for clean in [
        "get_misses: 0",
        "verify_misses: 0",
        "verify_failed: 0",
        "cmd_get: 18000",
    ] {
        assert!(
            said.contains(clean),
            "memcaslap against {addr}: no {clean:?} in {said}"
        );
    }
}

#[test]
fn libmemcached_tools_work() {
    for t in [
        "memccp",
        "memccat",
        "memcrm",
        "memcexist",
        "memctouch",
        "memcflush",
        "memcstat",
        "memcping",
        "memcslap",
        "memcaslap",
    ] {
        if require_program(t, "libmemcached-tools").is_none() {
            return;
        }
    }
    if require_program("timeout", "coreutils").is_none() {
        return;
    }
    let Some(reference) = memcached() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("dkv-libmemcached-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    libmemcached_workload(reference.addr, &dir);
    memcaslap(reference.addr);
    drop(reference);
    let (_s, mc) = serve();
    libmemcached_workload(mc, &dir);
    memcaslap(mc);
    std::fs::remove_dir_all(&dir).unwrap();
}
