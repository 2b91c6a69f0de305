//! OCSM over UDP (seed 004; default `127.0.0.1:7071`): datagrams of 32- or 64-byte messages
//! turned into engine operations, executed by the shards that own the keys, and answered with
//! one datagram per request.
//!
//! Three paths, chosen by `ocsm_path` (the seed compares a socket implementation with a
//! kernel-bypass one; ours is a plain socket loop against batched ones):
//!
//! ```text
//!  plain          own thread: recv_from ─► decode ─► one engine batch per touched shard over
//!                 the shard queues (wait) ─► encode ─► send_to        one datagram at a time
//!  batched        own thread: recvmmsg (≤ ocsm_burst_datagrams_max, MSG_WAITFORONE) ─► decode
//!                 all ─► ONE engine batch per shard for the whole burst over the queues ─►
//!                 encode all ─► sendmmsg
//!  batched-shard  the batched loop as a task of shard 0's thread (tokio readiness on the
//!                 socket); shard 0's operations run on its engine directly, no thread hop
//! ```
//!
//! The batched paths save, per datagram, a receive and a send system call and a round trip
//! through the shard queues (two thread switches; the shard wakes once per burst), and give the
//! engine's pipeline bigger batches. All paths share the planning and reply code in [`Burst`],
//! so they answer byte-for-byte the same (the tests run one suite on all three).
//!
//! Semantics (ours, docs/protocol.md): insert = put if absent (`Exists` otherwise), modify =
//! replace a present key (`NotFound` otherwise), delete, search = get. A value is the message's
//! whole value field (head and extra units), padding included.
//!
//! Anti-amplification: every UDP sender is unauthenticated, so a reply is never larger than
//! its request. Each reply message is at most as long as its request message (a search whose
//! value does not fit the request's slot gets `Truncated` and the slot's worth of value), error
//! replies are the 6-byte header, and a datagram shorter than the header gets no reply. The
//! sender checks it once more before every send.
//!
//! Non-goals: authentication, retransmission (clients retry), routing a datagram's messages
//! anywhere but their owning shards.

use std::net::{SocketAddr, UdpSocket};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use directkv_engine::{Op, Status as EngineStatus};
use directkv_proto::ocsm::{
    decode_message, decode_request, encode_error, encode_header, ErrorCode, Header, OcsmLimits,
    Opcode, Status, HEADER_BYTES,
};
use serde::Deserialize;
use tokio::sync::{mpsc, watch};

use crate::plan::Pending;
use mmsg::{enable_gro, MmsgRecv, MmsgSend};

mod mmsg;
use crate::shard::{Job, ServerStats, ShardCtx};
use crate::udp::execute_blocking;

/// How often the receive loops check for shutdown.
const STOP_POLL: Duration = Duration::from_millis(200);

/// Which receive/execute/send loop serves OCSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OcsmPath {
    /// One datagram at a time on a thread of its own: `recv_from`, execute, `send_to`.
    #[default]
    Plain,
    /// Bursts on a thread of its own: `recvmmsg`, one engine batch per shard for the burst
    /// over the shard queues, `sendmmsg`.
    Batched,
    /// The same bursts as a task of shard 0's thread, its own keys executed with no thread
    /// hop (measured slower than `batched` on a busy two-core machine: one thread gets a
    /// smaller share of a contended core than two).
    BatchedShard,
}

impl OcsmPath {
    pub fn parse(s: &str) -> Option<OcsmPath> {
        match s {
            "plain" => Some(OcsmPath::Plain),
            "batched" => Some(OcsmPath::Batched),
            "batched-shard" => Some(OcsmPath::BatchedShard),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OcsmPath::Plain => "plain",
            OcsmPath::Batched => "batched",
            OcsmPath::BatchedShard => "batched-shard",
        }
    }
}

