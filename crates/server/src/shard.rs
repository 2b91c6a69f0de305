//! Shard threads: one per core, each pinned, each owning one engine and running a
//! single-threaded tokio runtime for the connections assigned to it.
//!
//! ```text
//!   acceptor ──round robin──> shard 0 ┌ connections (tasks) ──local ops──> engine 0
//!                             shard 1 │        └──other shards' ops──> bounded queue ─┐
//!                               ...   └ job task <──────────────────── from peers ────┘
//! ```
//!
//! A connection's operations on keys of its own shard run on the engine directly; the rest go
//! to their shards as one batch per shard per read, and the replies come back over a oneshot.
//! Engines are never shared: no locks on the data path.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use directkv_engine::{Engine, EngineConfig, Results};
use tokio::sync::{mpsc, oneshot, watch};

use crate::batch::OwnedBatch;
use crate::config::ServerConfig;

/// A connection for a shard to serve: a new one from the acceptor, or one another shard hands
/// over after a native ATTACH (its authentication travels with it).
pub struct Incoming {
    pub stream: std::net::TcpStream,
    /// The connection already authenticated (HELLO with the right password) on its old shard.
    pub authenticated: bool,
}

/// Work sent to a shard by another shard.
pub enum Job {
    /// Run `batch` into `results` (the sender's buffer, reused) and send both back.
    Execute {
        batch: OwnedBatch,
        results: Results,
        reply: oneshot::Sender<(OwnedBatch, Results)>,
    },
    /// Number of keys stored.
    Count { reply: oneshot::Sender<u64> },
    /// Remove every key.
    Flush { reply: oneshot::Sender<()> },
    /// Memory utilization and a few counters for INFO.
    Report {
        reply: oneshot::Sender<directkv_engine::Report>,
    },
}

/// Counters shared by all shards (read by INFO and metrics).
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections: AtomicUsize,
    pub connections_total: AtomicU64,
    pub commands: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub protocol_errors: AtomicU64,
    /// Batches a connection's shard sent to another shard's queue (a client that is not
    /// shard-aware, or RESP): zero while every client routes by the shard map.
    pub forwarded_batches: AtomicU64,
    /// Operations in those batches.
    pub forwarded_ops: AtomicU64,
    /// Zero-timeout polls of the shards' busy pollers (added when a poller parks).
    pub busy_polls: AtomicU64,
    /// Times a shard's poller parked after `busy_poll_us` without a request.
    pub busy_poll_sleeps: AtomicU64,
    pub ocsm: crate::ocsm::OcsmStats,
}

/// What every task of a shard shares.
pub struct ShardCtx {
    pub id: usize,
    pub engine: RefCell<Engine>,
    engine_cfg: EngineConfig,
    pub peers: Arc<Vec<mpsc::Sender<Job>>>,
    /// Every shard's connection queue, for ATTACH.
    pub handoff: Arc<Vec<mpsc::UnboundedSender<Incoming>>>,
    pub cfg: Arc<ServerConfig>,
    pub stats: Arc<ServerStats>,
    pub started: std::time::Instant,
    /// Requests read by this shard, for its busy poller.
    pub activity: crate::busy_poll::Activity,
}

impl ShardCtx {
    pub fn shards(&self) -> usize {
        self.peers.len()
    }

    /// Replaces the engine with an empty one (FLUSHALL).
    pub fn flush(&self) {
        let fresh = Engine::new(self.engine_cfg.clone())
            .expect("the same configuration worked at start-up");
        *self.engine.borrow_mut() = fresh;
    }
}

pub fn engine_config(cfg: &ServerConfig, shards: usize) -> EngineConfig {
    let mut e = EngineConfig::with_memory(
        (cfg.memory_bytes / shards).max(directkv_engine::engine::MEMORY_BYTES_MIN),
    );
    e.key_len_max = cfg.key_len_max;
    e.value_len_max = cfg.value_len_max;
    e.expected_kv_bytes = cfg.expected_kv_bytes;
    e.target_utilization = cfg.target_utilization;
    e
}

