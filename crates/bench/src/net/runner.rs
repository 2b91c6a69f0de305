//! The network benchmark loop: `connections` drivers, each with one batch of `depth` operations
//! in flight, on one tokio runtime, in closed or open loop.
//!
//! ```text
//!   closed loop   conn i:  [fill]─send─────wait─────[record]─[fill]─send─────wait───── ...
//!                          latency = reply time − send time; the next batch leaves at once
//!
//!   open loop     conn i:  intended send times s_k = start + k·interval (interval = connections·depth / rate)
//!                          wait until s_k (if not late) ─ send ─ wait ─ latency = reply time − s_k
//! ```
//!
//! Open loop measures latency from the *intended* send time, so when the target falls behind
//! the schedule the time a batch spent waiting for its turn counts (no coordinated omission:
//! a stalled server cannot hide its stall by slowing the generator down). Every operation of a
//! batch is recorded with the batch's latency in an HdrHistogram (1 ns resolution up to an hour,
//! 3 significant digits). The first `warmup` of each run executes but is not recorded.
//!
//! A current-thread runtime is the intended host: one load-generator core drives every
//! connection without cross-thread wake-ups. Time is read through the `Clock` seam so that the
//! schedule and the warm-up arithmetic are testable without a real server.
//!
//! Non-goals: coordinating several load-generator processes, and rate ramps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::net::driver::{BatchOutcome, BenchOp, Driver, DriverError};
use crate::net::workload::{LoadStream, OpStream, WorkloadSpec};

/// Largest latency the histogram holds, ns (an hour); longer ones are clamped to it.
pub const LATENCY_NS_MAX: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits the histogram keeps.
pub const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;
/// Operations per batch the runner accepts at most.
pub const DEPTH_MAX: usize = 1 << 16;
/// The last stretch before an open-loop send time that is waited out by yielding, not by the
/// millisecond-resolution timer.
const TIMER_SLACK: Duration = Duration::from_millis(2);
/// Connections the runner accepts at most.
pub const CONNECTIONS_MAX: usize = 4096;

/// How batches are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// Each connection sends its next batch as soon as the previous one is answered.
    Closed,
    /// Operations per second offered over all connections, on a fixed schedule.
    Open { ops_per_sec: f64 },
}

/// One measured run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunConfig {
    pub connections: usize,
    pub depth: usize,
    pub warmup: Duration,
    pub measure: Duration,
    pub pacing: Pacing,
    /// Poll the connections' sockets without sleeping while the run lasts (see
    /// [`busy_poll`]): the load generator owns its core, and a sleeping one pays a wake-up per
    /// reply.
    pub busy_poll: bool,
}

impl RunConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.connections == 0 || self.connections > CONNECTIONS_MAX {
            return Err(format!(
                "connections must be 1..={CONNECTIONS_MAX}, got {}",
                self.connections
            ));
        }
        if self.depth == 0 || self.depth > DEPTH_MAX {
            return Err(format!("depth must be 1..={DEPTH_MAX}, got {}", self.depth));
        }
        if self.measure.is_zero() {
            return Err("the measured duration must be positive".to_string());
        }
        if let Pacing::Open { ops_per_sec } = self.pacing {
            if !(ops_per_sec.is_finite() && ops_per_sec > 0.0) {
                return Err(format!("rate must be a positive number, got {ops_per_sec}"));
            }
        }
        Ok(())
    }
}

/// A source of monotonic time, so that scheduling arithmetic can be tested with made-up times.
pub trait Clock {
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The open-loop schedule of one connection: batch `k` is meant to leave at
/// `start + k * interval`.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub start: Instant,
    pub interval: Duration,
}

impl Schedule {
    /// The schedule of one of `connections` connections sending `depth`-op batches so that all
    /// of them together offer `ops_per_sec`. Connection `index` is offset by a fraction of the
    /// interval so that the connections do not all send at the same instant.
    pub fn new(
        start: Instant,
        ops_per_sec: f64,
        connections: usize,
        depth: usize,
        index: usize,
    ) -> Schedule {
        let interval = Duration::from_secs_f64(connections as f64 * depth as f64 / ops_per_sec);
        let offset = interval.mul_f64(index as f64 / connections as f64);
        Schedule {
            start: start + offset,
            interval,
        }
    }

