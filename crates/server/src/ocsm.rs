//! OCSM over UDP (seed 004; default `127.0.0.1:7071`): one blocking thread receives datagrams
//! of 32- or 64-byte messages, turns their messages into engine operations, sends each shard
//! its operations over the shard queues, and replies with one datagram per request.
//!
//! Two paths, chosen by `ocsm_path` (the seed compares a socket implementation with a
//! kernel-bypass one; ours is the plain socket loop against a batched socket loop):
//!
//! ```text
//!  plain    recv_from ─► decode ─► one engine batch (per shard) ─► encode ─► send_to      (x1)
//!  batched  recvmmsg (≤ ocsm_burst_datagrams_max) ─► decode all ─► ONE engine batch per
//!           shard for the whole burst ─► encode all ─► sendmmsg
//! ```
//!
//! The batched path saves, per datagram, a receive and a send system call and a round trip
//! through every touched shard's queue (the shard wakes once per burst, not once per datagram),
//! and gives the engine's pipeline bigger batches. Both paths share the planning and reply code
//! in [`Burst`], so they answer identically (the tests run one suite on both).
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use directkv_engine::{Op, Results, Status as EngineStatus};
use directkv_proto::ocsm::{
    decode_request, encode_error, encode_header, encode_message, ErrorCode, Header, MessageOut,
    OcsmLimits, Opcode, Status,
};
use serde::Deserialize;
use tokio::sync::{mpsc, watch};

use crate::plan::Pending;
use crate::shard::Job;
use crate::udp::execute_blocking;

/// How often the receive loops check for shutdown.
const STOP_POLL: Duration = Duration::from_millis(200);

/// Which receive/execute/send loop serves OCSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OcsmPath {
    /// One datagram at a time: `recv_from`, execute, `send_to`.
    #[default]
    Plain,
    /// Bursts: `recvmmsg`, one engine batch per shard for the burst, `sendmmsg`.
    Batched,
}