/// Pins the calling thread to the `index`-th CPU this process may run on (best effort: a
/// process restricted by `taskset` to fewer CPUs than shards shares them).
fn pin_to_cpu(index: usize) {
    // SAFETY: cpu_set_t is plain data; sched_{get,set}affinity read/write only the given set.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .collect();
        if cpus.is_empty() {
            return;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[index % cpus.len()], &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
    }
}

pub struct ShardSpawn {
    pub id: usize,
    pub engine: Engine,
    pub engine_cfg: EngineConfig,
    pub conns: mpsc::UnboundedReceiver<Incoming>,
    /// Every shard's connection queue, for ATTACH.
    pub handoff: Arc<Vec<mpsc::UnboundedSender<Incoming>>>,
    pub jobs: mpsc::Receiver<Job>,
    pub peers: Arc<Vec<mpsc::Sender<Job>>>,
    pub cfg: Arc<ServerConfig>,
    pub stats: Arc<ServerStats>,
    pub stop: watch::Receiver<bool>,
    /// The OCSM socket when this shard serves the batched OCSM path (`ocsm.rs`).
    pub ocsm: Option<crate::ocsm::OcsmSpawn>,
}

/// Runs a shard until `stop` turns true.
pub fn run(s: ShardSpawn) {
    pin_to_cpu(s.id);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let local = tokio::task::LocalSet::new();
    let ShardSpawn {
        id,
        engine,
        engine_cfg,
        mut conns,
        handoff,
        jobs,
        peers,
        cfg,
        stats,
        mut stop,
        ocsm,
    } = s;
    local.block_on(&rt, async move {
        let ctx = Rc::new(ShardCtx {
            id,
            engine: RefCell::new(engine),
            engine_cfg,
            peers,
            handoff,
            cfg,
            stats,
            started: std::time::Instant::now(),
            activity: Default::default(),
        });
        tokio::task::spawn_local(job_loop(ctx.clone(), jobs));
        if ctx.cfg.busy_poll_us > 0 {
            let ctx = ctx.clone();
            let window = std::time::Duration::from_micros(ctx.cfg.busy_poll_us);
            tokio::task::spawn_local(async move {
                crate::busy_poll::run(&ctx.activity, window, &ctx.stats).await
            });
        }
        if let Some(o) = ocsm {
            tokio::task::spawn_local(crate::ocsm::serve_batched(ctx.clone(), o));
        }
        loop {
            tokio::select! {
                conn = conns.recv() => match conn {
                    Some(incoming) => {
                        let ctx = ctx.clone();
                        let stop = stop.clone();
                        tokio::task::spawn_local(async move {
                            crate::conn::serve(ctx, incoming, stop).await;
                        });
                    }
                    None => break,
                },
                _ = stop.changed() => break,
            }
        }
    });
}

async fn job_loop(ctx: Rc<ShardCtx>, mut jobs: mpsc::Receiver<Job>) {
    while let Some(job) = jobs.recv().await {
        ctx.activity.touch();
        match job {
            Job::Execute {
                batch,
                mut results,
                reply,
            } => {
                ctx.engine.borrow_mut().execute(&batch.ops(), &mut results);
                let _ = reply.send((batch, results));
            }
            Job::Count { reply } => {
                let _ = reply.send(ctx.engine.borrow().counts().keys);
            }
            Job::Flush { reply } => {
                ctx.flush();
                let _ = reply.send(());
            }
            Job::Report { reply } => {
                let _ = reply.send(ctx.engine.borrow().report());
            }
        }
    }
}

/// Asks every shard (including this one, through its own queue) and collects the answers.
pub async fn ask_all<T>(ctx: &ShardCtx, make: impl Fn(oneshot::Sender<T>) -> Job) -> Vec<T> {
    let mut waits = Vec::with_capacity(ctx.shards());
    for peer in ctx.peers.iter() {
        let (tx, rx) = oneshot::channel();
        if peer.send(make(tx)).await.is_ok() {
            waits.push(rx);
        }
    }
    let mut out = Vec::with_capacity(waits.len());
    for w in waits {
        if let Ok(v) = w.await {
            out.push(v);
        }
    }
    out
}

pub fn count_connection(stats: &ServerStats, delta: isize) {
    if delta > 0 {
        stats.connections.fetch_add(1, Ordering::Relaxed);
        stats.connections_total.fetch_add(1, Ordering::Relaxed);
    } else {
        stats.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
