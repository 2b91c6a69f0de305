//! A real server on a loopback ephemeral port, its Prometheus metrics, and a TCP relay that
//! can be paused (to make a real server look unresponsive without changing it).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

pub use directkv_testkit::server::*;

/// Forwards every connection made to it to `upstream`, byte for byte, unless paused: while
/// paused, bytes are held (not dropped) until `resume`.
/// Dropping it stops accepting; relayed connections end when either side closes.
pub struct Relay {
    pub addr: SocketAddr,
    paused: Arc<(Mutex<bool>, Condvar)>,
    stop: Arc<AtomicBool>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let paused = Arc::new((Mutex::new(false), Condvar::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (paused.clone(), stop.clone());
        let acceptor = std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let p = p.clone();
                    std::thread::spawn(move || pump(from, to, &p));
                }
            }
        });
        Relay {
            addr,
            paused,
            stop,
            acceptor: Some(acceptor),
        }
    }

    pub fn pause(&self) {
        *self.paused.0.lock().unwrap() = true;
    }

    pub fn resume(&self) {
        *self.paused.0.lock().unwrap() = false;
        self.paused.1.notify_all();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.resume();
        self.stop.store(true, Ordering::Relaxed);
        // Wake the blocking accept with a connection of our own.
        let _ = TcpStream::connect(self.addr);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, paused: &(Mutex<bool>, Condvar)) {
    let mut buf = [0u8; 65536];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut p = paused.0.lock().unwrap();
        while *p {
            p = paused.1.wait(p).unwrap();
        }
        drop(p);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