impl OcsmPath {
    pub fn parse(s: &str) -> Option<OcsmPath> {
        match s {
            "plain" => Some(OcsmPath::Plain),
            "batched" => Some(OcsmPath::Batched),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OcsmPath::Plain => "plain",
            OcsmPath::Batched => "batched",
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
}

/// What the OCSM thread needs besides its socket.
pub struct OcsmSpawn {
    pub sock: UdpSocket,
    pub peers: Arc<Vec<mpsc::Sender<Job>>>,
    pub path: OcsmPath,
    pub limits: OcsmLimits,
    pub burst_datagrams_max: usize,
    pub stats: Arc<crate::shard::ServerStats>,
    pub stop: watch::Receiver<bool>,
}

/// Serves until `stop` turns true.
pub fn serve(s: OcsmSpawn) {
    let _ = s.sock.set_read_timeout(Some(STOP_POLL));
    let burst = Burst::new(s.peers.len(), s.limits, &s.stats.ocsm);
    match s.path {
        OcsmPath::Plain => plain(&s, burst),
        OcsmPath::Batched => batched(&s, burst),
    }
}

fn plain(s: &OcsmSpawn, mut burst: Burst<'_>) {
    // One byte more than the limit, so an oversized datagram is seen as such.
    let mut buf = vec![0u8; s.limits.datagram_bytes_max + 1];
    while !*s.stop.borrow() {
        let Ok((n, from)) = s.sock.recv_from(&mut buf) else {
            continue;
        };
        burst.answer(&[&buf[..n]], &s.peers);
        if let Some(r) = burst.reply(0) {
            let _ = s.sock.send_to(r, from);
        }
    }
}

/// The preallocated receive side of `recvmmsg`: buffers, addresses and headers, wired to each
/// other once (the vectors never grow, so the pointers stay valid).
struct MmsgRecv {
    bufs: Vec<u8>,
    buf_len: usize,
    addrs: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl MmsgRecv {
    fn new(burst: usize, buf_len: usize) -> Box<MmsgRecv> {
        // SAFETY: sockaddr_storage and mmsghdr are plain C data for which all-zero is valid.
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut m = Box::new(MmsgRecv {
            bufs: vec![0u8; burst * buf_len],
            buf_len,
            addrs: vec![zero_addr; burst],
            iovs: Vec::with_capacity(burst),
            hdrs: Vec::with_capacity(burst),
        });
        for i in 0..burst {
            let base = m.bufs[i * buf_len..].as_mut_ptr();
            m.iovs.push(libc::iovec {
                iov_base: base.cast(),
                iov_len: buf_len,
            });
        }
        for i in 0..burst {
            // SAFETY: as above, all-zero is a valid mmsghdr.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = (&mut m.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_hdr.msg_iov = &mut m.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            m.hdrs.push(h);
        }
        m
    }

    /// Receives up to a burst (blocking for the first datagram, up to the socket's read
    /// timeout); returns how many arrived.
    fn recv(&mut self, fd: i32) -> usize {
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
            h.msg_len = 0;
        }
        // SAFETY: every header points at its own iovec, buffer and address in `self`, which
        // outlive the call and are not moved (the vectors were sized at creation); the kernel
        // writes at most `buf_len` bytes per buffer and `msg_namelen` bytes per address.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            0
        } else {
            n as usize
        }
    }

    fn datagram(&self, i: usize) -> &[u8] {
        let len = (self.hdrs[i].msg_len as usize).min(self.buf_len);
        &self.bufs[i * self.buf_len..i * self.buf_len + len]
    }
}

fn batched(s: &OcsmSpawn, mut burst: Burst<'_>) {
    let fd = s.sock.as_raw_fd();
    let n_max = s.burst_datagrams_max.max(1);
    let mut rx = MmsgRecv::new(n_max, s.limits.datagram_bytes_max + 1);
    let mut send_iovs: Vec<libc::iovec> = Vec::with_capacity(n_max);
    let mut send_hdrs: Vec<libc::mmsghdr> = Vec::with_capacity(n_max);
    while !*s.stop.borrow() {
        let n = rx.recv(fd);
        if n == 0 {
            continue;
        }
        s.stats.ocsm.bursts.fetch_add(1, Ordering::Relaxed);
        let datagrams: Vec<&[u8]> = (0..n).map(|i| rx.datagram(i)).collect();
        burst.answer(&datagrams, &s.peers);
        drop(datagrams);
        send_iovs.clear();
        send_hdrs.clear();
        for i in 0..n {
            let Some(r) = burst.reply(i) else { continue };
            send_iovs.push(libc::iovec {
                iov_base: r.as_ptr() as *mut libc::c_void,
                iov_len: r.len(),
            });
            // SAFETY: all-zero is a valid mmsghdr.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = rx.hdrs[i].msg_hdr.msg_name;
            h.msg_hdr.msg_namelen = rx.hdrs[i].msg_hdr.msg_namelen;
            send_hdrs.push(h);
        }
        // The iovec vector is complete now and will not move: point the headers at it.
        for (h, iov) in send_hdrs.iter_mut().zip(send_iovs.iter_mut()) {
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
        }
        let mut sent = 0;
        while sent < send_hdrs.len() {
            // SAFETY: the headers point at iovecs over `burst`'s reply buffer and at addresses
            // in `rx`, all alive and unchanged until the loop ends.
            let k = unsafe {
                libc::sendmmsg(
                    fd,
                    send_hdrs[sent..].as_mut_ptr(),
                    (send_hdrs.len() - sent) as u32,
                    0,
                )
            };
            // A datagram the kernel refuses is dropped, as the network might: skip it.
            sent += if k <= 0 { 1 } else { k as usize };
        }
    }
}

/// One burst of datagrams planned, executed and answered; reused for every burst.
struct Burst<'s> {
    pending: Pending,
    limits: OcsmLimits,
    stats: &'s OcsmStats,
    /// Per datagram: the reply bytes' range in `out` (empty = no reply).
    replies: Vec<Range<usize>>,
    /// Per datagram: its planned messages' range in `slots`, or the refusal.
    plans: Vec<Result<Range<usize>, (u32, ErrorCode)>>,
    /// Per planned message: its operation's index in `pending`.
    slots: Vec<usize>,
    out: Vec<u8>,
    /// A multi-unit value made contiguous (head and tail are apart on the wire).
    value: Vec<u8>,
}

