//! A real server on a loopback ephemeral port, its Prometheus metrics, and a tiny RESP client
//! for the tests (the differential test also points it at redis-server).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use directkv_proto::resp::{encode_command, parse_reply, Reply};
use directkv_server::{Server, ServerConfig};

/// The tests' usual configuration: an ephemeral port, `shards` shards of 32 MiB in all,
/// metrics on an ephemeral port, persistence off (a test of persistence gives its own `dir`).
pub fn config(shards: usize) -> ServerConfig {
    ServerConfig {
        port: 0,
        shards,
        memory_bytes: 32 << 20,
        metrics_port: Some(0),
        appendonly: false,
        ..ServerConfig::default()
    }
}

pub fn start(shards: usize) -> Server {
    start_with(config(shards))
}

/// Starts `cfg` with metrics on an ephemeral port, so parallel tests never collide; for the
/// same reason a configuration left with the default `dir` gets no persistence (every such
/// test would share, and lock, `./directkv-data`): a test of persistence gives its own `dir`.
pub fn start_with(mut cfg: ServerConfig) -> Server {
    cfg.metrics_port = Some(0);
    if cfg.dir.as_os_str() == directkv_server::config::DIR_DEFAULT {
        cfg.appendonly = false;
    }
    Server::start(cfg).expect("server starts")
}

pub struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(server: &Server) -> Client {
        Client::connect_addr(server.addr())
    }

    /// A client of any RESP server (the differential test also talks to redis-server).
    pub fn connect_addr(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client { s, buf: Vec::new() }
    }

    /// A second handle on the socket, to write from another thread while this one reads.
    pub fn writer(&self) -> TcpStream {
        self.s.try_clone().expect("clone the socket")
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    /// Sends one command with binary arguments without waiting for its reply.
    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = Vec::new();
        encode_command(args, &mut out);
        self.send_raw(&out);
    }

    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        let mut out = Vec::new();
        encode_command(&a, &mut out);
        self.send_raw(&out);
        self.read()
    }

    /// Reads one reply (panics on timeout or close).
    pub fn read(&mut self) -> Reply {
        loop {
            if let Some((r, used)) = parse_reply(&self.buf).expect("valid reply") {
                self.buf.drain(..used);
                return r;
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("read");
            assert!(n > 0, "server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// True if the server closed the connection (after draining what it sent).
    pub fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        loop {
            match self.s.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

pub fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

pub fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// INFO's integer field `name`.
pub fn info_field(c: &mut Client, name: &str) -> u64 {
    let text = match c.cmd(&["INFO"]) {
        Reply::Bulk(Some(t)) => String::from_utf8(t).unwrap(),
        r => panic!("{r:?}"),
    };
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO has no {name}: {text}"));
    line.trim().parse().unwrap()
}

/// The metrics page of `server`.
pub fn metrics(server: &Server) -> String {
    let addr = server.metrics_addr().expect("metrics enabled");
    let mut s = TcpStream::connect(addr).expect("metrics connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).expect("metrics read");
    body
}

/// The sum of every sample of metric `name` whose labels contain `labels` ("" for any).
pub fn metric(page: &str, name: &str, labels: &str) -> u64 {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            let (metric, rest) = key.split_once('{').unwrap_or((key, ""));
            (metric == name && rest.contains(labels)).then(|| value.parse::<f64>().ok())?
        })
        .map(|v| v as u64)
        .sum()
}