/// Counters for metrics (all paths).
#[derive(Debug, Default)]
pub struct OcsmStats {
    pub datagrams: AtomicU64,
    pub messages: AtomicU64,
    /// Datagrams refused (answered with an error datagram, or dropped when too short).
    pub errors: AtomicU64,
    /// Bursts the batched path received (datagrams / bursts = mean burst size).
    pub bursts: AtomicU64,
    /// Segmented (GSO) sends of the batched paths, each several replies to one sender.
    pub segmented_sends: AtomicU64,
}

/// What the OCSM thread needs besides its socket.
pub struct OcsmSpawn {
    pub sock: UdpSocket,
    pub peers: Arc<Vec<mpsc::Sender<Job>>>,
    pub path: OcsmPath,
    pub limits: OcsmLimits,
    pub burst_datagrams_max: usize,
    pub stats: Arc<ServerStats>,
    pub stop: watch::Receiver<bool>,
}

/// The plain and batched paths: serve from their own thread until `stop` turns true.
pub fn serve_thread(s: OcsmSpawn) {
    let _ = s.sock.set_read_timeout(Some(STOP_POLL));
    let burst = Burst::new(s.peers.len(), s.limits, s.stats.clone());
    if s.path == OcsmPath::Batched {
        batched_thread(&s, burst);
    } else {
        plain(&s, burst);
    }
}

fn batched_thread(s: &OcsmSpawn, mut burst: Burst) {
    let fd = s.sock.as_raw_fd();
    let n_max = s.burst_datagrams_max.max(1);
    let gro = enable_gro(fd);
    let mut rx = MmsgRecv::new(n_max);
    let mut tx = MmsgSend::new(true);
    tracing::debug!(gro, "OCSM batched path");
    while !*s.stop.borrow() {
        // Blocks for the first datagram (up to the read timeout), then takes what is waiting.
        let n = match rx.recv(fd, libc::MSG_WAITFORONE) {
            Ok(n) if n > 0 => n,
            _ => continue,
        };
        s.stats.ocsm.bursts.fetch_add(1, Ordering::Relaxed);
        burst.answer_blocking(&*rx, &s.peers);
        tx.prepare(&rx, n, |i| burst.reply(i));
        s.stats
            .ocsm
            .segmented_sends
            .fetch_add(tx.segmented() as u64, Ordering::Relaxed);
        // A blocking socket: sendmmsg waits for send-buffer room itself.
        tx.send_some(fd, 0);
    }
}

fn plain(s: &OcsmSpawn, mut burst: Burst) {
    // One byte more than the limit, so an oversized datagram is seen as such.
    let mut buf = vec![0u8; s.limits.datagram_bytes_max + 1];
    while !*s.stop.borrow() {
        let Ok((n, from)) = s.sock.recv_from(&mut buf) else {
            continue;
        };
        burst.answer_blocking(&buf[..n], &s.peers);
        if let Some(r) = burst.reply(0) {
            let _ = s.sock.send_to(r, from);
        }
    }
}

/// The batched-shard path: a task of the shard thread that owns shard 0 (`shard::run` spawns it), so
/// that operations on that shard's keys run on its engine directly, with no thread hop; other
/// shards' operations go over their queues, one batch per shard per burst.
pub async fn serve_batched(ctx: Rc<ShardCtx>, s: OcsmSpawn) {
    let OcsmSpawn {
        sock,
        limits,
        burst_datagrams_max,
        stats,
        mut stop,
        ..
    } = s;
    let fd = sock.as_raw_fd();
    let sock = match sock
        .set_nonblocking(true)
        .and_then(|_| tokio::net::UdpSocket::from_std(sock))
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "OCSM socket cannot join the shard's event loop");
            return;
        }
    };
    let n_max = burst_datagrams_max.max(1);
    let mut burst = Burst::new(ctx.shards(), limits, stats.clone());
    enable_gro(fd);
    let mut rx = MmsgRecv::new(n_max);
    let mut tx = MmsgSend::new(true);
    loop {
        tokio::select! {
            r = sock.readable() => if r.is_err() { return },
            _ = stop.changed() => return,
        }
        let n = match sock.try_io(tokio::io::Interest::READABLE, || {
            rx.recv(fd, libc::MSG_DONTWAIT)
        }) {
            Ok(n) => n,
            Err(_) => continue,
        };
        ctx.activity.touch();
        stats.ocsm.bursts.fetch_add(1, Ordering::Relaxed);
        burst.plan_all(&*rx);
        crate::conn::execute(&ctx, &mut burst.pending).await;
        burst.encode_all(&*rx);
        tx.prepare(&rx, n, |i| burst.reply(i));
        stats
            .ocsm
            .segmented_sends
            .fetch_add(tx.segmented() as u64, Ordering::Relaxed);
        // A full send buffer makes the burst wait for room rather than drop its replies.
        while !tx.send_some(fd, libc::MSG_DONTWAIT) {
            if sock.writable().await.is_err() {
                return;
            }
        }
    }
}

