//! `log-thread-cost [DIR] [SECONDS]`: who should write the log on a 2-core machine, the shard
//! itself or a log thread (issue 22 item 1: "measure what a separate log thread costs on a
//! 2-core machine against writing from the shard itself, and pick by measurement");
//! `docs/persistence.md` "Who writes the log".
//!
//! ```text
//!   core 0: shard 0  ── engine batch ── encode ──┐            (mode A: write(2) here, per batch)
//!   core 1: shard 1  ── engine batch ── encode ──┤
//!                                                └─ bounded queue ─> log thread ─> write(2)
//!                                                   <── buffers back ─┘  (mode B: per group)
//! ```
//!
//! Two shard threads, pinned to the first two CPUs the process may use, each own an engine of
//! 1 M 8-byte keys with 8-byte values and run batches of 64 operations of YCSB-A (half GETs,
//! half PUTs of random keys) through it, as a shard does; after each batch its record
//! (`batch::encode_record`: the batch's PUTs) is logged, by mode:
//!
//! - `no log`: not logged (the baseline);
//! - `shard writes` (the server's way, `ShardLog::record`): appended to the shard's own
//!   `LogWriter` and written out, one write(2) per batch, on the shard's thread;
//! - `log thread`: encoded into a recycled buffer and sent over one bounded queue
//!   (`std::sync::mpsc::sync_channel`, [`QUEUE_BATCHES`] deep) to ONE log thread that takes
//!   everything queued, appends each record to its shard's `LogWriter` and writes out each
//!   log once per group, then sends the buffers back; unpinned, and pinned to the second
//!   shard's CPU (the two CPUs are alike, so pinning to the first would say the same).
//!
//! Each of [`RUNS`] runs takes every mode once for SECONDS (default 5), in an order rotated
//! between runs, and the figures are the medians: batches/s and ops/s of the two shards
//! together (wall), CPU per batch of the shard threads and of the log thread, write(2)
//! calls/s. Not charged to the log thread: a real server must also tell the shard (or the
//! connection) when a record is written before its replies may leave, another hand-off back.
//!
//! Then two costs one at a time, pinned to two CPUs: one write(2) of a ~1.5 KB record (64
//! PUTs) to a log in the page cache, against one hand-off of a buffer through the queue, to a
//! thread that is busy (a push and a pop) and to one that sleeps (the push and the futex
//! wake-up, and what the wake-up costs the sleeper).
//!
//! DIR (default: the system's temporary directory) should be on the disk the store would use;
//! the logs are removed after each mode. The machine may be shared: compare only figures of
//! one run, and read the load average printed first.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use directkv_engine::{Engine, EngineConfig, Op, Results};
use directkv_persist::batch::{encode_record, RecordHead};
use directkv_persist::fs::RealFs;
use directkv_persist::log::{LogHeader, LogLimits, LogWriter};

/// Operations per batch, as a pipelined connection's batch.
const BATCH_OPS: usize = 64;
/// Keys in each shard's engine.
const KEYS: u64 = 1_000_000;
/// Shard threads: one per core of a 2-core machine.
const SHARDS: usize = 2;
/// Runs of every mode; figures are their medians.
const RUNS: usize = 3;
/// Records the queue to the log thread holds before a shard waits for room.
const QUEUE_BATCHES: usize = 256;
/// Hand-offs and writes timed one at a time.
const MICRO_ROUNDS: usize = 20_000;

/// This thread's CPU time in seconds (the first field of /proc/thread-self/schedstat, in ns).
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1e9
}

/// Times this thread gave up its CPU to wait (blocked: a futex, a full queue, I/O).
fn voluntary_switches() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A small xorshift, so the figures do not depend on a generator crate's version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    NoLog,
    ShardWrites,
    /// The log thread, pinned to this CPU index (of the allowed ones) or free.
    LogThread(Option<usize>),
}

const MODES: [Mode; 4] = [
    Mode::NoLog,
    Mode::ShardWrites,
    Mode::LogThread(None),
    Mode::LogThread(Some(1)),
];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::NoLog => "no log",
            Mode::ShardWrites => "shard writes (A)",
            Mode::LogThread(None) => "log thread, unpinned (B)",
            Mode::LogThread(Some(_)) => "log thread, on shard 1's CPU (B)",
        }
    }
}

/// What one mode did in one run.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    batches: u64,
    wall_s: f64,
    shard_cpu_s: f64,
    log_cpu_s: f64,
    writes: u64,
    log_bytes: u64,
    /// Voluntary context switches of the shards: they blocked (a full queue, or the kernel
    /// in write(2)).
    shard_waits: u64,
    /// Voluntary context switches of the log thread: it slept (an empty queue) and a shard
    /// had to wake it.
    log_switches: u64,
}

