//! directkv's server: one shard thread per core, each owning its engine; one TCP port for the
//! native protocol and RESP (told apart by the first byte).
//!
//! ```text
//!            ┌──────────── acceptor thread (std, blocking accept) ────────────┐
//!  clients ──┤ connections round robin                                         │
//!            └──> shard 0 runtime ──┐   shard 1 runtime ──┐   ...             │
//!                 conn tasks        │   conn tasks        │                   │
//!                 shard tasks       │                     │                   │
//!                 job task <─queue──┼── job task <─queue──┘  (bounded)        │
//!                 engine 0          │   engine 1                               │
//! ```
//!
//! Goals: no locks on the data path, bounded memory per connection and per queue, graceful
//! shutdown. A native client's ATTACH moves its connection to the shard it names, so a
//! shard-aware client reaches every shard without a cross-thread hop.
//!
//! Layout: each folder is one concern, and this file only binds sockets and spawns threads.
//!
//! ```text
//!  accept.rs     acceptor thread; a connection's first read picks RESP or native
//!  shard/        mod.rs: ShardCtx, whose execute() is the ONE call of Engine::execute; run();
//!                Job; shard tasks. dispatch.rs: the protocol-neutral batch-by-shard core.
//!                batch.rs: batches that own their bytes; busy_poll.rs (adaptive);
//!                prefault.rs: the index faulted in at start-up
//!  resp/         RESP connections, commands (cmd/), reply rendering, INFO
//!  native/       the native protocol over TCP (conn.rs) and UDP on the same port (udp.rs;
//!                like OCSM, off while a password is set unless acknowledged: config.rs)
//!  ocsm/         OCSM over UDP on its own port: three paths sharing one Burst
//!  memcache/     memcached's text and meta protocols on their own TCP port
//!  admin/        Prometheus /metrics over HTTP
//!  stats.rs      ServerStats and COUNTERS, the one table INFO and /metrics render
//!  config.rs     ServerConfig and its limits, and the configuration file's format
//!  files.rs      the open files limit: raised at start, and refusing clients at it
//! ```
//!
//! Why this shape: a feature that must see every operation (expiry, persistence, replication)
//! hooks into `ShardCtx::execute` once; a new protocol is a new folder that plans into
//! `shard::dispatch::Plan`, with no import from another protocol; a shard-resident service is a
//! `ShardTask` handed to `shard::run`, not a new field; a new counter is one row of `COUNTERS`.
//! No `unsafe` code is here (forbidden below): the system calls live in `directkv-sys`, and
//! RESP command names are matched as bytes, so no UTF-8 proof is needed.

#![forbid(unsafe_code)]

mod accept;
mod admin;
mod clients;
pub mod config;
mod files;
mod live;
mod log_limit;
mod memcache;
mod native;
pub mod ocsm;
mod persistence;
mod resp;
mod shard;
mod stats;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use directkv_engine::Engine;
use tokio::sync::{mpsc, watch};

pub use config::ServerConfig;
pub use ocsm::{OcsmPath, OcsmStats};
use shard::{ShardSpawn, ShardTask};
use stats::ServerStats;

/// A running server; `stop` shuts it down and waits for its threads.
pub struct Server {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    ocsm_addr: Option<SocketAddr>,
    udp_addr: Option<SocketAddr>,
    memcache_addr: Option<SocketAddr>,
    stats: Arc<ServerStats>,
    stop_tx: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
    acceptor: Option<JoinHandle<()>>,
    memcache_acceptor: Option<JoinHandle<()>>,
    shards: usize,
    /// The persistence store and its sync thread (stopped after the shards, with a last sync).
    store: Option<Arc<persistence::Store>>,
    syncer: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds, builds every engine (so a bad configuration fails here), starts the threads.
    pub fn start(cfg: ServerConfig) -> Result<Server, String> {
        Server::start_with_fs(cfg, Arc::new(directkv_persist::fs::RealFs))
    }

