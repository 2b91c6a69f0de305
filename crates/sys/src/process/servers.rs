//! The command lines of the three servers directkv is started as, or measured against:
//! `directkv serve` (its address read from its start-up line), `redis-server` without
//! persistence and `memcached` with one worker thread, each ready when its TCP port accepts.
//!
//! Ports: directkv takes `--port 0` and prints the port it bound; redis-server and memcached
//! treat port 0 as "no TCP", so they get a port the OS just handed out to a probe listener (a
//! tiny window in which another process could take it; start-up then fails with a clear error,
//! and a caller that must not fail, like the differential test, tries again).
//!
//! Non-goals: configuring the peers beyond what a fair comparison needs (no persistence, one
//! worker thread, loopback only).
//!
//! `redis_aof` is the exception to "no persistence": redis-server with its append-only file,
//! the peer of directkv's persistence (issue 22).

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

use super::{find_program, tcp_accepts, Launch, ServerProcess, Stderr};

/// Lines of directkv's start-up log searched for the address it bound.
const START_LINES_MAX: usize = 20;

impl ServerProcess {
    /// `directkv serve --port 0 --metrics-port 0 FLAGS` from `exe`: the address comes from its
    /// start-up line, and it is ready when that address accepts a TCP connection.
    pub fn directkv_serve(
        exe: &Path,
        flags: &[&str],
        cpu: Option<usize>,
    ) -> Result<ServerProcess, String> {
        let launch = Launch {
            name: "directkv".to_string(),
            program: exe.to_path_buf(),
            args: serve_args(flags),
            cpu,
            nice: 0,
        };
        ServerProcess::directkv_launch(&launch)
    }

    /// `directkv serve --port 0 --metrics-port 0 FLAGS` under an open-file limit of
    /// `soft`/`hard` descriptors (`RLIMIT_NOFILE`, set by the shell that execs it): how the
    /// tests drive a server into its file-descriptor limit.
    pub fn directkv_serve_with_open_files(
        exe: &Path,
        flags: &[&str],
        soft: u64,
        hard: u64,
    ) -> Result<ServerProcess, String> {
        // `$0` and `$@` are the server's path and arguments; `exec` keeps the shell's PID.
        let script = format!("ulimit -Sn {soft} && ulimit -Hn {hard} && exec \"$0\" \"$@\"");
        let mut args: Vec<OsString> = vec!["-c".into(), script.into(), exe.into()];
        args.extend(serve_args(flags));
        let launch = Launch {
            name: "directkv".to_string(),
            program: PathBuf::from("/bin/sh"),
            args,
            cpu: None,
            nice: 0,
        };
        ServerProcess::directkv_launch(&launch)
    }

    /// Starts a `directkv serve` launch: the address comes from its start-up line, and it is
    /// ready when that address accepts a TCP connection.
    fn directkv_launch(launch: &Launch) -> Result<ServerProcess, String> {
        let unknown = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut server = ServerProcess::spawn(launch, unknown, Stderr::Piped)?;
        let mut err = BufReader::new(server.child.stderr.take().expect("piped stderr"));
        let mut line = String::new();
        let mut addr = None;
        for _ in 0..START_LINES_MAX {
            line.clear();
            if err.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            server.start_log.push(line.trim_end().to_string());
            addr = parse_bound_addr(&line);
            if addr.is_some() {
                break;
            }
        }
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        server.addr =
            addr.ok_or_else(|| format!("directkv serve did not report its address: {line:?}"))?;
        server.wait_until("accept connections", tcp_accepts)?;
        Ok(server)
    }

    /// directkv with one shard of `memory` bytes (a size like "256M"), tuned for `kv_size`-byte
    /// pairs at `utilization`.
    pub fn directkv(
        exe: &Path,
        memory: &str,
        kv_size: usize,
        utilization: f64,
        cpu: Option<usize>,
    ) -> Result<ServerProcess, String> {
        let (kv_size, utilization) = (kv_size.to_string(), utilization.to_string());
        let flags = [
            "--shards",
            "1",
            "--memory",
            memory,
            "--kv-size",
            &kv_size,
            "--utilization",
            &utilization,
        ];
        ServerProcess::directkv_serve(exe, &flags, cpu)
    }

    /// `redis-server` without persistence.
    pub fn redis(cpu: Option<usize>) -> Result<ServerProcess, String> {
        let exe = find_program("redis-server", "redis-server")?;
        let port = free_port()?;
        let args = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .map(OsString::from);
        ServerProcess::start_tcp("redis", exe, args.to_vec(), cpu, port)
    }

    /// `memcached` with one worker thread, no UDP and `memory_mb` of item memory.
    pub fn memcached(memory_mb: u64, cpu: Option<usize>) -> Result<ServerProcess, String> {
        ServerProcess::memcached_with(memory_mb, cpu, &[])
    }

    /// `memcached` as `memcached` starts it, with `extra` arguments after the others (the
    /// differential test turns memcached's background LRU threads off with them).
    pub fn memcached_with(
        memory_mb: u64,
        cpu: Option<usize>,
        extra: &[&str],
    ) -> Result<ServerProcess, String> {
        let exe = find_program("memcached", "memcached")?;
        let port = free_port()?;
        let mut args: Vec<OsString> = [
            "-l",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-t",
            "1",
            "-m",
            &memory_mb.to_string(),
        ]
        .map(OsString::from)
        .to_vec();
        // memcached refuses to run as root without a user to switch to.
        if super::is_root() {
            args.extend(["-u".into(), "root".into()]);
        }
        args.extend(extra.iter().map(OsString::from));
        ServerProcess::start_tcp("memcached", exe, args, cpu, port)
    }