/// What a shard thread reports.
#[derive(Default)]
struct ShardDone {
    batches: u64,
    cpu_s: f64,
    writes: u64,
    log_bytes: u64,
    waits: u64,
}

fn engine_of(keys: &[[u8; 8]]) -> Engine {
    let memory = ((keys.len() * 100).next_power_of_two()).max(64 << 20);
    let mut cfg = EngineConfig::with_memory(memory);
    cfg.expected_kv_bytes = 16;
    cfg.prefault = true;
    let mut e = Engine::new(cfg).expect("engine");
    let mut out = Results::default();
    for c in keys.chunks(BATCH_OPS) {
        let ops: Vec<Op> = c.iter().map(|k| Op::put(k, k)).collect();
        e.execute(&ops, &mut out);
    }
    e
}

fn new_log(dir: &Path, name: &str, shard: u32) -> LogWriter {
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    let header = LogHeader {
        shard,
        first_lsn: 1,
    };
    LogWriter::create(&RealFs, &path, header, LogLimits::default()).expect("log")
}

/// How a shard logs its batch's record.
enum Sink {
    Nothing,
    Own(LogWriter),
    Queue {
        to_log: SyncSender<(usize, Vec<u8>)>,
        back: Receiver<Vec<u8>>,
    },
}

/// One shard: batches of YCSB-A through its engine for `run`, each batch's record to `sink`.
fn shard_loop(
    shard: usize,
    e: &mut Engine,
    keys: &[[u8; 8]],
    mut sink: Sink,
    start: &Barrier,
    run: Duration,
) -> ShardDone {
    directkv_sys::cpu::pin_current_thread_to_nth_allowed(shard);
    let vals: Vec<[u8; 8]> = (0..BATCH_OPS as u64)
        .map(|i| (i * 7).to_le_bytes())
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 + shard as u64);
    let mut out = Results::default();
    let mut idx = [0usize; BATCH_OPS];
    let mut done = ShardDone::default();
    let mut spare: Vec<u8> = Vec::with_capacity(2048);
    start.wait();
    let (t0, c0, w0) = (Instant::now(), cpu_s(), voluntary_switches());
    while t0.elapsed() < run {
        for i in idx.iter_mut() {
            *i = (rng.next() % keys.len() as u64) as usize;
        }
        let r = rng.next();
        let ops: [Op; BATCH_OPS] = std::array::from_fn(|j| {
            if r >> j & 1 == 0 {
                Op::get(&keys[idx[j]])
            } else {
                Op::put(&keys[idx[j]], &vals[j])
            }
        });
        let cas_before = e.cas_next();
        e.execute(&ops, &mut out);
        let head = RecordHead {
            now: 1_700_000_000_000 + done.batches,
            flush: false,
            cas_before,
            cas_after: e.cas_next(),
        };
        match &mut sink {
            Sink::Nothing => {}
            Sink::Own(w) => {
                let before = w.file_bytes();
                if w.append_if(|o| encode_record(o, &head, [], &ops, []))
                    .expect("append")
                    .is_some()
                {
                    w.write_out().expect("write");
                    done.writes += 1;
                    done.log_bytes += w.file_bytes() - before;
                }
            }
            Sink::Queue { to_log, back } => {
                let mut buf = back
                    .try_recv()
                    .unwrap_or_else(|_| std::mem::take(&mut spare));
                buf.clear();
                if encode_record(&mut buf, &head, [], &ops, []) {
                    to_log.send((shard, buf)).expect("log thread");
                } else {
                    spare = buf;
                }
            }
        }
        done.batches += 1;
    }
    done.cpu_s = cpu_s() - c0;
    done.waits = voluntary_switches() - w0;
    done
}

/// What the log thread reports: CPU, write(2) calls, bytes, voluntary context switches.
struct LogDone {
    cpu_s: f64,
    writes: u64,
    log_bytes: u64,
    switches: u64,
}

