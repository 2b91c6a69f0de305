//! Shard threads: one per core, each pinned, each owning one engine and running a
//! single-threaded tokio runtime for the connections and services assigned to it.
//!
//! ```text
//!   acceptor ──round robin──> shard 0 ┌ connections (tasks) ──local ops──> ShardCtx::execute ─> engine 0
//!                             shard 1 │        └──other shards' ops──> bounded queue ─┐
//!                               ...   ├ job task <──────────────────── from peers ────┘
//!                                     └ shard tasks (e.g. OCSM's batched-shard path)
//! ```
//!
//! A connection's operations on keys of its own shard run on the engine directly; the rest go
//! to their shards as one batch per shard per read (`dispatch.rs`), and the replies come back
//! over a oneshot. Engines are never shared: no locks on the data path.
//!
//! The engine is private to this module: [`ShardCtx::execute`] is the one door every operation
//! of every protocol goes through, and [`ShardCtx::flush`] the one that empties it. Services
//! that live on a shard's thread are [`ShardTask`]s handed over at spawn, so adding one (an
//! expiry sweeper, a persistence log writer) needs no edit here.

pub(crate) mod atomic;
pub(crate) mod batch;
pub(crate) mod busy_poll;
pub(crate) mod dispatch;
pub(crate) mod exclusive;
pub(crate) mod expiry;
pub(crate) mod panics;
pub(crate) mod prefault;
pub(crate) mod scan;
pub(crate) mod snapshot;
pub(crate) mod watches;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use directkv_engine::{Engine, EngineConfig, Op, Results};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::ServerConfig;
use crate::persistence::{ShardLog, Store};
use crate::stats::ServerStats;
use batch::OwnedBatch;
use directkv_persist::batch::{encode_record, RecordHead};

/// A connection for a shard to serve: a new one from the acceptor, or one another shard hands
/// over after a native ATTACH (its authentication travels with it).
pub(crate) struct Incoming {
    pub(crate) stream: std::net::TcpStream,
    /// The connection already authenticated (HELLO with the right password) on its old shard.
    pub(crate) authenticated: bool,
    /// Which protocol: memcached's port serves it alone; the main port sniffs.
    pub(crate) protocol: crate::accept::Protocol,
}

/// Work sent to a shard by another shard, or by a thread outside the shards.
pub(crate) enum Job {
    /// Run `batch` into `results` (the sender's buffer, reused) and send both back.
    Execute {
        batch: OwnedBatch,
        results: Results,
        reply: oneshot::Sender<(OwnedBatch, Results)>,
    },
    /// Number of keys stored.
    Count { reply: oneshot::Sender<u64> },
    /// Remove every key; false when refused (the log failed).
    Flush { reply: oneshot::Sender<bool> },
    /// Memory utilization and a few counters for INFO and /metrics.
    Report {
        reply: oneshot::Sender<directkv_engine::Report>,
    },
    /// Run `batch` all or nothing (`atomic.rs`: a plan whose keys are all on this shard) and
    /// send it back with its results and outcome.
    Atomic {
        batch: OwnedBatch,
        results: Results,
        reply: oneshot::Sender<(OwnedBatch, Results, Result<(), directkv_engine::OpError>)>,
    },
    /// Check `batch`, answer, and park this shard until the coordinator of a cross-shard
    /// atomic plan commits or aborts (`atomic.rs`).
    Hold {
        batch: OwnedBatch,
        results: Results,
        channels: atomic::HoldChannels,
    },
    /// Answer "parked", then run only the coordinator's messages until it lets go: an
    /// exclusive section (`exclusive.rs`: RENAME, COPY, MSETNX across shards).
    Park { channels: exclusive::ParkChannels },
    /// One step of a walk over this shard's keys (`scan.rs`: RESP's SCAN, KEYS, RANDOMKEY and
    /// the native scan): run it and send it back with the keys found.
    Scan {
        step: scan::Step,
        reply: oneshot::Sender<scan::Step>,
    },
}

