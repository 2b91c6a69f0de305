//! Blocking sockets for the soak's clients: a RESP connection that sends commands and reads
//! whole replies (small ones: the well-behaved clients' and the set-up's), a native HELLO, and
//! reads that drain and discard what a hostile client asked for without ever holding it.
//!
//! Every socket gets read and write timeouts so that a client notices the stop flag within
//! `IO_TIMEOUT` whatever the server does. Non-goals: pipelining, large replies, RESP3.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use directkv_proto::native::{encode_request_frame, Hello, NativeLimits, Request, RequestFrame};
use directkv_proto::resp::{encode_command, parse_reply, Reply};

/// Read and write timeout of every soak socket: the longest a client goes without looking at
/// the stop flag.
pub const IO_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a connect may take before the attempt counts as refused.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest reply a `Resp` connection accepts, bytes (the soak's own replies are small).
const REPLY_BYTES_MAX: usize = 4 << 20;

/// A TCP connection with the soak's timeouts and no Nagle delay.
pub fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Whether an I/O error is a timeout (the peer is slow or not reading), not a failure.
pub fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// A RESP connection for small request/reply exchanges.
pub struct Resp {
    s: TcpStream,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl Resp {
    /// Connects and, when `password` is not empty, authenticates (an error if AUTH fails).
    pub fn connect(addr: SocketAddr, password: &str) -> Result<Resp, String> {
        let s = connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        let mut c = Resp {
            s,
            buf: Vec::new(),
            out: Vec::new(),
        };
        if !password.is_empty() {
            match c.cmd(&[b"AUTH", password.as_bytes()], Duration::from_secs(5))? {
                Reply::Simple(_) => {}
                other => return Err(format!("AUTH answered {other:?}")),
            }
        }
        Ok(c)
    }

    /// A connection made elsewhere (its replies read from the start).
    pub fn from_stream(s: TcpStream) -> Resp {
        Resp {
            s,
            buf: Vec::new(),
            out: Vec::new(),
        }
    }

    /// Sends one command without waiting for its reply.
    pub fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        self.out.clear();
        encode_command(args, &mut self.out);
        self.s
            .write_all(&self.out)
            .map_err(|e| format!("send: {e}"))
    }

    /// Sends one command and waits up to `patience` for its reply.
    pub fn cmd(&mut self, args: &[&[u8]], patience: Duration) -> Result<Reply, String> {
        self.send(args)?;
        self.read(patience)
    }

    /// Reads one reply, waiting up to `patience`.
    pub fn read(&mut self, patience: Duration) -> Result<Reply, String> {
        let deadline = Instant::now() + patience;
        let mut chunk = [0u8; 16 << 10];
        loop {
            if let Some((reply, n)) = parse_reply(&self.buf).map_err(|e| format!("reply: {e}"))? {
                self.buf.drain(..n);
                return Ok(reply);
            }
            if self.buf.len() > REPLY_BYTES_MAX {
                return Err(format!("reply over {REPLY_BYTES_MAX} bytes"));
            }
            match self.s.read(&mut chunk) {
                Ok(0) => return Err("the server closed the connection".to_string()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if is_timeout(&e) && Instant::now() < deadline => {}
                Err(e) if is_timeout(&e) => {
                    return Err(format!("no reply within {} ms", patience.as_millis()))
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("recv: {e}")),
            }
        }
    }
}

/// The bytes of a native HELLO frame carrying `password`.
pub fn native_hello(password: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let hello = RequestFrame {
        request_id: 1,
        body: Request::Hello(Hello {
            password: password.as_bytes(),
            client_name: b"soak",
        }),
    };
    encode_request_frame(&hello, &NativeLimits::DEFAULT, &mut out).expect("a HELLO fits a frame");
    out
}

/// What a drain saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// The byte budget was reached or the time ran out with the connection open.
    Open,
    /// The server closed the connection (or reset it).
    Closed,
}

/// Reads and discards up to `bytes_max` bytes for at most `patience` (or until `stop`):
/// a client that asked for much and reads some of it, never holding more than one chunk.
pub fn drain(
    s: &mut TcpStream,
    bytes_max: usize,
    patience: Duration,
    stop: &dyn Fn() -> bool,
) -> (usize, Drained) {
    let deadline = Instant::now() + patience;
    let mut chunk = vec![0u8; 64 << 10];
    let mut got = 0usize;
    while got < bytes_max && Instant::now() < deadline && !stop() {
        match s.read(&mut chunk) {
            Ok(0) => return (got, Drained::Closed),
            Ok(n) => got += n,
            Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return (got, Drained::Closed),
        }
    }
    (got, Drained::Open)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_hello_is_one_native_frame() {
        let h = native_hello("pw");
        assert_eq!(h[0], directkv_proto::native::MAGIC);
        let len = directkv_proto::native::frame_len(&h, &NativeLimits::DEFAULT)
            .unwrap()
            .unwrap();
        assert_eq!(len, h.len());
    }

    #[test]
    fn drain_stops_at_close_and_at_its_budget() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(&[7u8; 300_000]).unwrap();
        });
        let mut c = connect(addr).unwrap();
        let never = || false;
        let (got, how) = drain(&mut c, 100_000, Duration::from_secs(10), &never);
        assert!(
            (100_000..300_000).contains(&got) && how == Drained::Open,
            "{got}"
        );
        t.join().unwrap();
        let (rest, how) = drain(&mut c, usize::MAX, Duration::from_secs(10), &never);
        assert_eq!((got + rest, how), (300_000, Drained::Closed));
    }
}