impl<'s> Burst<'s> {
    fn new(shards: usize, limits: OcsmLimits, stats: &'s OcsmStats) -> Burst<'s> {
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

    /// Plans every datagram, runs the burst as one batch per shard, encodes every reply.
    fn answer(&mut self, datagrams: &[&[u8]], peers: &[mpsc::Sender<Job>]) {
        self.pending.clear();
        self.plans.clear();
        self.slots.clear();
        for d in datagrams {
            let plan = self.plan(d);
            self.plans.push(plan);
        }
        let results = if self.pending.locs.is_empty() {
            Vec::new()
        } else {
            execute_blocking(peers, &mut self.pending)
        };
        self.out.clear();
        self.replies.clear();
        for (i, d) in datagrams.iter().enumerate() {
            let start = self.out.len();
            self.encode_reply(i, d, &results);
            // Anti-amplification, checked where it matters: never send more than was received.
            if self.out.len() - start > d.len() {
                debug_assert!(false, "OCSM reply larger than its request");
                self.out.truncate(start);
            }
            self.replies.push(start..self.out.len());
        }
        let messages = self.slots.len() as u64;
        self.stats
            .datagrams
            .fetch_add(datagrams.len() as u64, Ordering::Relaxed);
        self.stats.messages.fetch_add(messages, Ordering::Relaxed);
    }

    fn plan(&mut self, d: &[u8]) -> Result<Range<usize>, (u32, ErrorCode)> {
        let dg = decode_request(d, &self.limits).map_err(|e| {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            (e.sequence, e.code)
        })?;
        let first = self.slots.len();
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
            self.slots.push(i);
        }
        Ok(first..self.slots.len())
    }

    fn encode_reply(&mut self, i: usize, d: &[u8], results: &[Option<Results>]) {
        let slots = match &self.plans[i] {
            Ok(r) => r.clone(),
            Err((_, ErrorCode::ShortHeader)) => return,
            Err((seq, code)) => return encode_error(*seq, *code, &mut self.out),
        };
        let dg = decode_request(d, &self.limits).expect("planned datagrams decode");
        encode_header(
            &Header {
                response: true,
                ..dg.header
            },
            &mut self.out,
        );
        let size = dg.header.size;
        for (m, &op) in dg.messages().zip(&self.slots[slots]) {
            let (shard, j) = self.pending.locs[op];
            let (status, data) = match &results[shard] {
                Some(r) => (r.status(j), r.data(j)),
                None => (
                    EngineStatus::Error(directkv_engine::OpError::UserFunction(
                        "shard unavailable",
                    )),
                    &[][..],
                ),
            };
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
            encode_message(
                size,
                &MessageOut {
                    key: *m.key,
                    value,
                    sequence: m.sequence,
                    length,
                    source: m.destination,
                    destination: m.source,
                    opcode: status as u8,
                },
                &mut self.out,
            )
            .expect("a value that fits the request's units fits 255 units");
        }
    }
}

/// Binds the OCSM socket and asks for a receive buffer of `recv_buffer_bytes` (0 = keep the
/// system default; the kernel caps the request at `net.core.rmem_max`).
pub fn bind(
    bind: &str,
    port: u16,
    recv_buffer_bytes: usize,
) -> Result<(UdpSocket, SocketAddr), String> {
    let sock = UdpSocket::bind((bind, port))
        .map_err(|e| format!("cannot bind OCSM UDP {bind}:{port}: {e}"))?;
    if recv_buffer_bytes > 0 {
        let bytes = recv_buffer_bytes.min(i32::MAX as usize) as libc::c_int;
        // SAFETY: setsockopt reads size_of::<c_int>() bytes from a live c_int. A refusal only
        // leaves the default buffer, so its result is ignored.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&bytes as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            );
        }
    }
    let addr = sock.local_addr().map_err(|e| e.to_string())?;
    Ok((sock, addr))
}