/// A service that lives on a shard's thread next to its connections: given the shard's
/// context, it returns the future the shard spawns as a local task (it may use
/// `dispatch::execute`, so its own keys run with no thread hop).
pub(crate) type ShardTask =
    Box<dyn FnOnce(Rc<ShardCtx>) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// What every task of a shard shares.
pub(crate) struct ShardCtx {
    pub(crate) id: usize,
    /// Private: reached only through `execute`, `keys`, `report`, `scan_step` and `flush`.
    engine: RefCell<Engine>,
    pub(crate) peers: Arc<Vec<mpsc::Sender<Job>>>,
    /// Every shard's connection queue, for ATTACH.
    pub(crate) handoff: Arc<Vec<mpsc::UnboundedSender<Incoming>>>,
    pub(crate) cfg: Arc<ServerConfig>,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) started: std::time::Instant,
    /// Requests read by this shard, for its busy poller.
    pub(crate) activity: busy_poll::Activity,
    /// Every shard's watched keys (WATCH), shared by the server's shards.
    pub(crate) watches: Arc<watches::Tables>,
    /// This shard's log (`persistence`): every write through the doors below is recorded in
    /// it before the door returns. `None` with `appendonly no`.
    pub(crate) log: RefCell<Option<ShardLog>>,
    /// The store the logs belong to (shared by the shards), for replies that must wait for
    /// durability (`accept::flush`) and for INFO. `None` with `appendonly no`.
    pub(crate) store: Option<Arc<Store>>,
}

impl ShardCtx {
    pub(crate) fn shards(&self) -> usize {
        self.peers.len()
    }

