//! The soak's hostile clients: each issue 19 attack as a loop that reconnects until the soak
//! stops. Each loop counts its attempts (one attack sent), the attempts the server ended by
//! closing the connection, and connects that failed; none of them checks an answer, because
//! the soak judges the server by its panics, its memory and how it serves the well-behaved
//! clients meanwhile.
//!
//! ```text
//!   unauth-64mib-bulk       SET with a 64 MiB bulk, before AUTH
//!   unauth-huge-multibulk   *1000000 arguments (and *2^31), before AUTH
//!   mget-1mib               AUTH, MGET of the 1 MiB key MGET_KEYS times, read a little
//!   native-1024-gets        HELLO, one frame of 1024 GETs of the 1 MiB key, read a little
//!   udp-4096-gets           one datagram of 4096 GETs of the 1 MiB key to the native UDP port
//!   resp-non-reader         AUTH, GETs of the 1 MiB key pipelined, never read
//!   native-non-reader       HELLO, frames of GETs of the 1 MiB key pipelined, never read
//!   slowloris               a multibulk trickled one byte per 10 ms, before AUTH
//!   http-post               POST / HTTP/1.1 with RESP inline commands in the body
//!   garbage-resp            random bytes on the RESP port
//!   garbage-native          random bytes after a native magic byte
//!   garbage-udp             random datagrams to the native UDP and OCSM ports
//!   connection-flood        up to flood_connections connections held open, then dropped
//!   mset-at-oom             20-key MSETs of 64 KiB values into the full arena
//! ```
//!
//! Non-goals: finding new attacks (the fuzz targets do), measuring the attacks' speed.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use directkv_proto::native::{encode_request, NativeLimits, NativeOp};
use directkv_proto::resp::Reply;
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use serde::Serialize;

use super::wire::{self, Drained, Resp};
use super::{Soak, BIG_KEY};

/// Bytes of the unauthenticated bulk (the old pre-AUTH buffer limit).
pub const UNAUTH_BULK_BYTES: usize = 64 << 20;
/// Arguments announced by the huge multibulk.
pub const HUGE_MULTIBULK_ARGS: usize = 1_000_000;
/// Bytes a huge multibulk sends before the client gives up and reconnects.
const HUGE_MULTIBULK_SEND_MAX: usize = 64 << 20;
/// Keys in one hostile MGET (each the 1 MiB value: a 2 GiB reply if the server built it).
pub const MGET_KEYS: usize = 2000;
/// GETs in one hostile native frame.
pub const NATIVE_GETS: usize = 1024;
/// GETs in one hostile UDP datagram.
pub const UDP_GETS: usize = 4096;
/// Bytes a client that asked for a large reply reads before it hangs up.
const READ_SOME_BYTES: usize = 8 << 20;
/// How long such a client reads.
const READ_SOME_TIME: Duration = Duration::from_secs(2);
/// How long a non-reader keeps its connection once the server stops taking its requests.
const NON_READER_HOLD: Duration = Duration::from_secs(3);
/// Bytes a non-reader sends at most per connection.
const NON_READER_SEND_MAX: usize = 256 << 20;
/// The slowloris' pace: one byte per this.
const TRICKLE_INTERVAL: Duration = Duration::from_millis(10);
/// How long a slowloris trickles on one connection before it starts again.
const TRICKLE_SPAN: Duration = Duration::from_secs(30);
/// Bytes of one burst of garbage.
const GARBAGE_BYTES: usize = 4096;
/// How long a flood holds its connections.
const FLOOD_HOLD: Duration = Duration::from_secs(2);
/// Keys and value bytes of one MSET at out-of-memory.
const OOM_MSET_KEYS: usize = 20;
const OOM_VALUE_BYTES: usize = 64 << 10;
/// How long the MSET client waits for a reply before it reconnects.
const OOM_PATIENCE: Duration = Duration::from_secs(5);
/// Pause between two attacks of the light loops (datagrams, MSETs), so that they attack all
/// the time without taking the machine's cores from the server.
const PACE: Duration = Duration::from_millis(5);
/// Pause after a failed connect.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// One hostile client's counts, updated while it runs.
#[derive(Debug, Default)]
pub struct Counters {
    pub attempts: AtomicU64,
    pub server_closed: AtomicU64,
    pub connect_failed: AtomicU64,
    /// The most connections the flood held at once (other clients: 0).
    pub held_max: AtomicU64,
    /// MSETs at out-of-memory that stored part of their keys (other clients: 0).
    pub partial_writes: AtomicU64,
}

