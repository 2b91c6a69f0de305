//! The way in for TCP connections: the acceptor thread deals them round robin to the shards,
//! and the shard that gets one reads its first bytes and hands it to the protocol they name:
//! the native protocol's frames start with a non-ASCII magic byte; anything else is RESP.
//!
//! ```text
//!  acceptor thread: accept ─round robin─> shard i's connection queue
//!  shard i task:    count, limit ─> first read ─┬─ native magic ─> native::conn::serve
//!                                               └─ otherwise    ─> resp::conn::serve
//! ```
//!
//! A panic while serving a connection ends only that connection: `shard::panics::contain`
//! catches it, and the connection's slot is released as on any other close.
//!
//! memcached's text protocol starts with ASCII too, so it has a port of its own: its acceptor
//! marks its connections `Protocol::Memcache`, and they skip the sniff.
//!
//! Out of file descriptors, the acceptor refuses clients with an error line rather than spin
//! (`files.rs`), and every read of a connection's input goes through `read_more`, which closes
//! a client silent for `timeout` seconds (issue 19 item 8).

use std::net::TcpListener;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::clients::ClientHandle;
use crate::shard::{Incoming, ShardCtx};
use crate::stats::ServerStats;

/// Bytes a connection reads at a time (both protocols).
pub(crate) const READ_CHUNK_BYTES: usize = 64 << 10;
/// Capacity a connection's buffer (input, replies, results) may keep while the connection
/// waits for its next request; past it the buffer is shrunk to `READ_CHUNK_BYTES`.
pub(crate) const IDLE_BUFFER_BYTES_MAX: usize = 4 * READ_CHUNK_BYTES;

/// What a listener's connections speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// The main port: native or RESP, told apart by the first byte.
    Sniff,
    /// memcached's port: its text and meta protocols (`memcache/`).
    Memcache,
}

/// Starts an acceptor thread (one per listening port): every accepted connection goes to the next shard in turn,
/// until `stop` turns true (the server wakes the blocking accept with a connection of its own).
/// Out of file descriptors, it refuses clients with an error line instead of spinning
/// (`files::Exhausted`).
pub(crate) fn spawn_acceptor(
    listener: TcpListener,
    protocol: Protocol,
    shards: Arc<Vec<mpsc::UnboundedSender<Incoming>>>,
    stats: Arc<ServerStats>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(match protocol {
            Protocol::Sniff => "acceptor".into(),
            Protocol::Memcache => "memcache-acceptor".into(),
        })
        .spawn(move || {
            let mut next = 0usize;
            let mut exhausted = crate::files::Exhausted::new();
            loop {
                let accepted = listener.accept();
                if *stop.borrow() {
                    break;
                }
                let stream = match accepted {
                    Ok((c, _)) => c,
                    Err(e) => match exhausted.failed(&listener, &e, &stats) {
                        Some(c) if !*stop.borrow() => c,
                        _ => continue,
                    },
                };
                exhausted.served();
                let incoming = Incoming {
                    stream,
                    authenticated: false,
                    protocol,
                };
                let _ = shards[next % shards.len()].send(incoming);
                next += 1;
            }
        })
}

/// Runs one read of a connection's input (`s.read_buf(&mut input)`), but gives up with
/// `TimedOut` (counted in `idle_timeouts`) when the client sends nothing for `timeout` seconds
/// (0 = wait for ever; Redis's `timeout`). Both protocols read through it, so an idle client is
/// closed whatever it speaks. A connection whose replies are still being written is not idle:
/// `flush` runs before the next read, under `reply_write_timeout_secs`.
pub(crate) async fn read_more(
    ctx: &ShardCtx,
    read: impl std::future::Future<Output = std::io::Result<usize>>,
) -> std::io::Result<usize> {
    // Read live: CONFIG SET timeout applies to every connection's next read.
    let timeout = ctx.stats.live.timeout_secs();
    if timeout == 0 {
        return read.await;
    }
    match tokio::time::timeout(Duration::from_secs(timeout), read).await {
        Ok(read) => read,
        Err(_) => {
            ctx.stats.idle_timeouts.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(shard = ctx.id, "idle client closed (timeout)");
            Err(std::io::ErrorKind::TimedOut.into())
        }
    }
}