    pub fn intended(&self, k: u64) -> Instant {
        self.start + self.interval.mul_f64(k as f64)
    }
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct RunStats {
    pub outcome: BatchOutcome,
    pub batches: u64,
    /// From the start of the measured interval to the last measured reply, seconds (at least
    /// the configured duration: a run whose last batch is answered late is not shortened).
    pub seconds: f64,
    /// When the last measured reply arrived.
    pub last_reply: Option<Instant>,
    /// Per-operation latency, ns.
    pub latency_ns: Histogram<u64>,
}

impl RunStats {
    /// Successful operations per second ([`BatchOutcome::succeeded`]: failed ones excluded).
    pub fn ops_per_sec(&self) -> f64 {
        self.outcome.succeeded() as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// Callbacks the runner makes while running (a progress bar, or nothing).
pub trait Progress: Send + Sync {
    /// `done` operations measured so far; called from the runner about ten times a second.
    fn measured(&self, _done: u64) {}
}

/// Progress that shows nothing.
pub struct NoProgress;
impl Progress for NoProgress {}

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, LATENCY_SIGNIFICANT_DIGITS)
        .expect("static histogram bounds are valid")
}

/// Writes every key of `spec` once through `drivers`, `depth` operations per batch, the keys
/// split round-robin in batches over the drivers. Returns the outcome; failed writes are an
/// error because a run over a partly loaded key space would measure misses.
pub async fn load(
    drivers: &mut Vec<Driver>,
    spec: &WorkloadSpec,
    depth: usize,
) -> Result<BatchOutcome, DriverError> {
    let stream = Arc::new(std::sync::Mutex::new(LoadStream::new(spec.keys)));
    let mut tasks = tokio::task::JoinSet::new();
    for driver in std::mem::take(drivers) {
        let stream = Arc::clone(&stream);
        tasks.spawn(async move {
            let mut driver = driver;
            let mut ops: Vec<BenchOp> = Vec::with_capacity(depth);
            let mut outcome = BatchOutcome::default();
            loop {
                let more = stream.lock().expect("load stream").fill(&mut ops, depth);
                if !more {
                    break;
                }
                if let Err(e) = driver.execute(&ops, &mut outcome).await {
                    return (driver, outcome, Err(e));
                }
            }
            (driver, outcome, Ok(()))
        });
    }
    let mut outcome = BatchOutcome::default();
    let mut error = None;
    while let Some(joined) = tasks.join_next().await {
        let (driver, part, result) = joined.expect("load task panicked");
        drivers.push(driver);
        outcome.add(part);
        if let Err(e) = result {
            error.get_or_insert(e);
        }
    }
    if let Some(e) = error {
        return Err(e);
    }
    if outcome.failed > 0 {
        return Err(DriverError::Server(format!(
            "{} of {} load writes failed (is the target's memory too small for the keys?)",
            outcome.failed,
            outcome.total()
        )));
    }
    Ok(outcome)
}

/// Runs `config` over `drivers` (one per connection; `drivers.len()` must equal
/// `config.connections`), feeding connection `i` with `OpStream::new(spec, i)`.
pub async fn run(
    drivers: &mut Vec<Driver>,
    spec: &WorkloadSpec,
    config: &RunConfig,
    progress: Arc<dyn Progress>,
) -> Result<RunStats, DriverError> {
    assert_eq!(
        drivers.len(),
        config.connections,
        "one driver per connection"
    );
    // Key ids are drawn before the clock starts (see `OpStream`).
    let pool = crate::net::workload::key_pool_len(config.connections);
    let streams: Vec<OpStream> = (0..config.connections)
        .map(|i| OpStream::with_pool(spec, i as u64, pool))
        .collect();
    let clock = SystemClock;
    let start = clock.now();
    let measure_from = start + config.warmup;
    let measure_until = measure_from + config.measure;
    let measured_ops = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, (driver, stream)) in std::mem::take(drivers).into_iter().zip(streams).enumerate() {
        let conn = Connection {
            stream,
            depth: config.depth,
            schedule: match config.pacing {
                Pacing::Closed => None,
                Pacing::Open { ops_per_sec } => Some(Schedule::new(
                    start,
                    ops_per_sec,
                    config.connections,
                    config.depth,
                    index,
                )),
            },
            measure_from,
            measure_until,
            measured_ops: Arc::clone(&measured_ops),
        };
        tasks.spawn(conn.run(driver));
    }
    let ticker = {
        let measured_ops = Arc::clone(&measured_ops);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                progress.measured(measured_ops.load(Ordering::Relaxed));
            }
        })
    };
    let poller = config.busy_poll.then(|| tokio::spawn(busy_poll()));
    let (back, stats) = join_all_stats(tasks, measure_from).await;
    ticker.abort();
    if let Some(p) = poller {
        p.abort();
    }
    drivers.extend(back);
    stats
}