/// A hostile client's counts at the end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostileStats {
    pub name: String,
    pub attempts: u64,
    pub server_closed: u64,
    pub connect_failed: u64,
    pub held_max: u64,
    pub partial_writes: u64,
}

impl Counters {
    pub fn stats(&self, name: &str) -> HostileStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        HostileStats {
            name: name.to_string(),
            attempts: l(&self.attempts),
            server_closed: l(&self.server_closed),
            connect_failed: l(&self.connect_failed),
            held_max: l(&self.held_max),
            partial_writes: l(&self.partial_writes),
        }
    }
    fn attempt(&self) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
    }
    fn closed(&self, how: Drained) {
        if how == Drained::Closed {
            self.server_closed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A hostile client: its name and its loop.
pub type Attack = fn(&Soak, &Counters);

/// Every hostile client, in the order of the report.
pub const ATTACKS: &[(&str, Attack)] = &[
    ("unauth-64mib-bulk", unauth_bulk),
    ("unauth-huge-multibulk", unauth_multibulk),
    ("mget-1mib", mget_big),
    ("native-1024-gets", native_gets),
    ("udp-4096-gets", udp_gets),
    ("resp-non-reader", resp_non_reader),
    ("native-non-reader", native_non_reader),
    ("slowloris", slowloris),
    ("http-post", http_post),
    ("garbage-resp", garbage_resp),
    ("garbage-native", garbage_native),
    ("garbage-udp", garbage_udp),
    ("connection-flood", flood),
    ("mset-at-oom", mset_at_oom),
];

/// A connection, or None (counted, after a pause) when the server refused it.
fn dial(soak: &Soak, c: &Counters) -> Option<TcpStream> {
    match wire::connect(soak.target.addr) {
        Ok(s) => Some(s),
        Err(_) => {
            c.connect_failed.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(RETRY_PAUSE);
            None
        }
    }
}

/// Writes `bytes` in chunks until done, the stop, or the server stops taking them; the server
/// closing the connection is counted.
fn send_all(soak: &Soak, c: &Counters, s: &mut TcpStream, bytes: &[u8]) -> bool {
    for chunk in bytes.chunks(64 << 10) {
        if soak.stopped() {
            return false;
        }
        match s.write_all(chunk) {
            Ok(()) => {}
            Err(e) if wire::is_timeout(&e) => return false,
            Err(_) => {
                c.closed(Drained::Closed);
                return false;
            }
        }
    }
    true
}

/// Reads what the server answers (up to a budget) and counts a close.
fn read_some(soak: &Soak, c: &Counters, s: &mut TcpStream) {
    let (_, how) = wire::drain(s, READ_SOME_BYTES, READ_SOME_TIME, &|| soak.stopped());
    c.closed(how);
}

fn unauth_bulk(soak: &Soak, c: &Counters) {
    let head = format!("*3\r\n$3\r\nSET\r\n$4\r\nbulk\r\n${UNAUTH_BULK_BYTES}\r\n");
    let body = vec![b'b'; 1 << 20];
    while !soak.stopped() {
        let Some(mut s) = dial(soak, c) else { continue };
        c.attempt();
        if !send_all(soak, c, &mut s, head.as_bytes()) {
            continue;
        }
        let mut sent = 0;
        while sent < UNAUTH_BULK_BYTES && send_all(soak, c, &mut s, &body) {
            sent += body.len();
        }
        if sent >= UNAUTH_BULK_BYTES {
            read_some(soak, c, &mut s);
        }
    }
}

fn unauth_multibulk(soak: &Soak, c: &Counters) {
    let arg = b"$1\r\nx\r\n".repeat(8192);
    let mut round = 0u64;
    while !soak.stopped() {
        let Some(mut s) = dial(soak, c) else { continue };
        c.attempt();
        round += 1;
        // Every other time, a count past any 32-bit length.
        let head = if round.is_multiple_of(2) {
            "*2147483648\r\n".to_string()
        } else {
            format!("*{HUGE_MULTIBULK_ARGS}\r\n")
        };
        if !send_all(soak, c, &mut s, head.as_bytes()) {
            continue;
        }
        let mut sent = 0;
        while sent < HUGE_MULTIBULK_SEND_MAX && send_all(soak, c, &mut s, &arg) {
            sent += arg.len();
        }
        read_some(soak, c, &mut s);
    }
}

/// A connection with AUTH sent (its reply left to whoever reads next): an attacker with the
/// password does not wait for the answer before it sends what it came for.
fn auth_dial(soak: &Soak, c: &Counters) -> Option<TcpStream> {
    let mut s = dial(soak, c)?;
    let mut auth = Vec::new();
    directkv_proto::resp::encode_command(&[b"AUTH", soak.target.password.as_bytes()], &mut auth);
    (soak.target.password.is_empty() || send_all(soak, c, &mut s, &auth)).then_some(s)
}

fn mget_big(soak: &Soak, c: &Counters) {
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(std::iter::repeat_n(BIG_KEY, MGET_KEYS));
    let mut req = Vec::new();
    directkv_proto::resp::encode_command(&args, &mut req);
    while !soak.stopped() {
        let Some(mut s) = auth_dial(soak, c) else {
            continue;
        };
        c.attempt();
        if send_all(soak, c, &mut s, &req) {
            read_some(soak, c, &mut s);
        }
    }
}

/// A native connection after a HELLO with the password (its reply left unread).
fn native_dial(soak: &Soak, c: &Counters) -> Option<TcpStream> {
    let mut s = dial(soak, c)?;
    send_all(soak, c, &mut s, &wire::native_hello(&soak.target.password)).then_some(s)
}

fn native_gets(soak: &Soak, c: &Counters) {
    let frame = gets_frame(NATIVE_GETS);
    while !soak.stopped() {
        let Some(mut s) = native_dial(soak, c) else {
            continue;
        };
        c.attempt();
        if send_all(soak, c, &mut s, &frame) {
            read_some(soak, c, &mut s);
        }
    }
}

/// One native request frame of `n` GETs of the 1 MiB key.
fn gets_frame(n: usize) -> Vec<u8> {
    let ops = vec![NativeOp::get(BIG_KEY); n];
    let mut out = Vec::new();
    encode_request(7, &ops, &NativeLimits::DEFAULT, &mut out).expect("the GETs fit a frame");
    out
}

/// A UDP socket connected to `to`, with the soak's timeouts.
fn udp_to(to: SocketAddr) -> Option<UdpSocket> {
    let u = UdpSocket::bind("127.0.0.1:0").ok()?;
    u.connect(to).ok()?;
    u.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    Some(u)
}

fn udp_gets(soak: &Soak, c: &Counters) {
    let datagram = gets_frame(UDP_GETS);
    let Some(u) = udp_to(soak.target.addr) else {
        c.connect_failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let mut buf = vec![0u8; 64 << 10];
    while !soak.stopped() {
        c.attempt();
        let _ = u.send(&datagram);
        // An answer (an error reply, if the server is right) or nothing.
        let _ = u.recv(&mut buf);
        std::thread::sleep(PACE);
    }
}

/// Writes `request` again and again without reading until the server stops taking it, then
/// holds the connection a while.
fn non_reader(soak: &Soak, c: &Counters, mut s: TcpStream, request: &[u8]) {
    let batch = request.repeat((64 << 10) / request.len().max(1) + 1);
    let mut sent = 0;
    while sent < NON_READER_SEND_MAX && send_all(soak, c, &mut s, &batch) {
        sent += batch.len();
    }
    let until = Instant::now() + NON_READER_HOLD;
    while Instant::now() < until && !soak.stopped() {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn resp_non_reader(soak: &Soak, c: &Counters) {
    let mut req = Vec::new();
    directkv_proto::resp::encode_command(&[b"GET", BIG_KEY], &mut req);
    while !soak.stopped() {
        let Some(s) = auth_dial(soak, c) else {
            continue;
        };
        c.attempt();
        non_reader(soak, c, s, &req);
    }
}

fn native_non_reader(soak: &Soak, c: &Counters) {
    let frame = gets_frame(1);
    while !soak.stopped() {
        let Some(s) = native_dial(soak, c) else {
            continue;
        };
        c.attempt();
        non_reader(soak, c, s, &frame);
    }
}

fn slowloris(soak: &Soak, c: &Counters) {
    // A multibulk that never ends: every argument announced and sent one byte at a time.
    let mut text = b"*1000\r\n$3\r\nSET\r\n".to_vec();
    text.extend(b"$1\r\nx\r\n".repeat(999));
    while !soak.stopped() {
        let Some(mut s) = dial(soak, c) else { continue };
        c.attempt();
        let until = Instant::now() + TRICKLE_SPAN;
        for b in &text {
            if soak.stopped() || Instant::now() >= until {
                break;
            }
            match s.write_all(std::slice::from_ref(b)) {
                Ok(()) => std::thread::sleep(TRICKLE_INTERVAL),
                Err(_) => {
                    c.closed(Drained::Closed);
                    break;
                }
            }
        }
    }
}

fn http_post(soak: &Soak, c: &Counters) {
    let body = "SET pwned-by-http yes\r\n";
    let req = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    while !soak.stopped() {
        let Some(mut s) = dial(soak, c) else { continue };
        c.attempt();
        if send_all(soak, c, &mut s, req.as_bytes()) {
            let (_, how) = wire::drain(&mut s, 1 << 20, Duration::from_secs(1), &|| soak.stopped());
            c.closed(how);
        }
        std::thread::sleep(PACE);
    }
}

fn garbage(soak: &Soak, c: &Counters, first: Option<u8>, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut bytes = vec![0u8; GARBAGE_BYTES];
    while !soak.stopped() {
        let Some(mut s) = dial(soak, c) else { continue };
        c.attempt();
        rng.fill_bytes(&mut bytes);
        if let Some(b) = first {
            bytes[0] = b;
        }
        if send_all(soak, c, &mut s, &bytes) {
            let (_, how) = wire::drain(&mut s, 1 << 20, Duration::from_millis(200), &|| {
                soak.stopped()
            });
            c.closed(how);
        }
        std::thread::sleep(PACE);
    }
}

fn garbage_resp(soak: &Soak, c: &Counters) {
    garbage(soak, c, None, soak.seed)
}

fn garbage_native(soak: &Soak, c: &Counters) {
    garbage(
        soak,
        c,
        Some(directkv_proto::native::MAGIC),
        soak.seed.wrapping_add(1),
    )
}

fn garbage_udp(soak: &Soak, c: &Counters) {
    let mut rng = SmallRng::seed_from_u64(soak.seed.wrapping_add(2));
    let ports: Vec<UdpSocket> = [Some(soak.target.addr), soak.target.ocsm]
        .into_iter()
        .flatten()
        .filter_map(udp_to)
        .collect();
    if ports.is_empty() {
        c.connect_failed.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut bytes = vec![0u8; 1400];
    let mut buf = vec![0u8; 64 << 10];
    while !soak.stopped() {
        for u in &ports {
            c.attempt();
            let len = 1 + (rng.next_u32() as usize % bytes.len());
            rng.fill_bytes(&mut bytes[..len]);
            let _ = u.send(&bytes[..len]);
        }
        for u in &ports {
            while u.recv(&mut buf).is_ok() {}
        }
        std::thread::sleep(PACE);
    }
}

fn flood(soak: &Soak, c: &Counters) {
    while !soak.stopped() {
        c.attempt();
        let mut held = Vec::new();
        while held.len() < soak.flood_connections && !soak.stopped() {
            match TcpStream::connect_timeout(&soak.target.addr, Duration::from_millis(200)) {
                Ok(s) => held.push(s),
                Err(_) => {
                    c.connect_failed.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
        c.held_max.fetch_max(held.len() as u64, Ordering::Relaxed);
        let until = Instant::now() + FLOOD_HOLD;
        while Instant::now() < until && !soak.stopped() {
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(held);
        std::thread::sleep(RETRY_PAUSE);
    }
}

fn mset_at_oom(soak: &Soak, c: &Counters) {
    let value = vec![b'o'; OOM_VALUE_BYTES];
    let mut round = 0u64;
    while !soak.stopped() {
        let Some(s) = auth_dial(soak, c) else {
            continue;
        };
        let mut r = Resp::from_stream(s);
        // AUTH's reply comes first.
        let mut authed = soak.target.password.is_empty();
        while !soak.stopped() {
            round += 1;
            let keys: Vec<Vec<u8>> = (0..OOM_MSET_KEYS)
                .map(|i| format!("oom:{round}:{i}").into_bytes())
                .collect();
            let mut args: Vec<&[u8]> = vec![b"MSET"];
            for k in &keys {
                args.push(k);
                args.push(&value);
            }
            c.attempt();
            if r.send(&args).is_err() {
                c.closed(Drained::Closed);
                break;
            }
            if !authed {
                if !matches!(r.read(OOM_PATIENCE), Ok(Reply::Simple(_))) {
                    break;
                }
                authed = true;
            }
            let Ok(reply) = r.read(OOM_PATIENCE) else {
                c.closed(Drained::Closed);
                break;
            };
            if matches!(reply, Reply::Error(_)) {
                // Refused: all or nothing means none of its keys exists.
                let mut exists: Vec<&[u8]> = vec![b"EXISTS"];
                exists.extend(keys.iter().map(|k| k.as_slice()));
                if let Ok(Reply::Integer(n)) = r.cmd(&exists, OOM_PATIENCE) {
                    if n > 0 {
                        c.partial_writes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            std::thread::sleep(PACE);
        }
    }
}
