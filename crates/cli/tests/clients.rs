//! Real Redis clients against a real `directkv serve` process: redis-cli, redis-benchmark and
//! redis-py (installed by `scripts/test.sh`). The server is stopped by process id at the end.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Served {
    child: Child,
    port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        // SAFETY: kill(2) with the pid of our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// Starts `directkv serve` on an ephemeral port and learns the port from its start-up line, so
/// parallel tests never race for a port.
fn serve() -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_directkv"))
        .args([
            "serve",
            "--port",
            "0",
            "--metrics-port",
            "0",
            "--shards",
            "2",
            "--memory",
            "64M",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("directkv serve starts");
    let mut line = String::new();
    let mut err = BufReader::new(child.stderr.take().expect("piped stderr"));
    err.read_line(&mut line).expect("start-up line");
    // Keep draining the server's log so it never writes to a closed or full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let at = line
        .find("127.0.0.1:")
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        + "127.0.0.1:".len();
    let port: u16 = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Served { child, port }
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
    let p = s.port.to_string();
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
            &s.port.to_string(),
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
        .args([script, &s.port.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