/// Keeps the runtime polling its sockets with a zero timeout instead of blocking in epoll
/// (on a current-thread runtime a runnable task makes it do so), yielding the core to other
/// threads every few polls. On this kind of VM a thread that sleeps until a reply arrives costs
/// tens of microseconds per round trip; the server does the same (`busy_poll_us`).
async fn busy_poll() {
    for polls in 0u64.. {
        // Every 16th poll only: sched_yield is a pass through the scheduler.
        if polls % 16 == 0 {
            std::thread::yield_now();
        }
        tokio::task::yield_now().await;
    }
}

struct Connection {
    stream: OpStream,
    depth: usize,
    schedule: Option<Schedule>,
    measure_from: Instant,
    measure_until: Instant,
    measured_ops: Arc<AtomicU64>,
}

type ConnResult = (Driver, RunStats, Result<(), DriverError>);

impl Connection {
    async fn run(mut self, mut driver: Driver) -> ConnResult {
        let mut ops: Vec<BenchOp> = Vec::with_capacity(self.depth);
        let mut stats = RunStats {
            outcome: BatchOutcome::default(),
            batches: 0,
            seconds: (self.measure_until - self.measure_from).as_secs_f64(),
            last_reply: None,
            latency_ns: new_histogram(),
        };
        let clock = SystemClock;
        let mut k = 0u64;
        loop {
            let intended = match self.schedule {
                Some(schedule) => {
                    let at = schedule.intended(k);
                    k += 1;
                    // Stop at the end of the schedule, or when the real time is up: an
                    // overloaded target leaves a backlog that is not worked off after the run.
                    if at >= self.measure_until || clock.now() >= self.measure_until {
                        break;
                    }
                    wait_until(&clock, at).await;
                    at
                }
                None => {
                    let now = clock.now();
                    if now >= self.measure_until {
                        break;
                    }
                    now
                }
            };
            self.stream.fill(&mut ops, self.depth);
            let sent = if self.schedule.is_some() {
                intended
            } else {
                clock.now()
            };
            let mut outcome = BatchOutcome::default();
            if let Err(e) = driver.execute(&ops, &mut outcome).await {
                return (driver, stats, Err(e));
            }
            let done = clock.now();
            if intended >= self.measure_from {
                record_batch(&mut stats, outcome, done.saturating_duration_since(sent));
                stats.last_reply = Some(done);
                self.measured_ops
                    .fetch_add(outcome.total(), Ordering::Relaxed);
            }
        }
        (driver, stats, Ok(()))
    }
}

/// Waits until `at` with microsecond precision. tokio's timer has a resolution of one
/// millisecond, so sleeping all the way would send batches up to a millisecond late, and the
/// open loop (which measures from the intended time) would report that lateness as latency.
/// The timer covers all but the last `TIMER_SLACK`; the rest is spent yielding to the other
/// connections' tasks until the time has come, which keeps the load core busy, as a load
/// generator's core may be.
async fn wait_until(clock: &impl Clock, at: Instant) {
    let now = clock.now();
    if at > now + TIMER_SLACK {
        tokio::time::sleep_until((at - TIMER_SLACK).into()).await;
    }
    while clock.now() < at {
        tokio::task::yield_now().await;
    }
}