/// The datagrams of one burst (the receive buffers of `recvmmsg`, or one `recv_from` buffer).
trait Datagrams {
    fn count(&self) -> usize;
    fn datagram(&self, i: usize) -> &[u8];
}

impl Datagrams for MmsgRecv {
    fn count(&self) -> usize {
        self.received()
    }

    fn datagram(&self, i: usize) -> &[u8] {
        MmsgRecv::datagram(self, i)
    }
}

impl Datagrams for [u8] {
    fn count(&self) -> usize {
        1
    }

    fn datagram(&self, _: usize) -> &[u8] {
        self
    }
}

/// A planned datagram: its header and its messages' range in `Burst::slots`.
type Plan = Result<(Header, Range<usize>), (u32, ErrorCode)>;

/// One burst of datagrams planned, executed and answered; reused for every burst.
struct Burst {
    pending: Pending,
    limits: OcsmLimits,
    stats: Arc<ServerStats>,
    /// Per datagram: the reply bytes' range in `out` (empty = no reply).
    replies: Vec<Range<usize>>,
    /// Per datagram: its header and planned messages, or the refusal.
    plans: Vec<Plan>,
    /// Per planned message: its operation's index in `pending` and its offset in the datagram.
    slots: Vec<(usize, usize)>,
    out: Vec<u8>,
    /// A multi-unit value made contiguous (head and tail are apart on the wire).
    value: Vec<u8>,
}

impl Burst {
    fn new(shards: usize, limits: OcsmLimits, stats: Arc<ServerStats>) -> Burst {
        Burst {
            pending: Pending::new(shards),
            limits,
            stats,
            replies: Vec::new(),
            plans: Vec::new(),
            slots: Vec::new(),
            out: Vec::new(),
            value: Vec::new(),
        }
    }

    /// The reply to the `i`-th datagram of the last burst, if it gets one.
    fn reply(&self, i: usize) -> Option<&[u8]> {
        let r = self.replies.get(i)?.clone();
        (!r.is_empty()).then(|| &self.out[r])
    }

    /// Plans every datagram of a burst: their operations land in `pending`, per shard.
    fn plan_all(&mut self, d: &(impl Datagrams + ?Sized)) {
        self.pending.clear();
        self.plans.clear();
        self.slots.clear();
        for i in 0..d.count() {
            let plan = self.plan(d.datagram(i));
            self.plans.push(plan);
        }
    }

    /// Encodes every reply of a burst from the shards' results.
    fn encode_all(&mut self, d: &(impl Datagrams + ?Sized)) {
        self.out.clear();
        self.replies.clear();
        for i in 0..d.count() {
            let d = d.datagram(i);
            let start = self.out.len();
            self.encode_reply(i, d);
            // Anti-amplification, checked where it matters: never send more than was received.
            if self.out.len() - start > d.len() {
                debug_assert!(false, "OCSM reply larger than its request");
                self.out.truncate(start);
            }
            self.replies.push(start..self.out.len());
        }
        let o = &self.stats.ocsm;
        o.datagrams.fetch_add(d.count() as u64, Ordering::Relaxed);
        o.messages
            .fetch_add(self.slots.len() as u64, Ordering::Relaxed);
    }