/// The log thread: every record queued, appended to its shard's log; each log written out
/// once per group; the buffers sent back. Ends when both shards have hung up.
fn log_loop(
    pin: Option<usize>,
    mut logs: Vec<LogWriter>,
    queue: Receiver<(usize, Vec<u8>)>,
    back: Vec<Sender<Vec<u8>>>,
    start: &Barrier,
) -> LogDone {
    if let Some(cpu) = pin {
        directkv_sys::cpu::pin_current_thread_to_nth_allowed(cpu);
    }
    let mut group = Vec::with_capacity(QUEUE_BATCHES);
    let mut writes = 0u64;
    let before: u64 = logs.iter().map(|w| w.file_bytes()).sum();
    start.wait();
    let (c0, s0) = (cpu_s(), voluntary_switches());
    while let Ok(first) = queue.recv() {
        group.push(first);
        while group.len() < QUEUE_BATCHES {
            match queue.try_recv() {
                Ok(m) => group.push(m),
                Err(_) => break,
            }
        }
        for (shard, buf) in group.drain(..) {
            logs[shard].append(&buf).expect("append");
            // A shard that is gone no longer needs its buffers.
            let _ = back[shard].send(buf);
        }
        for w in logs.iter_mut().filter(|w| w.pending_bytes() > 0) {
            w.write_out().expect("write");
            writes += 1;
        }
    }
    LogDone {
        cpu_s: cpu_s() - c0,
        writes,
        log_bytes: logs.iter().map(|w| w.file_bytes()).sum::<u64>() - before,
        switches: voluntary_switches() - s0,
    }
}

fn run_mode(
    mode: Mode,
    dir: &Path,
    engines: &mut [Engine],
    keys: &[[u8; 8]],
    run: Duration,
) -> Sample {
    let log_name = |s: usize| format!("log-thread-cost-{s}.dkvl");
    let with_log_thread = matches!(mode, Mode::LogThread(_));
    let start = Barrier::new(SHARDS + 1 + usize::from(with_log_thread));
    let (to_log, queue) = mpsc::sync_channel::<(usize, Vec<u8>)>(QUEUE_BATCHES);
    let (back_tx, back_rx): (Vec<_>, Vec<_>) = (0..SHARDS).map(|_| mpsc::channel()).unzip();
    let mut sample = Sample::default();
    let t0 = std::thread::scope(|s| {
        let log = if let Mode::LogThread(pin) = mode {
            let logs = (0..SHARDS)
                .map(|i| new_log(dir, &log_name(i), i as u32))
                .collect();
            let start = &start;
            Some(s.spawn(move || log_loop(pin, logs, queue, back_tx, start)))
        } else {
            drop(queue);
            None
        };
        let shards: Vec<_> = engines
            .iter_mut()
            .zip(back_rx)
            .enumerate()
            .map(|(i, (e, back))| {
                let sink = match mode {
                    Mode::NoLog => Sink::Nothing,
                    Mode::ShardWrites => Sink::Own(new_log(dir, &log_name(i), i as u32)),
                    Mode::LogThread(_) => Sink::Queue {
                        to_log: to_log.clone(),
                        back,
                    },
                };
                let start = &start;
                s.spawn(move || shard_loop(i, e, keys, sink, start, run))
            })
            .collect();
        drop(to_log);
        start.wait();
        let t0 = Instant::now();
        for h in shards {
            let d = h.join().expect("shard");
            sample.batches += d.batches;
            sample.shard_cpu_s += d.cpu_s;
            sample.writes += d.writes;
            sample.log_bytes += d.log_bytes;
            sample.shard_waits += d.waits;
        }
        if let Some(h) = log {
            let d = h.join().expect("log thread");
            sample.log_cpu_s = d.cpu_s;
            sample.writes = d.writes;
            sample.log_bytes = d.log_bytes;
            sample.log_switches = d.switches;
        }
        t0
    });
    sample.wall_s = t0.elapsed().as_secs_f64();
    for i in 0..SHARDS {
        let _ = std::fs::remove_file(dir.join(log_name(i)));
    }
    sample
}

fn print_sample(mode: Mode, s: &Sample) {
    let b = s.batches as f64;
    println!(
        "  {:34} {:>6.0} k batches/s {:>6.2} M ops/s | CPU per batch: shards {:>5.2} us, log \
         thread {:>5.2} us | {:>6.0} k write(2)/s, {:.1} batches per write | {:.0} MB/s | \
         voluntary switches per batch: shards {:.3}, log thread {:.3}",
        mode.name(),
        b / s.wall_s / 1e3,
        b * BATCH_OPS as f64 / s.wall_s / 1e6,
        s.shard_cpu_s / b * 1e6,
        s.log_cpu_s / b * 1e6,
        s.writes as f64 / s.wall_s / 1e3,
        if s.writes == 0 {
            0.0
        } else {
            b / s.writes as f64
        },
        s.log_bytes as f64 / s.wall_s / 1e6,
        s.shard_waits as f64 / b,
        s.log_switches as f64 / b,
    );
}

/// The median and the mean of `v`.
fn median_mean(v: Vec<f64>) -> (f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (median(v), mean)
}