/// Counts one measured batch: every operation gets the batch's latency.
fn record_batch(stats: &mut RunStats, outcome: BatchOutcome, latency: Duration) {
    let ns = u64::try_from(latency.as_nanos())
        .unwrap_or(u64::MAX)
        .clamp(1, LATENCY_NS_MAX);
    stats
        .latency_ns
        .record_n(ns, outcome.total())
        .expect("clamped into the histogram's range");
    stats.outcome.add(outcome);
    stats.batches += 1;
}

/// Waits for every connection task; the first error wins, but every driver still comes back
/// so the caller can drop (close) them in order.
async fn join_all_stats(
    mut tasks: tokio::task::JoinSet<ConnResult>,
    measure_from: Instant,
) -> (Vec<Driver>, Result<RunStats, DriverError>) {
    let mut drivers = Vec::new();
    let mut total: Option<RunStats> = None;
    let mut error = None;
    while let Some(joined) = tasks.join_next().await {
        let (driver, stats, result) = joined.expect("connection task panicked");
        drivers.push(driver);
        if let Err(e) = result {
            error.get_or_insert(e);
        }
        match &mut total {
            None => total = Some(stats),
            Some(t) => {
                t.outcome.add(stats.outcome);
                t.batches += stats.batches;
                t.last_reply = t.last_reply.max(stats.last_reply);
                t.latency_ns
                    .add(&stats.latency_ns)
                    .expect("histograms share bounds");
            }
        }
    }
    let result = match error {
        Some(e) => Err(e),
        None => {
            let mut t = total.expect("at least one connection");
            if let Some(last) = t.last_reply {
                t.seconds = t
                    .seconds
                    .max(last.saturating_duration_since(measure_from).as_secs_f64());
            }
            Ok(t)
        }
    };
    (drivers, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_loop_schedule_spreads_connections_and_keeps_the_rate() {
        let start = Instant::now();
        // 4 connections x depth 10 at 40,000 ops/s: each connection sends 1,000 batches/s.
        let s0 = Schedule::new(start, 40_000.0, 4, 10, 0);
        let s1 = Schedule::new(start, 40_000.0, 4, 10, 1);
        assert_eq!(s0.interval, Duration::from_millis(1));
        assert_eq!(s0.intended(0), start);
        assert_eq!(s1.intended(0), start + Duration::from_micros(250));
        assert_eq!(s0.intended(1000), start + Duration::from_secs(1));
    }

    #[test]
    fn a_batch_records_every_operation_with_its_latency() {
        let mut stats = RunStats {
            outcome: BatchOutcome::default(),
            batches: 0,
            seconds: 1.0,
            last_reply: None,
            latency_ns: new_histogram(),
        };
        let outcome = BatchOutcome {
            ok: 60,
            missed: 3,
            failed: 1,
        };
        record_batch(&mut stats, outcome, Duration::from_micros(250));
        record_batch(&mut stats, outcome, Duration::from_secs(7200));
        assert_eq!(stats.latency_ns.len(), 128);
        assert_eq!(stats.outcome.total(), 128);
        assert_eq!(stats.batches, 2);
        let p25 = stats.latency_ns.value_at_quantile(0.25);
        assert!((249_000..=251_000).contains(&p25), "{p25}");
        // Latencies beyond the histogram's range are clamped, not dropped.
        assert!(stats.latency_ns.max() >= LATENCY_NS_MAX * 999 / 1000);
        assert!(RunConfig {
            connections: 1,
            depth: 0,
            warmup: Duration::ZERO,
            measure: Duration::from_secs(1),
            pacing: Pacing::Closed,
            busy_poll: false,
        }
        .validate()
        .is_err());
    }
}