    /// `start` with the file system persistence goes through: tests give a
    /// `directkv_persist::fs::FaultFs` to make a write or fdatasync fail where a disk would.
    pub fn start_with_fs(
        cfg: ServerConfig,
        fs: Arc<dyn directkv_persist::fs::Fs>,
    ) -> Result<Server, String> {
        cfg.validate()?;
        // Every client is a file: raise the open files limit before anything is opened.
        let open_files = files::raise_limit(cfg.connections_max);
        let shards = cfg.shard_count();
        let (listener, udp) = bind_tcp_and_udp(&cfg)?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let memcache_listener = memcache::bind(&cfg)?;
        let memcache_addr = match &memcache_listener {
            Some(l) => Some(l.local_addr().map_err(|e| e.to_string())?),
            None => None,
        };
        let stats = Arc::new(ServerStats::default());
        stats.live.set_from(&cfg);
        // Persistence: the store in `dir` is locked and loaded (recovery) before a shard
        // starts, and decides the shard count when it holds data (`persistence/recover.rs`).
        let (shards, engines, logs, store) = if cfg.appendonly {
            let opened = persistence::recover::open(&cfg, fs.clone())?;
            let store = persistence::Store::new(
                cfg.dir.clone(),
                fs,
                opened.lock,
                opened.manifest,
                &opened.logs,
                stats.clone(),
            )?;
            let logs: Vec<_> = opened.logs.into_iter().map(Some).collect();
            (opened.shards, opened.engines, logs, Some(store))
        } else {
            let engine_cfg = shard::engine_config(&cfg, shards);
            let mut engines = Vec::with_capacity(shards);
            for _ in 0..shards {
                engines.push(Engine::new(engine_cfg.clone()).map_err(|e| e.to_string())?);
            }
            (shards, engines, (0..shards).map(|_| None).collect(), None)
        };
        let cfg = Arc::new(cfg);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut job_rxs = Vec::new();
        let mut job_txs = Vec::new();
        for _ in 0..shards {
            let (tx, rx) = mpsc::channel(cfg.shard_queue_len);
            job_txs.push(tx);
            job_rxs.push(rx);
        }
        let peers = Arc::new(job_txs);
        let (conn_txs, conn_rxs): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::unbounded_channel()).unzip();
        let conn_txs = Arc::new(conn_txs);
        let mut threads = Vec::new();
        // Services that live on a shard's thread, per shard.
        let mut tasks: Vec<Vec<ShardTask>> = (0..shards).map(|_| Vec::new()).collect();
        // OCSM: the plain and batched paths have a thread of their own; batched-shard runs
        // inside shard 0.
        let mut ocsm_addr = None;
        if let Some(port) = cfg.ocsm_port_effective() {
            let (sock, a) = ocsm::bind(&cfg.bind, port, cfg.ocsm_recv_buffer_bytes)?;
            ocsm_addr = Some(a);
            let spawn = ocsm::OcsmSpawn {
                sock,
                peers: peers.clone(),
                path: cfg.ocsm_path,
                limits: directkv_proto::ocsm::OcsmLimits {
                    datagram_bytes_max: cfg.ocsm_datagram_bytes_max,
                },
                burst_datagrams_max: cfg.ocsm_burst_datagrams_max,
                stats: stats.clone(),
                stop: stop_rx.clone(),
                store: store.clone(),
            };
            match ocsm::spawn(spawn)? {
                ocsm::Placement::Thread(t) => threads.push(t),
                ocsm::Placement::Shard0(task) => tasks[0].push(task),
            }
        }
        let watches = Arc::new(shard::watches::Tables::new(shards));
        for (id, ((((engine, jobs), crx), tasks), log)) in engines
            .into_iter()
            .zip(job_rxs)
            .zip(conn_rxs)
            .zip(tasks)
            .zip(logs)
            .enumerate()
        {
            let log = log.map(|w| {
                persistence::ShardLog::new(id, w, store.clone().expect("a store with logs"))
            });
            let spawn = ShardSpawn {
                id,
                engine,
                conns: crx,
                handoff: conn_txs.clone(),
                jobs,
                peers: peers.clone(),
                cfg: cfg.clone(),
                stats: stats.clone(),
                stop: stop_rx.clone(),
                tasks,
                watches: watches.clone(),
                log,
            };
            let t = std::thread::Builder::new()
                .name(format!("shard-{id}"))
                .spawn(move || shard::run(spawn))
                .map_err(|e| e.to_string())?;
            threads.push(t);
        }
        let syncer = match &store {
            Some(st) => Some(st.spawn_syncer().map_err(|e| e.to_string())?),
            None => None,
        };
        let mut udp_addr = None;
        if let Some(udp) = udp {
            udp_addr = Some(addr);
            let limits = directkv_proto::native::NativeLimits {
                key_len_max: cfg.key_len_max as u8,
                value_len_max: cfg.value_len_max as u32,
                ..directkv_proto::native::NativeLimits::DEFAULT
            };
            let (peers, stats, stop) = (peers.clone(), stats.clone(), stop_rx.clone());
            let store = store.clone();
            let t = std::thread::Builder::new()
                .name("udp".into())
                .spawn(move || native::udp::serve(udp, peers, limits, stats, stop, store))
                .map_err(|e| e.to_string())?;
            threads.push(t);
        }
        warn_about_datagrams(&cfg, udp_addr.is_some(), ocsm_addr.is_some());
        let mut metrics_addr = None;
        let metrics_port = cfg.metrics_port.filter(|_| cfg.metrics);
        if metrics_port.is_none() {
            tracing::info!("metrics are off (metrics = false, --metrics no): no /metrics endpoint");
        }
        if let Some(port) = metrics_port {
            let l = TcpListener::bind((cfg.bind.as_str(), port))
                .map_err(|e| format!("cannot bind metrics {}:{port}: {e}", cfg.bind))?;
            metrics_addr = Some(l.local_addr().map_err(|e| e.to_string())?);
            let (peers, stats, stop) = (peers.clone(), stats.clone(), stop_rx.clone());
            let t = std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || admin::metrics::serve(l, peers, stats, stop))
                .map_err(|e| e.to_string())?;
            threads.push(t);
        }
        let memcache_acceptor = match memcache_listener {
            Some(l) => Some(
                accept::spawn_acceptor(
                    l,
                    accept::Protocol::Memcache,
                    conn_txs.clone(),
                    stats.clone(),
                    stop_rx.clone(),
                )
                .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let acceptor = accept::spawn_acceptor(
            listener,
            accept::Protocol::Sniff,
            conn_txs,
            stats.clone(),
            stop_rx.clone(),
        )
        .map_err(|e| e.to_string())?;
        if let Some(soft) = open_files {
            files::check_room(soft, cfg.connections_max);
        }
        tracing::info!(%addr, shards, memory_bytes = cfg.memory_bytes, metrics = ?metrics_addr, ocsm = ?ocsm_addr, memcache = ?memcache_addr, "directkv started");
        if !cfg.appendonly {
            tracing::warn!("appendonly no: nothing is written to disk, a restart loses every key");
        }
        tracing::info!(maxmemory_policy = %cfg.maxmemory_policy, "not done yet: no LFU eviction; the commands served are listed in docs/commands.md");
        Ok(Server {
            addr,
            metrics_addr,
            ocsm_addr,
            udp_addr,
            memcache_addr,
            stats,
            stop_tx,
            threads,
            acceptor: Some(acceptor),
            memcache_acceptor,
            shards,
            store,
            syncer,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Shards serving: `shards` of the configuration, or the count a persistent store in
    /// `dir` was written with when `shards` is 0 (auto).
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Where Prometheus metrics are served, if enabled.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Where OCSM is served over UDP, if enabled.
    pub fn ocsm_addr(&self) -> Option<SocketAddr> {
        self.ocsm_addr
    }

    /// Where the native protocol is served over UDP, if enabled (the TCP port's number).
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.udp_addr
    }

    /// Where memcached's protocols are served, if enabled (`memcache_port`).
    pub fn memcache_addr(&self) -> Option<SocketAddr> {
        self.memcache_addr
    }

    /// OCSM counters (datagrams, messages, refused datagrams, bursts).
    pub fn ocsm_stats(&self) -> &OcsmStats {
        &self.stats.ocsm
    }

    /// Whether a client asked the server to stop (SHUTDOWN): `run_until_signal` returns then.
    pub fn shutdown_requested(&self) -> bool {
        self.stats.live.shutdown_requested()
    }

    /// Stops accepting, closes connections, joins every thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        tracing::info!(addr = %self.addr, "shutting down");
        let _ = self.stop_tx.send(true);
        // Wake the blocking accepts with connections of our own.
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(m) = self.metrics_addr {
            let _ = std::net::TcpStream::connect(m);
        }
        if let Some(m) = self.memcache_addr {
            let _ = std::net::TcpStream::connect(m);
        }
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        if let Some(a) = self.memcache_acceptor.take() {
            let _ = a.join();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The shards have stopped (each wrote out its records): a last sync, whatever the
        // policy, as Redis fsyncs its AOF at shutdown.
        if let Some(st) = &self.store {
            st.stop_syncer();
        }
        if let Some(t) = self.syncer.take() {
            let _ = t.join();
        }
    }

    /// Blocks until SIGINT or SIGTERM, then shuts down gracefully.
    pub fn run_until_signal(mut self) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        rt.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                _ = self.stats.live.shutdown() => {}
            }
        });
        self.shutdown();
    }
}