/// Serves one connection on its shard until it closes or `stop` turns true: refuses it past
/// `connections_max`, counts it, and runs its protocol.
pub(crate) async fn serve(ctx: Rc<ShardCtx>, incoming: Incoming, mut stop: watch::Receiver<bool>) {
    let Incoming {
        stream,
        authenticated,
        protocol,
    } = incoming;
    let stats = ctx.stats.clone();
    if stats.connections.load(Ordering::Relaxed) >= stats.live.connections_max() {
        stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        let mut s = stream;
        let refusal: &[u8] = match protocol {
            Protocol::Sniff => b"-ERR max number of clients reached\r\n",
            // memcached's words when it is out of connections.
            Protocol::Memcache => b"ERROR Too many open connections\r\n",
        };
        let _ = std::io::Write::write_all(&mut s, refusal);
        return;
    }
    stats.connection_opened();
    let peer = stream.peer_addr().ok();
    tracing::debug!(shard = ctx.id, ?peer, "connection opened");
    // In the registry while it is open: `maxmemory_clients` and CLIENT KILL may ask it to
    // close, CLIENT LIST shows it.
    let socket = crate::clients::Socket {
        peer,
        local: stream.local_addr().ok(),
        fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
    };
    let client = ClientHandle::register(&stats, socket, ctx.id);
    if stream.set_nonblocking(true).is_ok() {
        if let Ok(s) = TcpStream::from_std(stream) {
            let _ = s.set_nodelay(true);
            let served = async {
                tokio::select! {
                    _ = sniff(&ctx, s, authenticated, protocol, &client) => {}
                    _ = stop.changed() => {}
                    _ = client.closing() => {}
                }
            };
            crate::shard::panics::contain("connection", &stats, served).await;
        }
    }
    drop(client);
    stats.connection_closed();
}

/// Reads the first bytes and runs the protocol they belong to.
async fn sniff(
    ctx: &ShardCtx,
    mut s: TcpStream,
    authenticated: bool,
    protocol: Protocol,
    client: &ClientHandle,
) {
    // memcached counts a connection from its accept (`curr_connections`).
    let _memcache_open = (protocol == Protocol::Memcache).then(|| ctx.stats.memcache.connection());
    // A new connection holds no buffer until it has sent something (or closed): a flood of
    // connections that never speak costs the server their sockets, not 64 KiB each (the
    // issue 19 soak's 10 000 silent connections held 75 KiB of RSS apiece in recycled heap).
    if read_more(ctx, async { s.readable().await.map(|()| 1) })
        .await
        .is_err()
    {
        return;
    }
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    match read_more(ctx, s.read_buf(&mut input)).await {
        Ok(0) | Err(_) => return,
        Ok(_) => ctx.activity.touch(),
    }
    if protocol == Protocol::Memcache {
        crate::memcache::conn::serve(ctx, s, input, client).await;
    } else if directkv_proto::native::is_native(input[0]) {
        crate::native::conn::serve(ctx, s, input, authenticated, client).await;
    } else {
        crate::resp::conn::serve(ctx, s, input, authenticated, client).await;
    }
}

/// Gives back the capacity of a connection's input or output buffer past `READ_CHUNK_BYTES`
/// once it holds no more than that (the connection is waiting for its next request), if it
/// grew past `IDLE_BUFFER_BYTES_MAX`: after a large request an idle connection holds kilobytes,
/// not megabytes, while one of small requests never reallocates.
#[inline]
pub(crate) fn shrink_idle(buf: &mut Vec<u8>) {
    if buf.capacity() > IDLE_BUFFER_BYTES_MAX && buf.len() <= READ_CHUNK_BYTES {
        buf.shrink_to(READ_CHUNK_BYTES);
    }
}

/// What a connection's replies pass before they leave: the write timeout
/// (`reply_write_timeout_secs`, as the connection opened) and persistence's durability.
pub(crate) struct ReplyGate {
    timeout: Duration,
    /// The incident the store was failed in when this connection's previous replies left (or
    /// it opened): while it stays failed in that incident, every write the connection ran
    /// since was refused, so its replies acknowledge nothing. A store repaired since (or
    /// failed again) may have taken writes: those replies wait for durability as usual.
    failed_before: Option<u64>,
}

impl ReplyGate {
    pub(crate) fn new(ctx: &ShardCtx) -> ReplyGate {
        ReplyGate {
            timeout: Duration::from_secs(ctx.stats.live.reply_write_timeout_secs()),
            failed_before: ctx.store.as_ref().and_then(|st| st.failed_incident()),
        }
    }
}

/// Writes and clears the buffered replies; false when the client did not take them within
/// `timeout` (or the connection broke), and the connection should be dropped.
/// Replies leave only once what they acknowledge is as durable as `appendfsync` asks
/// (`persistence::Store::durable`: under `always` a sync round that began after the writes).
/// When persistence failed since this connection's previous replies, they may acknowledge a
/// write that is not durable: they are dropped unsent and the connection closed. A connection
/// whose requests all came after the failure had its writes refused (MISCONF) and is served.
pub(crate) async fn flush(
    ctx: &ShardCtx,
    s: &mut TcpStream,
    out: &mut Vec<u8>,
    gate: &mut ReplyGate,
) -> bool {
    if out.is_empty() {
        return true;
    }
    if let Some(store) = &ctx.store {
        // Failed in the same incident as at the last flush: every write since was refused.
        let refused_since =
            gate.failed_before.is_some() && store.failed_incident() == gate.failed_before;
        if !refused_since {
            // The shard keeps polling while the reply waits (`busy_poll::Activity::awaiting`).
            let _awaiting = ctx.activity.awaiting();
            if store.durable().await.is_err() {
                out.clear();
                return false;
            }
        }
        gate.failed_before = store.failed_incident();
    }
    let ok = matches!(
        tokio::time::timeout(gate.timeout, s.write_all(out)).await,
        Ok(Ok(()))
    );
    out.clear();
    ok
}
