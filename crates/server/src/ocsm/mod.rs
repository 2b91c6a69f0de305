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
//! engine's pipeline bigger batches. All paths share the planning and reply code in `burst.rs`,
//! so they answer byte-for-byte the same (the tests run one suite on all three). The system
//! calls (`recvmmsg` with GRO, `sendmmsg` with GSO) are `directkv_sys::mmsg`.
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
//! No password: served only while `ServerConfig::ocsm_port_effective` gives a port (by default
//! on a loopback address without `requirepass`; with a password only by the operator's explicit
//! `ocsm` + `udp_insecure`).
//!
//! Non-goals: authentication, retransmission (clients retry), routing a datagram's messages
//! anywhere but their owning shards.

mod burst;

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use directkv_proto::ocsm::OcsmLimits;
use directkv_sys::mmsg::{MmsgRecv, MmsgSend};
use directkv_sys::socket::{enable_udp_gro, set_buffer_sizes};
use serde::Deserialize;
use tokio::sync::{mpsc, watch};

use crate::shard::panics;
use crate::shard::{dispatch, Job, ShardCtx, ShardTask};
use crate::stats::ServerStats;
use burst::Burst;

pub use crate::stats::OcsmStats;

/// How often the receive loops check for shutdown.
const STOP_POLL: Duration = Duration::from_millis(200);

/// Which receive/execute/send loop serves OCSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
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

/// What an OCSM path needs: its socket, the shards, its limits.
pub(crate) struct OcsmSpawn {
    pub(crate) sock: UdpSocket,
    pub(crate) peers: Arc<Vec<mpsc::Sender<Job>>>,
    pub(crate) path: OcsmPath,
    pub(crate) limits: OcsmLimits,
    pub(crate) burst_datagrams_max: usize,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) stop: watch::Receiver<bool>,
    /// Persistence: replies wait for durability under `always` (`Store::durable`).
    pub(crate) store: Option<Arc<crate::persistence::Store>>,
}

/// Whether a thread's replies may leave (`Store::durable_blocking`): always without
/// persistence; false when the store failed (the replies are dropped unsent).
pub(crate) fn durable_blocking(store: &Option<Arc<crate::persistence::Store>>) -> bool {
    store
        .as_ref()
        .is_none_or(|st| st.durable_blocking().is_ok())
}

/// Where an OCSM path runs: a thread of its own, or a task on shard 0's thread.
pub(crate) enum Placement {
    Thread(std::thread::JoinHandle<()>),
    Shard0(ShardTask),
}

/// Starts the path `s.path` names: `plain` and `batched` on a thread of their own,
/// `batched-shard` as a shard task for the caller to hand to shard 0.
pub(crate) fn spawn(s: OcsmSpawn) -> Result<Placement, String> {
    if s.path == OcsmPath::BatchedShard {
        return Ok(Placement::Shard0(Box::new(move |ctx| {
            Box::pin(serve_batched(ctx, s))
        })));
    }
    std::thread::Builder::new()
        .name("ocsm".into())
        .spawn(move || serve_thread(s))
        .map(Placement::Thread)
        .map_err(|e| e.to_string())
}

/// The plain and batched paths: serve from their own thread until `stop` turns true.
fn serve_thread(s: OcsmSpawn) {
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
    let gro = enable_udp_gro(fd);
    let mut rx = MmsgRecv::new(n_max);
    let mut tx = MmsgSend::new(true);
    tracing::debug!(gro, "OCSM batched path");
    while !*s.stop.borrow() {
        // Blocks for the first datagram (up to the read timeout), then takes what is waiting.
        let n = match rx.recv(fd, MmsgRecv::WAIT_FOR_ONE) {
            Ok(n) if n > 0 => n,
            _ => continue,
        };
        s.stats.ocsm.bursts.fetch_add(1, Ordering::Relaxed);
        let answer = || burst.answer_blocking(&*rx, &s.peers);
        if panics::contain_blocking("OCSM burst", &s.stats, answer).is_none() {
            continue;
        }
        if !durable_blocking(&s.store) {
            continue;
        }
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
        let answer = || burst.answer_blocking(&buf[..n], &s.peers);
        if panics::contain_blocking("OCSM datagram", &s.stats, answer).is_none() {
            continue;
        }
        if !durable_blocking(&s.store) {
            continue;
        }
        if let Some(r) = burst.reply(0) {
            let _ = s.sock.send_to(r, from);
        }
    }
}

/// The batched-shard path: a task of the shard thread that owns shard 0 (a `ShardTask`), so
/// that operations on that shard's keys run on its engine directly, with no thread hop; other
/// shards' operations go over their queues, one batch per shard per burst.
async fn serve_batched(ctx: Rc<ShardCtx>, s: OcsmSpawn) {
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
    enable_udp_gro(fd);
    let mut rx = MmsgRecv::new(n_max);
    let mut tx = MmsgSend::new(true);
    loop {
        tokio::select! {
            r = sock.readable() => if r.is_err() { return },
            _ = stop.changed() => return,
        }
        let n = match sock.try_io(tokio::io::Interest::READABLE, || {
            rx.recv(fd, MmsgRecv::DONT_WAIT)
        }) {
            Ok(n) => n,
            Err(_) => continue,
        };
        ctx.activity.touch();
        stats.ocsm.bursts.fetch_add(1, Ordering::Relaxed);
        burst.plan_all(&*rx);
        dispatch::execute(&ctx, burst.plan_mut()).await;
        burst.encode_all(&*rx);
        if let Some(store) = &ctx.store {
            if store.durable().await.is_err() {
                continue;
            }
        }
        tx.prepare(&rx, n, |i| burst.reply(i));
        stats
            .ocsm
            .segmented_sends
            .fetch_add(tx.segmented() as u64, Ordering::Relaxed);
        // A full send buffer makes the burst wait for room rather than drop its replies.
        while !tx.send_some(fd, MmsgRecv::DONT_WAIT) {
            if sock.writable().await.is_err() {
                return;
            }
        }
    }
}

/// Binds the OCSM socket and asks for receive and send buffers of `recv_buffer_bytes` (0 =
/// keep the system defaults; the kernel caps the requests at `net.core.{r,w}mem_max`).
pub(crate) fn bind(
    bind: &str,
    port: u16,
    recv_buffer_bytes: usize,
) -> Result<(UdpSocket, SocketAddr), String> {
    let sock = UdpSocket::bind((bind, port))
        .map_err(|e| format!("cannot bind OCSM UDP {bind}:{port}: {e}"))?;
    if recv_buffer_bytes > 0 {
        // The send buffer gets the same size: a burst's replies leave in one sendmmsg. A
        // refusal only leaves the default buffers.
        set_buffer_sizes(sock.as_raw_fd(), recv_buffer_bytes);
    }
    let addr = sock.local_addr().map_err(|e| e.to_string())?;
    Ok((sock, addr))
}