/// Says at start what the password means for the datagram protocols (config.rs's module
/// comment): with `requirepass`, each one is either off (and the line names the flags that
/// would turn it on) or on by the operator's explicit `--udp-insecure`.
fn warn_about_datagrams(cfg: &ServerConfig, udp_on: bool, ocsm_on: bool) {
    if cfg.requirepass.is_none() {
        return;
    }
    // No port is as explicit an "off" as `ocsm = false`.
    let ocsm_asked = if cfg.ocsm_port.is_none() {
        Some(false)
    } else {
        cfg.ocsm
    };
    for (name, on, asked) in [
        ("native UDP", udp_on, cfg.udp),
        ("OCSM", ocsm_on, ocsm_asked),
    ] {
        if on {
            tracing::warn!(
                "{name} serves unauthenticated datagrams although requirepass is set (--udp-insecure): anyone reaching its port can read and write every key"
            );
        } else if asked.is_none() {
            tracing::warn!(
                "{name} is off: requirepass is set and its datagrams carry no password (--udp yes / --ocsm yes with --udp-insecure serve it anyway)"
            );
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shutdown();
        }
    }
}

/// Times an ephemeral TCP port is drawn again when its number is taken for UDP.
const EPHEMERAL_BIND_ATTEMPTS: usize = 16;

/// The TCP listener and, when native UDP is served, the UDP socket on the same address. With
/// port 0 the kernel picks the TCP port, and another process (or another server of the same
/// test binary) may already hold that number for UDP: then another TCP port is drawn, up to
/// `EPHEMERAL_BIND_ATTEMPTS` times. A fixed port that is taken is an error at once.
fn bind_tcp_and_udp(
    cfg: &ServerConfig,
) -> Result<(TcpListener, Option<std::net::UdpSocket>), String> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let listener = TcpListener::bind((cfg.bind.as_str(), cfg.port))
            .map_err(|e| format!("cannot bind {}:{}: {e}", cfg.bind, cfg.port))?;
        if !cfg.udp_enabled() {
            return Ok((listener, None));
        }
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        match std::net::UdpSocket::bind(addr) {
            Ok(udp) => return Ok((listener, Some(udp))),
            Err(e)
                if cfg.port == 0
                    && e.kind() == std::io::ErrorKind::AddrInUse
                    && attempt < EPHEMERAL_BIND_ATTEMPTS => {}
            Err(e) => return Err(format!("cannot bind UDP {addr}: {e}")),
        }
    }
}