    /// Plans, executes (sending every shard its batch and waiting) and encodes, from a thread
    /// outside the shards.
    fn answer_blocking(&mut self, d: &(impl Datagrams + ?Sized), peers: &[mpsc::Sender<Job>]) {
        self.plan_all(d);
        if !self.pending.locs.is_empty() {
            execute_blocking(peers, &mut self.pending);
        }
        self.encode_all(d);
    }

    fn plan(&mut self, d: &[u8]) -> Plan {
        let dg = decode_request(d, &self.limits).map_err(|e| {
            self.stats.ocsm.errors.fetch_add(1, Ordering::Relaxed);
            (e.sequence, e.code)
        })?;
        let first = self.slots.len();
        let mut offset = HEADER_BYTES;
        for m in dg.messages() {
            let value: &[u8] = if m.value_tail.is_empty() {
                m.value_head
            } else {
                self.value.clear();
                m.value_into(&mut self.value);
                &self.value
            };
            let op = match m.op().expect("decode_request checked the opcode") {
                Opcode::Insert => Op::put_nx(m.key, value),
                Opcode::Modify => Op::put_xx(m.key, value),
                Opcode::Delete => Op::delete(m.key),
                Opcode::Search => Op::get(m.key),
            };
            let i = self.pending.op(&op);
            self.slots.push((i, offset));
            offset += m.length as usize * dg.header.size.unit_bytes();
        }
        Ok((dg.header, first..self.slots.len()))
    }

    fn encode_reply(&mut self, i: usize, d: &[u8]) {
        let (header, slots) = match &self.plans[i] {
            Ok((h, r)) => (*h, r.clone()),
            Err((_, ErrorCode::ShortHeader)) => return,
            Err((seq, code)) => return encode_error(*seq, *code, &mut self.out),
        };
        encode_header(
            &Header {
                response: true,
                ..header
            },
            &mut self.out,
        );
        let size = header.size;
        for &(op, offset) in &self.slots[slots] {
            let Ok(Some((m, _))) = decode_message(&d[offset..], size) else {
                unreachable!("planned messages decode at their offsets");
            };
            let (status, data) = self.pending.result(op);
            let op = m.op().expect("checked");
            let status = match (status, op) {
                (EngineStatus::Ok, _) => Status::Ok,
                (EngineStatus::NotFound, _) => Status::NotFound,
                (EngineStatus::NotStored, Opcode::Insert) => Status::Exists,
                (EngineStatus::NotStored, _) => Status::NotFound,
                _ => Status::Failed,
            };
            // A search's reply may use as many units as the request did, no more.
            let (status, value, length) = if op == Opcode::Search && status == Status::Ok {
                let room = size.value_bytes(m.length);
                if data.len() > room {
                    (Status::Truncated, &data[..room], m.length)
                } else {
                    (status, data, 1)
                }
            } else {
                (status, &[][..], 1)
            };
            m.encode_reply(size, status, value, length, &mut self.out)
                .expect("a value that fits the request's units fits 255 units");
        }
    }
}

/// Binds the OCSM socket and asks for receive and send buffers of `recv_buffer_bytes` (0 =
/// keep the system defaults; the kernel caps the requests at `net.core.{r,w}mem_max`).
pub fn bind(
    bind: &str,
    port: u16,
    recv_buffer_bytes: usize,
) -> Result<(UdpSocket, SocketAddr), String> {
    let sock = UdpSocket::bind((bind, port))
        .map_err(|e| format!("cannot bind OCSM UDP {bind}:{port}: {e}"))?;
    if recv_buffer_bytes > 0 {
        let bytes = recv_buffer_bytes.min(i32::MAX as usize) as libc::c_int;
        // The send buffer gets the same size: a burst's replies leave in one sendmmsg.
        for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
            // SAFETY: setsockopt reads size_of::<c_int>() bytes from a live c_int. A refusal
            // only leaves the default buffer, so its result is ignored.
            unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&bytes as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as u32,
                );
            }
        }
    }
    let addr = sock.local_addr().map_err(|e| e.to_string())?;
    Ok((sock, addr))
}