    /// A server told its TCP `port` on the command line, ready when the port accepts.
    fn start_tcp(
        name: &str,
        program: PathBuf,
        args: Vec<OsString>,
        cpu: Option<usize>,
        port: u16,
    ) -> Result<ServerProcess, String> {
        let launch = Launch {
            name: name.to_string(),
            program,
            args,
            cpu,
            nice: 0,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut server = ServerProcess::spawn(&launch, addr, Stderr::Discard)?;
        server.wait_until("accept connections", tcp_accepts)?;
        Ok(server)
    }
}

impl ServerProcess {
    /// Where a `directkv serve` process serves memcached's protocols: from its start-up log
    /// line (`memcache=Some(HOST:PORT)`) or its start-up line (`memcached HOST:PORT`), `None`
    /// when the port is off (or the process is not directkv).
    pub fn memcache_addr(&self) -> Option<SocketAddr> {
        self.start_log
            .iter()
            .find_map(|line| parse_memcache_addr(line))
    }
}

/// The memcached address in one of directkv's start-up lines: the field
/// `memcache=Some(HOST:PORT)` of its log line, or the word after "memcached" in the line it
/// prints.
fn parse_memcache_addr(line: &str) -> Option<SocketAddr> {
    let mut words = line.split_whitespace();
    let field = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("memcache=Some("));
    let addr = match field {
        Some(a) => a,
        None => {
            words.find(|w| *w == "memcached")?;
            words.next()?
        }
    };
    addr.trim_end_matches([')', ',']).parse().ok()
}

/// `serve --port 0 --metrics-port 0 FLAGS`, with persistence off (`--appendonly no`) unless
/// FLAGS say otherwise: a server a test or a benchmark starts writes nothing into the working
/// directory, and two of them never contend for one data directory's lock.
fn serve_args(flags: &[&str]) -> Vec<OsString> {
    let persistence = if flags.contains(&"--appendonly") {
        &[][..]
    } else {
        &["--appendonly", "no"][..]
    };
    ["serve", "--port", "0", "--metrics-port", "0"]
        .iter()
        .chain(persistence)
        .chain(flags)
        .map(OsString::from)
        .collect()
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16, String> {
    let probe = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    probe
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// The first `HOST:PORT` word (or `name=HOST:PORT` field of a structured log line) in one of
/// directkv's start-up lines; the listening address comes before the metrics one.
fn parse_bound_addr(line: &str) -> Option<SocketAddr> {
    line.split_whitespace().find_map(|word| {
        let value = word.rsplit_once('=').map_or(word, |(_, v)| v);
        value.parse::<SocketAddr>().ok()
    })
}

impl ServerProcess {
    /// `redis-server` with its append-only file on (issue 22's peer for persistence, and the
    /// server the kill -9 harness is validated against): `appendfsync` is `always`, `everysec`
    /// or `no`, the files go to `dir` (which must exist), and there are no RDB save points, so
    /// the append-only file alone is what a restart on `dir` loads. Ready when its port accepts;
    /// it may still answer `-LOADING` while it reads the file. `extra` arguments (Redis
    /// options, e.g. `--auto-aof-rewrite-min-size 4mb`) come last.
    pub fn redis_aof(
        dir: &Path,
        appendfsync: &str,
        extra: &[&str],
        cpu: Option<usize>,
    ) -> Result<ServerProcess, String> {
        let exe = find_program("redis-server", "redis-server")?;
        let port = free_port()?;
        let mut args: Vec<OsString> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            appendfsync,
            "--dir",
        ]
        .map(OsString::from)
        .to_vec();
        args.push(dir.into());
        args.extend(extra.iter().map(OsString::from));
        ServerProcess::start_tcp("redis-aof", exe, args, cpu, port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_address_is_found_in_directkvs_start_up_line() {
        let line = "directkv 0.1.0 serving RESP and native on 127.0.0.1:40123 (metrics 127.0.0.1:1) with 1 shards";
        assert_eq!(
            parse_bound_addr(line),
            Some("127.0.0.1:40123".parse().unwrap())
        );
        let log = "2026-11-22T03:00:45Z  INFO directkv_server: directkv started addr=127.0.0.1:42311 shards=1 metrics=Some(127.0.0.1:1)";
        assert_eq!(
            parse_bound_addr(log),
            Some("127.0.0.1:42311".parse().unwrap())
        );
        let started = "directkv 0.1.0 serving RESP and native on 127.0.0.1:40123 (native UDP on, metrics 127.0.0.1:1, OCSM 127.0.0.1:2 x, memcached 127.0.0.1:40124) with 1 shards";
        assert_eq!(
            parse_memcache_addr(started),
            Some("127.0.0.1:40124".parse().unwrap())
        );
        assert_eq!(
            parse_memcache_addr("... memcached off) with 1 shards"),
            None
        );
        let log = "2026-11-26T16:25:51Z  INFO directkv_server: directkv started addr=127.0.0.1:39649 shards=1 memcache=Some(127.0.0.1:39443)";
        assert_eq!(
            parse_memcache_addr(log),
            Some("127.0.0.1:39443".parse().unwrap())
        );
        assert_eq!(parse_memcache_addr("directkv started memcache=None"), None);
        assert!(find_program("no-such-program-xyz", "some-package")
            .unwrap_err()
            .contains("apt-get install some-package"));
    }
}