/// One write(2) of a framed 64-PUT record (~1.5 KB) to a log file in the page cache, the
/// file growing as a log does: (median wall ns of one call, mean wall ns, CPU ns per call
/// over the whole loop, the record's bytes). The median is what a call costs when the
/// neighbours leave the CPU alone; the mean includes the times they did not.
fn write_cost(dir: &Path) -> (f64, f64, f64, usize) {
    use std::io::Write;
    directkv_sys::cpu::pin_current_thread_to_nth_allowed(0);
    let kv = [7u8; 16];
    let ops: Vec<Op> = (0..BATCH_OPS)
        .map(|_| Op::put(&kv[..8], &kv[8..]))
        .collect();
    let mut payload = Vec::new();
    encode_record(&mut payload, &RecordHead::default(), [], &ops, []);
    let mut framed = Vec::new();
    directkv_persist::log::frame_record(&mut framed, 1, &payload);
    let path = dir.join("log-thread-cost-w.dkvl");
    let mut f = std::fs::File::create(&path).expect("file");
    let mut ns = Vec::with_capacity(MICRO_ROUNDS);
    let c0 = cpu_s();
    for _ in 0..MICRO_ROUNDS {
        let t = Instant::now();
        f.write_all(&framed).expect("write");
        ns.push(t.elapsed().as_secs_f64() * 1e9);
    }
    let cpu = (cpu_s() - c0) / MICRO_ROUNDS as f64 * 1e9;
    drop(f);
    let _ = std::fs::remove_file(&path);
    let (med, mean) = median_mean(ns);
    (med, mean, cpu, framed.len())
}

/// A hand-off through the queue to a thread that is busy, so never asleep: a push and a pop,
/// both on this thread (ns per buffer).
fn queue_cost() -> f64 {
    let (tx, rx) = mpsc::sync_channel::<(usize, Vec<u8>)>(QUEUE_BATCHES);
    let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 1500]).collect();
    let t = Instant::now();
    for _ in 0..MICRO_ROUNDS / 64 {
        for b in bufs.drain(..) {
            tx.send((0, b)).expect("send");
        }
        while let Ok((_, b)) = rx.try_recv() {
            bufs.push(b);
        }
    }
    t.elapsed().as_secs_f64() / (MICRO_ROUNDS / 64 * 64) as f64 * 1e9
}