    /// Runs `ops` on this shard's engine into `results`: THE one call of `Engine::execute` in
    /// the server. Every operation of every protocol (RESP, native TCP and UDP, OCSM, and
    /// batches forwarded from other shards) passes here, on the thread that owns the engine.
    /// A feature that must see every operation or every write (an expiry sweeper's clock, a
    /// persistence log, replication) hooks in here, once.
    /// Time enters the engine here, once per batch (`expiry.rs`), and so does the eviction
    /// policy CONFIG SET may have changed; after the batch, eviction ahead of need
    /// (`Engine::evict_ahead`, a bounded step while free memory is below the watermark).
    /// With persistence on, the batch's record (its writes, the keys evicted around it, its
    /// `now` and CAS counter) is written to the shard's log before this returns; a batch
    /// whose record cannot be written answers its writes with `NotLogged`, and after a log
    /// failure writes are refused and reads served (`persistence` module comment).
    #[inline]
    pub(crate) fn execute(&self, ops: &[Op<'_>], results: &mut Results) {
        let mut e = self.engine.borrow_mut();
        let now = expiry::now_ms();
        e.set_now(now);
        e.set_eviction_policy(self.stats.live.maxmemory_policy());
        let mut log = self.log.borrow_mut();
        match log.as_mut() {
            None => {
                e.execute(ops, results);
                e.evict_ahead(directkv_engine::evict::EVICT_AHEAD_KEYS_MAX);
            }
            Some(log) => match log.refusing() {
                Some(refusal) => e.execute_reads_only(ops, results, refusal),
                None => {
                    let cas_before = e.cas_next();
                    e.execute(ops, results);
                    e.evict_ahead(directkv_engine::evict::EVICT_AHEAD_KEYS_MAX);
                    let head = RecordHead {
                        now,
                        flush: false,
                        cas_before,
                        cas_after: e.cas_next(),
                    };
                    let logged = log.record(|out| {
                        encode_record(
                            out,
                            &head,
                            e.evicted_before_batch(),
                            ops,
                            e.evicted_after_batch(),
                        )
                    });
                    if let Err(refusal) = logged {
                        results.refuse_writes(ops, refusal);
                    }
                }
            },
        }
        drop(log);
        let watched = self.watches.shard(self.id);
        watched.touched(ops, results);
        watched.expired(e.reclaimed_keys());
    }

    /// One step of the expiry sweep (`expiry.rs`): removes the expired keys of `buckets` main
    /// buckets from `cursor` on and returns the next cursor (0: the pass is done). The third
    /// door that writes (with `execute` and `flush`): what must see every write (a persistence
    /// log, replication) sees these removals here, as Redis propagates expiries as deletes.
    pub(crate) fn sweep_step(&self, cursor: u64, buckets: u64) -> u64 {
        let mut e = self.engine.borrow_mut();
        let now = expiry::now_ms();
        e.set_now(now);
        if self.refusing_writes() {
            // The log failed: removing keys it cannot record would make the store differ from
            // the log; expired keys stay invisible to reads all the same.
            return cursor;
        }
        let next = e.expire_step(cursor, buckets).0;
        self.log_deletes(&e, now);
        self.watches.shard(self.id).expired(e.reclaimed_keys());
        next
    }

    /// Runs one step of a walk over this shard's live keys (`scan.rs`), at the time of now: a
    /// read, which changes no key. The one place that walks the engine's index for a
    /// protocol, so `scan_step_buckets` bounds every step here.
    pub(crate) fn scan_step(&self, step: &mut scan::Step) {
        let mut e = self.engine.borrow_mut();
        e.set_now(expiry::now_ms());
        step.buckets = step.buckets.min(self.cfg.scan_step_buckets as u64);
        scan::walk(&e, step);
    }

    /// Main buckets of this shard's index: the range of a walk's cursor (`scan.rs`).
    pub(crate) fn index_buckets(&self) -> u64 {
        self.engine.borrow().scan_buckets()
    }

    /// Keys with a deadline in this shard.
    pub(crate) fn expiring_keys(&self) -> u64 {
        self.engine.borrow().counts().expiring_keys
    }

    /// Runs `ops` all or nothing (`Engine::execute_atomic`): the atomic plans' door, which
    /// executes through the engine's same `execute` after a check that changes no key.
    pub(crate) fn execute_atomic(
        &self,
        ops: &[Op<'_>],
        results: &mut Results,
    ) -> Result<(), directkv_engine::OpError> {
        self.check_atomic(ops)?;
        self.execute(ops, results);
        Ok(())
    }

    /// Whether `execute(ops)` would store every write (`Engine::check_atomic`), provided
    /// nothing else runs on this shard in between.
    /// Under an eviction policy the check first evicts to make room (`Engine::check_atomic`),
    /// and those removals are reported to WATCH here, at once: the write may still be refused
    /// or aborted (another shard of a cross-shard write refused), and no later command may
    /// run before the watchers of an evicted key know it.
    pub(crate) fn check_atomic(&self, ops: &[Op<'_>]) -> Result<(), directkv_engine::OpError> {
        let mut e = self.engine.borrow_mut();
        let now = expiry::now_ms();
        e.set_now(now);
        e.set_eviction_policy(self.stats.live.maxmemory_policy());
        if let Some(refusal) = self.log.borrow().as_ref().and_then(|l| l.refusing()) {
            if ops.iter().any(|op| op.kind.writes()) {
                return Err(refusal);
            }
        }
        let fits = e.check_atomic(ops);
        self.log_deletes(&e, now);
        self.watches.shard(self.id).expired(e.reclaimed_keys());
        fits
    }

    /// Arena bytes a key-value of these lengths, with a deadline or not and with memcached's
    /// item meta or not, takes (MEMORY USAGE; every shard's engine has the same layout rules).
    pub(crate) fn footprint_bytes(
        &self,
        klen: usize,
        vlen: usize,
        deadline: bool,
        meta: bool,
    ) -> usize {
        self.engine
            .borrow()
            .item_footprint_bytes(klen, vlen, deadline, meta)
    }

    /// Keys stored in this shard.
    pub(crate) fn keys(&self) -> u64 {
        self.engine.borrow().counts().keys
    }

    /// This shard's engine report (memory, counters).
    pub(crate) fn report(&self) -> directkv_engine::Report {
        self.engine.borrow().report()
    }

    /// Whether this shard refuses writes (its log failed).
    pub(crate) fn refusing_writes(&self) -> bool {
        self.log
            .borrow()
            .as_ref()
            .is_some_and(|l| l.refusing().is_some())
    }

    /// Logs the keys the engine's last step removed on its own (an expiry sweep's, or the
    /// evictions of an all-or-nothing check) as a record of deletes.
    fn log_deletes(&self, e: &Engine, now: u64) {
        let mut log = self.log.borrow_mut();
        let Some(log) = log.as_mut() else { return };
        let cas = e.cas_next();
        let head = RecordHead {
            now,
            flush: false,
            cas_before: cas,
            cas_after: cas,
        };
        // A failure fails the store (the next batch is refused); nothing here is a reply.
        let _ = log.record(|out| encode_record(out, &head, e.reclaimed_keys(), &[], []));
    }

    /// Empties the engine in place (FLUSHALL, `Engine::clear`): the other write that does not
    /// pass through `execute`, logged as a record with the flush flag. Refused (false) when the
    /// log failed: the store must not change without its record.
    pub(crate) fn flush(&self) -> bool {
        if let Some(log) = self.log.borrow_mut().as_mut() {
            if log.refusing().is_some() {
                return false;
            }
            let cas = self.engine.borrow().cas_next();
            let head = RecordHead {
                now: expiry::now_ms(),
                flush: true,
                cas_before: cas,
                cas_after: cas,
            };
            if log
                .record(|out| encode_record(out, &head, [], &[], []))
                .is_err()
            {
                return false;
            }
        }
        // In place (`Engine::clear`); the CAS counter goes on: a CAS handed out before the
        // flush must never match an item written after it (memcached's is not reset either).
        self.engine.borrow_mut().clear();
        self.watches.shard(self.id).flushed();
        true
    }
}

pub(crate) fn engine_config(cfg: &ServerConfig, shards: usize) -> EngineConfig {
    let mut e = EngineConfig::with_memory(
        (cfg.memory_bytes / shards).max(directkv_engine::engine::MEMORY_BYTES_MIN),
    );
    e.key_len_max = cfg.key_len_max;
    e.value_len_max = cfg.value_len_max;
    // One value of `value_len_max` must fit a batch's results.
    e.results_bytes_max = cfg.results_bytes_max.max(cfg.value_len_max);
    e.expected_kv_bytes = cfg.expected_kv_bytes;
    e.target_utilization = cfg.target_utilization;
    e.eviction_policy = cfg.eviction_policy().unwrap_or_default();
    e.eviction_watermark = cfg.eviction_watermark;
    e
}

/// Everything a shard thread starts from.
pub(crate) struct ShardSpawn {
    pub(crate) id: usize,
    pub(crate) engine: Engine,
    pub(crate) conns: mpsc::UnboundedReceiver<Incoming>,
    /// Every shard's connection queue, for ATTACH.
    pub(crate) handoff: Arc<Vec<mpsc::UnboundedSender<Incoming>>>,
    pub(crate) jobs: mpsc::Receiver<Job>,
    pub(crate) peers: Arc<Vec<mpsc::Sender<Job>>>,
    pub(crate) cfg: Arc<ServerConfig>,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) stop: watch::Receiver<bool>,
    /// Services to run on this shard's thread besides its connections and job queue.
    pub(crate) tasks: Vec<ShardTask>,
    pub(crate) watches: Arc<watches::Tables>,
    /// This shard's log, positioned after its last record, when persistence is on (recovery
    /// at start opened it; `None` with `appendonly no`).
    pub(crate) log: Option<ShardLog>,
}

/// Runs a shard until `stop` turns true.
pub(crate) fn run(s: ShardSpawn) {
    // Best effort: a process restricted by `taskset` to fewer CPUs than shards shares them.
    directkv_sys::cpu::pin_current_thread_to_nth_allowed(s.id);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let local = tokio::task::LocalSet::new();
    let ShardSpawn {
        id,
        engine,
        mut conns,
        handoff,
        jobs,
        peers,
        cfg,
        stats,
        mut stop,
        tasks,
        watches,
        log,
    } = s;
    if cfg.prefault_index {
        prefault::spawn(id, &engine);
    }
    local.block_on(&rt, async move {
        let ctx = Rc::new(ShardCtx {
            id,
            engine: RefCell::new(engine),
            peers,
            handoff,
            cfg,
            stats,
            started: std::time::Instant::now(),
            activity: Default::default(),
            watches,
            store: log.as_ref().map(|l| l.store.clone()),
            log: RefCell::new(log),
        });
        tokio::task::spawn_local(job_loop(ctx.clone(), jobs));
        tokio::task::spawn_local(expiry::sweep(ctx.clone()));
        tokio::task::spawn_local(snapshot::serve(ctx.clone()));
        if ctx.cfg.busy_poll_us > 0 {
            let ctx = ctx.clone();
            let window = std::time::Duration::from_micros(ctx.cfg.busy_poll_us);
            let switches = busy_poll::ThreadSwitches {
                sync_waits: ctx.store.as_ref().map(|s| s.sync_thread_waits.clone()),
            };
            tokio::task::spawn_local(async move {
                busy_poll::run(&ctx.activity, window, &ctx.stats, switches).await
            });
        }
        for task in tasks {
            let fut = task(ctx.clone());
            let stats = ctx.stats.clone();
            tokio::task::spawn_local(async move {
                panics::contain("shard task", &stats, fut).await;
            });
        }
        loop {
            tokio::select! {
                conn = conns.recv() => match conn {
                    Some(incoming) => {
                        let ctx = ctx.clone();
                        let stop = stop.clone();
                        tokio::task::spawn_local(async move {
                            crate::accept::serve(ctx, incoming, stop).await;
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
                // After a panic the results are not trusted: no reply, so the sender sees the
                // shard as unavailable for this batch.
                let ran = panics::contain_blocking("forwarded batch", &ctx.stats, || {
                    ctx.execute(&batch.ops(), &mut results)
                });
                if ran.is_some() {
                    let _ = reply.send((batch, results));
                }
            }
            Job::Count { reply } => {
                let _ = reply.send(ctx.keys());
            }
            Job::Flush { reply } => {
                let _ = reply.send(ctx.flush());
            }
            Job::Report { reply } => {
                let _ = reply.send(ctx.report());
            }
            Job::Atomic {
                batch,
                results,
                reply,
            } => atomic::run_job(&ctx, batch, results, reply),
            Job::Hold {
                batch,
                results,
                channels,
            } => atomic::hold(&ctx, batch, results, channels),
            Job::Park { channels } => exclusive::park(&ctx, channels),
            Job::Scan { mut step, reply } => {
                let ran =
                    panics::contain_blocking("scan step", &ctx.stats, || ctx.scan_step(&mut step));
                if ran.is_some() {
                    let _ = reply.send(step);
                }
            }
        }
    }
}

/// Asks every shard (including this one, through its own queue) and collects the answers.
pub(crate) async fn ask_all<T>(ctx: &ShardCtx, make: impl Fn(oneshot::Sender<T>) -> Job) -> Vec<T> {
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

/// Asks every shard from a thread outside the shards (the metrics thread) and collects the
/// answers of those that replied.
pub(crate) fn ask_all_blocking<T>(
    peers: &[mpsc::Sender<Job>],
    make: impl Fn(oneshot::Sender<T>) -> Job,
) -> Vec<T> {
    peers
        .iter()
        .filter_map(|p| {
            let (tx, rx) = oneshot::channel();
            p.blocking_send(make(tx)).ok()?;
            rx.blocking_recv().ok()
        })
        .collect()
}
