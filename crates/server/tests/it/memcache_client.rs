//! A tiny memcached client for the memcache_* tests: raw requests in, reply lines out.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use directkv_server::Server;

pub struct Mc {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Mc {
    /// A connection to `server`'s memcached port.
    pub fn connect(server: &Server) -> Mc {
        Mc::connect_to(server.memcache_addr().expect("the memcached port is on"))
    }

    /// A connection to any memcached server (a real memcached, for comparisons).
    pub fn connect_to(addr: std::net::SocketAddr) -> Mc {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Mc { s, buf: Vec::new() }
    }

    /// Every `stats` field, by name.
    pub fn stats(&mut self) -> std::collections::HashMap<String, String> {
        self.send(b"stats\r\n");
        let mut all = std::collections::HashMap::new();
        loop {
            let line = self.line();
            if line == "END" {
                return all;
            }
            let mut words = line.splitn(3, ' ');
            assert_eq!(words.next(), Some("STAT"), "{line}");
            let name = words.next().unwrap_or_default().to_string();
            all.insert(name, words.next().unwrap_or_default().to_string());
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    /// Reads one reply line, without its `\r\n` (panics on timeout or close).
    pub fn line(&mut self) -> String {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..at]).into_owned();
                self.buf.drain(..at + 2);
                return line;
            }
            self.fill();
        }
    }

    /// Reads exactly `n` bytes and the `\r\n` after them.
    pub fn block(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n + 2 {
            self.fill();
        }
        let data = self.buf[..n].to_vec();
        assert_eq!(
            &self.buf[n..n + 2],
            b"\r\n",
            "a data block ends with \\r\\n"
        );
        self.buf.drain(..n + 2);
        data
    }

    fn fill(&mut self) {
        let mut chunk = [0u8; 65536];
        let n = self.s.read(&mut chunk).expect("read a reply");
        assert!(n > 0, "the server closed the connection");
        self.buf.extend_from_slice(&chunk[..n]);
    }

    /// Sends `request` and checks that the next lines are `lines`.
    pub fn expect(&mut self, request: &str, lines: &[&str]) {
        self.send(request.as_bytes());
        for want in lines {
            let got = self.line();
            assert_eq!(got, *want, "reply to {request:?}");
        }
    }

    /// Sends `request` and returns its one-line reply.
    pub fn cmd(&mut self, request: &str) -> String {
        self.send(request.as_bytes());
        self.line()
    }

    /// `mn` and its `MN`: proves every reply before it was read (quiet mode, noreply).
    pub fn sync(&mut self) {
        self.expect("mn\r\n", &["MN"]);
    }

    /// True if the server closed the connection (after draining what it sent).
    pub fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        loop {
            match self.s.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => continue,
                // Closed with our bytes unread: the kernel answers with a reset.
                Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        }
    }

    /// A `stats` field.
    pub fn stat(&mut self, name: &str) -> String {
        self.send(b"stats\r\n");
        let mut found = None;
        loop {
            let line = self.line();
            if line == "END" {
                break;
            }
            let mut words = line.splitn(3, ' ');
            assert_eq!(words.next(), Some("STAT"), "{line}");
            if words.next() == Some(name) {
                found = words.next().map(str::to_string);
            }
        }
        found.unwrap_or_else(|| panic!("stats has no {name}"))
    }
}

/// The Unix time now, seconds.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}