/// What handing a buffer to a sleeping thread costs: (the sender's send() in ns, median;
/// the sleeper's CPU per hand-off in ns: woken, pop, the buffer sent back, asleep again; the
/// wake-up latency in us, median; the sleeper's voluntary context switches per hand-off).
/// The sender, on the first CPU, lets the receiver, on the second, fall asleep before each
/// send, as a log thread does between a shard's batches when it keeps up.
fn wake_cost() -> (f64, f64, f64, f64) {
    const HANDOFFS: usize = MICRO_ROUNDS / 4;
    let (tx, rx) = mpsc::sync_channel::<(Instant, Vec<u8>)>(QUEUE_BATCHES);
    let (back_tx, back_rx) = mpsc::channel::<Vec<u8>>();
    let receiver = std::thread::spawn(move || {
        directkv_sys::cpu::pin_current_thread_to_nth_allowed(1);
        let mut latency_us = Vec::with_capacity(HANDOFFS);
        let (c0, s0) = (cpu_s(), voluntary_switches());
        while let Ok((sent, b)) = rx.recv() {
            latency_us.push(sent.elapsed().as_secs_f64() * 1e6);
            if back_tx.send(b).is_err() {
                break;
            }
        }
        let n = latency_us.len() as f64;
        let cpu_ns = (cpu_s() - c0) / n * 1e9;
        let switches = (voluntary_switches() - s0) as f64 / n;
        (cpu_ns, median(latency_us), switches)
    });
    directkv_sys::cpu::pin_current_thread_to_nth_allowed(0);
    let mut buf = vec![0u8; 1500];
    let mut send_ns = Vec::with_capacity(HANDOFFS);
    for _ in 0..HANDOFFS {
        // Long enough for the receiver to have given up spinning and gone to sleep.
        let idle = Instant::now();
        while idle.elapsed() < Duration::from_micros(100) {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        tx.send((t, buf)).expect("send");
        send_ns.push(t.elapsed().as_secs_f64() * 1e9);
        buf = back_rx.recv().expect("back");
    }
    drop(tx);
    let (cpu_ns, latency_us, switches) = receiver.join().expect("receiver");
    (median(send_ns), cpu_ns, latency_us, switches)
}

fn usage(why: &str) -> ! {
    eprintln!("log-thread-cost: {why}\nusage: log-thread-cost [DIR] [SECONDS]");
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir: PathBuf = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let seconds = args.next().map_or(Ok(5.0), |s| s.parse::<f64>());
    let run = match seconds {
        Ok(s) if (0.1..=3600.0).contains(&s) => Duration::from_secs_f64(s),
        _ => usage("SECONDS must be a number from 0.1 to 3600"),
    };
    let dir = dir.join(format!("log-thread-cost-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        usage(&format!("cannot create {}: {e}", dir.display()));
    }
    let cpus = directkv_sys::cpu::allowed_cpus();
    println!(
        "CPUs allowed {cpus:?}; load average {} at the start",
        load_average()
    );

    let keys: Vec<[u8; 8]> = (0..KEYS).map(|i| i.to_le_bytes()).collect();
    let mut engines: Vec<Engine> = (0..SHARDS).map(|_| engine_of(&keys)).collect();
    let mut samples: Vec<Vec<Sample>> = vec![vec![]; MODES.len()];
    for r in 0..RUNS {
        println!("run {} (load average {}):", r + 1, load_average());
        for k in 0..MODES.len() {
            let m = (k + r) % MODES.len();
            let s = run_mode(MODES[m], &dir, &mut engines, &keys, run);
            print_sample(MODES[m], &s);
            samples[m].push(s);
        }
    }
    println!(
        "medians of {RUNS} runs of {} s, 2 shards x {KEYS} keys, batches of {BATCH_OPS} YCSB-A:",
        run.as_secs_f64()
    );
    println!(
        "| mode | batches/s | ops/s | cores used | shard CPU per batch | log thread CPU per batch \
         | CPU per batch, all | the log's CPU per batch | batches/s if 2 cores did only this \
         | write(2)/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let total_us = |s: &Sample| (s.shard_cpu_s + s.log_cpu_s) / s.batches as f64 * 1e6;
    for (m, v) in MODES.iter().zip(&samples) {
        let med = |f: &dyn Fn(&Sample) -> f64| median(v.iter().map(f).collect());
        // The log's cost, against the baseline of the same run.
        let extra = median(
            v.iter()
                .zip(&samples[0])
                .map(|(s, base)| total_us(s) - total_us(base))
                .collect(),
        );
        println!(
            "| {} | {:.0} k | {:.2} M | {:.2} | {:.2} us | {:.2} us | {:.2} us | {:.2} us | {:.0} k | {:.0} k |",
            m.name(),
            med(&|s| s.batches as f64 / s.wall_s) / 1e3,
            med(&|s| s.batches as f64 * BATCH_OPS as f64 / s.wall_s) / 1e6,
            med(&|s| (s.shard_cpu_s + s.log_cpu_s) / s.wall_s),
            med(&|s| s.shard_cpu_s / s.batches as f64) * 1e6,
            med(&|s| s.log_cpu_s / s.batches as f64) * 1e6,
            med(&total_us),
            extra,
            2e6 / med(&total_us) / 1e3,
            med(&|s| s.writes as f64 / s.wall_s) / 1e3,
        );
    }

    println!("one at a time (load average {}):", load_average());
    let mut writes = vec![];
    let mut queues = vec![];
    let mut wakes = vec![];
    for _ in 0..RUNS {
        writes.push(write_cost(&dir));
        queues.push(queue_cost());
        wakes.push(wake_cost());
    }
    println!(
        "  write(2) of one {}-byte framed record (64 PUTs) to a log in the page cache: median \
         {:.0} ns, mean {:.0} ns wall; {:.0} ns CPU per call",
        writes[0].3,
        median(writes.iter().map(|w| w.0).collect()),
        median(writes.iter().map(|w| w.1).collect()),
        median(writes.iter().map(|w| w.2).collect()),
    );
    println!(
        "  hand-off of a buffer to a busy thread (queue push + pop): {:.0} ns",
        median(queues)
    );
    println!(
        "  hand-off to a sleeping thread: the sender's send() {:.0} ns (push + futex wake, \
         median), the sleeper's CPU per hand-off {:.0} ns (woken, pop, send back, asleep), \
         wake-up latency {:.1} us (median), {:.2} voluntary context switches per hand-off",
        median(wakes.iter().map(|w| w.0).collect()),
        median(wakes.iter().map(|w| w.1).collect()),
        median(wakes.iter().map(|w| w.2).collect()),
        median(wakes.iter().map(|w| w.3).collect()),
    );
    println!("load average {} at the end", load_average());
    let _ = std::fs::remove_dir_all(&dir);
}
