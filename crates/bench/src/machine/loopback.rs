//! Loopback echo reference: how many batches per second an echo pair exchanges over loopback
//! TCP between the two cores when neither end does any work. A reference, not a bound.
//!
//! What: an echo pair in one process. A server thread (pinned to the server core) accepts
//! `connections` connections and answers every complete request of `request_bytes` with
//! `response_bytes`; the calling thread (on the load core) keeps one request in flight per
//! connection, as the load generator does with one batch per connection. Both ends wait in
//! epoll on all their sockets, polling it (`busy_poll`, as the server and load generator do)
//! or sleeping in it. Nothing is parsed, looked up or encoded.
//!
//! Why it is not a ceiling (issue 19 item 17): it was once printed as the most operations per
//! second any server could answer here, and directkv-native beat it at depths 1, 4 and 16 (and
//! by 15% at depth 1 on 50 connections). The pair waits differently from the server and load
//! generator (level-triggered epoll, a `sched_yield` on every empty poll, one thread per side
//! for all connections), so a real server that batches wake-ups better can exchange more. Round
//! trips per second times the depth is therefore a reference for how much of the two cores the
//! kernel's TCP takes, and `bench compare` prints ratios to it as such; its bound is the
//! kernel CPU per operation of each server (`net/compare.rs`).
//!
//! ```text
//!   core 0: caller                          core 1: echo thread
//!   send request (each connection) ───────> recv until request_bytes arrived
//!   recv until response_bytes arrived <──── send response
//!   count one round trip, send the next     (until the caller closes the sockets)
//! ```
//!
//! `native_batch_bytes` gives the sizes of directkv's native frames for a batch of GETs, so the
//! echo carries the same bytes on the wire as `bench compare`'s directkv-native target.
//!
//! Goals: measure the kernel's per-message cost (system calls, TCP on loopback, wake-ups) with
//! the same connection count and message sizes as a real run, in the same session as it.
//! Non-goals: bandwidth of large transfers, other transports, more than one thread per side.
//!
//! **With a log (`fsync`)**: the bound of `appendfsync always` on this machine for a server that
//! does no work but the durability itself (issue 22). The echo thread holds each complete
//! request's answer; once every connection has one held it writes a record of `record_bytes`
//! per held request with one `pwrite` into a file whose blocks are written and synced before
//! the run (so an fdatasync carries data and a flush, no allocation or size change: the
//! cheapest case a log has), fdatasyncs it, and only then answers them all. That is the ideal
//! group commit of a closed loop (one fdatasync per round of every connection's batch) minus
//! all of a real server's work (parsing, the store, a record's encoding, replies' rendering).
//! Not quite a ceiling: the echo thread blocks in the fdatasync and its core halts meanwhile,
//! and on a VM a core kept busy through the wait finishes the fdatasync sooner (a polling
//! server does: BENCHMARKS "Session 20", `scripts/persist/fsync-polling.sh`).
//!
//! ```text
//!   core 1, echo with fsync:  recv req c0 .. recv req c3 ─ pwrite 4 records ─ fdatasync ─ send 4 answers
//! ```

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use directkv_proto::native::{
    encode_request, encode_response, status, NativeLimits, NativeOp, ResponseOp,
};
use serde::Serialize;

use directkv_sys::cpu::pin_current_thread;
use directkv_sys::epoll::Epoll;

/// Connections one echo pair may use (each end keeps a buffer per connection).
pub const CONNECTIONS_MAX: usize = 1024;
/// The largest request or response the pair sends, bytes: the native protocol's default frame
/// limit is far below it.
pub const MESSAGE_BYTES_MAX: usize = 16 << 20;
/// The longest measurement accepted.
pub const SECONDS_MAX: f64 = 600.0;
/// How long a sleeping end waits in epoll before it looks at the stop flag again.
const SLEEP_POLL_MS: i32 = 50;
/// Round trips timed before the measurement starts (connections settle, caches warm).
const WARMUP: Duration = Duration::from_millis(200);
/// Events taken from epoll per call.
const EVENTS_MAX: usize = 64;
/// The log file's bytes, written and synced before the run; records wrap around in it.
const LOG_REGION_BYTES: u64 = 16 << 20;
/// The largest record written per held request, bytes.
pub const RECORD_BYTES_MAX: usize = 1 << 20;

/// The echo end's log (see the module's "With a log").
#[derive(Debug, Clone, PartialEq)]
pub struct EchoFsync {
    /// Directory the log file is made in (and removed from after the run).
    pub dir: PathBuf,
    /// Bytes written per held request.
    pub record_bytes: usize,
    /// The fdatasync is made by a second thread (on the echo thread's core, as a server's
    /// sync thread is), woken through a condition variable and answering through a socket
    /// the echo end polls: what a hand-off to a sync thread costs next to syncing inline.
    pub handoff: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EchoConfig {
    pub connections: usize,
    pub request_bytes: usize,
    pub response_bytes: usize,
    pub measure: Duration,
    /// Poll epoll without sleeping (as directkv's server and load generator do by default).
    pub busy_poll: bool,
    /// (caller's core, echo thread's core), or None to leave both unpinned.
    pub cpus: Option<(usize, usize)>,
    /// Answer only after the requests' records are durable (`None`: answer at once).
    pub fsync: Option<EchoFsync>,
    /// Random 64-byte lines of a `WORK_TABLE_BYTES` table the echo end reads per request
    /// before answering it (0: none): a stand-in for a store's work, independent reads as a
    /// prefetching store's lookups are, so that a run with a log can be given the work a real
    /// server does per batch (calibrated against the server in memory in the same run).
    pub work_lines: usize,
}

/// The table `work_lines` reads from: well past the caches, as a store's index is.
pub const WORK_TABLE_BYTES: usize = 64 << 20;
/// The most lines read per request.
pub const WORK_LINES_MAX: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EchoResult {
    pub connections: usize,
    pub request_bytes: usize,
    pub response_bytes: usize,
    pub busy_poll: bool,
    pub seconds: f64,
    /// Complete request/response exchanges per second over all connections.
    pub round_trips_per_sec: f64,
    /// Requests the echo thread answered, warm-up included (at least the caller's count).
    pub server_round_trips: u64,
    /// Round trips measured by the caller (warm-up excluded).
    pub round_trips: u64,
    /// With a log: the echo thread's fdatasyncs (warm-up included) and their mean wall time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsyncs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsync_mean_us: Option<f64>,
}

impl EchoResult {
    /// Operations per second if every round trip carried `depth` operations.
    pub fn ops_per_sec(&self, depth: usize) -> f64 {
        self.round_trips_per_sec * depth as f64
    }
}

/// Bytes of directkv's native REQUEST frame of `depth` GETs of `key_size`-byte keys, and of the
/// RESPONSE frame answering each with a `value_size`-byte value.
pub fn native_batch_bytes(
    depth: usize,
    key_size: usize,
    value_size: usize,
) -> Result<(usize, usize), String> {
    let limits = NativeLimits::DEFAULT;
    let ops_max = limits.frame_ops_max as usize;
    if depth == 0 || depth > ops_max {
        return Err(format!(
            "depth {depth} outside 1..={ops_max} (operations in one native frame)"
        ));
    }
    if key_size == 0 {
        return Err("key size 0: keys are at least 1 byte".to_string());
    }
    let key = vec![b'k'; key_size];
    let value = vec![b'v'; value_size];
    let ops: Vec<NativeOp<'_>> = (0..depth).map(|_| NativeOp::get(&key)).collect();
    let mut request = Vec::new();
    encode_request(1, &ops, &limits, &mut request).map_err(|e| e.to_string())?;
    let found: Vec<ResponseOp<'_>> = (0..depth)
        .map(|_| ResponseOp {
            status: status::OK,
            data: &value,
        })
        .collect();
    let mut response = Vec::new();
    encode_response(1, &found, &limits, &mut response).map_err(|e| e.to_string())?;
    Ok((request.len(), response.len()))
}

impl EchoConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.connections == 0 || self.connections > CONNECTIONS_MAX {
            return Err(format!(
                "connections {} outside 1..={CONNECTIONS_MAX}",
                self.connections
            ));
        }
        for (what, n) in [
            ("request", self.request_bytes),
            ("response", self.response_bytes),
        ] {
            if n == 0 || n > MESSAGE_BYTES_MAX {
                return Err(format!(
                    "{what} of {n} bytes outside 1..={MESSAGE_BYTES_MAX}"
                ));
            }
        }
        let s = self.measure.as_secs_f64();
        if !(s > 0.0 && s <= SECONDS_MAX) {
            return Err(format!("measurement of {s} s outside (0, {SECONDS_MAX}]"));
        }
        if self.work_lines > WORK_LINES_MAX {
            return Err(format!(
                "{} lines of work per request outside 0..={WORK_LINES_MAX}",
                self.work_lines
            ));
        }
        if let Some(f) = &self.fsync {
            if f.record_bytes == 0 || f.record_bytes > RECORD_BYTES_MAX {
                return Err(format!(
                    "record of {} bytes outside 1..={RECORD_BYTES_MAX}",
                    f.record_bytes
                ));
            }
        }
        Ok(())
    }
}

/// Runs the echo pair for `WARMUP` plus `config.measure` and returns what it carried. The
/// echo thread is joined before returning, also on errors.
pub fn echo(config: &EchoConfig) -> Result<EchoResult, String> {
    config.validate()?;
    let log = config
        .fsync
        .as_ref()
        .map(|f| GroupLog::create(f, config.connections))
        .transpose()?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = Arc::clone(&stop);
        let config = config.clone();
        std::thread::Builder::new()
            .name("loopback-echo".to_string())
            .spawn(move || -> Result<(u64, Option<(u64, u64)>), String> {
                if let Some((_, cpu)) = config.cpus {
                    let _ = pin_current_thread(cpu);
                }
                let mut conns = Vec::with_capacity(config.connections);
                for _ in 0..config.connections {
                    let (s, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
                    conns.push(s);
                }
                let mut side = Side::new(conns, config.request_bytes, config.response_bytes)?;
                side.log = log;
                side.work = (config.work_lines > 0).then(|| Work::new(config.work_lines));
                let served = side.run(&stop, config.busy_poll, None)?;
                Ok((served, side.log.as_ref().map(|l| (l.rounds, l.fsync_ns))))
            })
            .map_err(|e| format!("cannot start the echo thread: {e}"))?
    };
    let measured = client(config, addr, &stop);
    stop.store(true, Ordering::Relaxed);
    let served = server
        .join()
        .map_err(|_| "the echo thread panicked".to_string())?;
    let (round_trips, seconds) = measured?;
    let (server_round_trips, synced) = served?;
    Ok(EchoResult {
        connections: config.connections,
        request_bytes: config.request_bytes,
        response_bytes: config.response_bytes,
        busy_poll: config.busy_poll,
        seconds,
        round_trips_per_sec: round_trips as f64 / seconds,
        server_round_trips,
        round_trips,
        fsyncs: synced.map(|(n, _)| n),
        fsync_mean_us: synced.map(|(n, ns)| ns as f64 / n.max(1) as f64 / 1e3),
    })
}

/// The echo thread's log: records of held requests, made durable a round at a time.
struct GroupLog {
    file: File,
    path: PathBuf,
    record_bytes: usize,
    /// Records of the requests held now, written at the round's end.
    pending: Vec<u8>,
    offset: u64,
    /// Requests held per connection, and how many connections hold one.
    held: Vec<usize>,
    holding: usize,
    rounds: u64,
    fsync_ns: u64,
    handoff: bool,
    /// The sync thread, once started (by the echo thread, so it shares its core).
    syncer: Option<Syncer>,
    /// Requests per connection whose round the sync thread is syncing.
    committing: Vec<usize>,
}

/// The token of the sync thread's answers in the echo end's epoll.
const SYNCED_TOKEN: u64 = u64::MAX;

/// A sync thread for `EchoFsync::handoff`.
struct Syncer {
    shared: Arc<(std::sync::Mutex<SyncState>, std::sync::Condvar)>,
    /// Readable when a round is synced (a byte per round).
    synced: std::os::unix::net::UnixStream,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct SyncState {
    asked: u64,
    done: u64,
    stop: bool,
    failed: Option<String>,
    fsync_ns: u64,
}

impl Syncer {
    fn start(file: &File) -> Result<Syncer, String> {
        let file = file.try_clone().map_err(|e| format!("dup: {e}"))?;
        let (synced, mut tell) =
            std::os::unix::net::UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        synced.set_nonblocking(true).map_err(|e| e.to_string())?;
        let shared = Arc::new((
            std::sync::Mutex::new(SyncState::default()),
            std::sync::Condvar::new(),
        ));
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("loopback-sync".into())
            .spawn(move || loop {
                let (lock, cv) = &*s;
                let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
                while st.asked == st.done && !st.stop {
                    st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                if st.stop {
                    return;
                }
                let target = st.asked;
                drop(st);
                let t = Instant::now();
                let r = file.sync_data();
                let ns = t.elapsed().as_nanos() as u64;
                let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
                st.done = target;
                st.fsync_ns += ns;
                if let Err(e) = r {
                    st.failed = Some(e.to_string());
                }
                drop(st);
                let _ = tell.write_all(&[1]);
            })
            .map_err(|e| format!("cannot start the sync thread: {e}"))?;
        Ok(Syncer {
            shared,
            synced,
            thread: Some(thread),
        })
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        let (lock, cv) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl GroupLog {
    /// Makes the file and writes and syncs all of its blocks, so that a round's fdatasync
    /// neither allocates nor changes the size.
    fn create(f: &EchoFsync, connections: usize) -> Result<GroupLog, String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = f
            .dir
            .join(format!("loopback-echo-log-{}-{n}", std::process::id()));
        let err = |what: &str, e: std::io::Error| format!("{what} {}: {e}", path.display());
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| err("create", e))?;
        let log = GroupLog {
            file,
            path: path.clone(),
            record_bytes: f.record_bytes,
            pending: Vec::new(),
            offset: 0,
            held: vec![0; connections],
            holding: 0,
            rounds: 0,
            fsync_ns: 0,
            handoff: f.handoff,
            syncer: None,
            committing: vec![0; connections],
        };
        let chunk = vec![0u8; 1 << 20];
        for at in (0..LOG_REGION_BYTES).step_by(chunk.len()) {
            log.file
                .write_all_at(&chunk, at)
                .map_err(|e| err("write", e))?;
        }
        log.file.sync_all().map_err(|e| err("fsync", e))?;
        Ok(log)
    }

    fn hold(&mut self, conn: usize) {
        if self.held[conn] == 0 {
            self.holding += 1;
        }
        self.held[conn] += 1;
        self.pending
            .extend(std::iter::repeat_n(b'r', self.record_bytes));
    }

    /// Writes the held requests' records and fdatasyncs them, or with a hand-off asks the
    /// sync thread to (starting it on first use). Ok(true): synced, answer them now.
    fn commit(&mut self, epoll: &Epoll) -> Result<bool, String> {
        if self.offset + self.pending.len() as u64 > LOG_REGION_BYTES {
            self.offset = 0;
        }
        let t = Instant::now();
        let n = self.pending.len() as u64;
        let err = |e: std::io::Error| format!("log {}: {e}", self.path.display());
        self.file
            .write_all_at(&self.pending, self.offset)
            .map_err(err)?;
        self.rounds += 1;
        self.offset = (self.offset + n) % LOG_REGION_BYTES;
        self.pending.clear();
        if self.handoff {
            if self.syncer.is_none() {
                let s = Syncer::start(&self.file)?;
                epoll
                    .add(s.synced.as_raw_fd(), SYNCED_TOKEN)
                    .map_err(|e| format!("epoll_ctl: {e}"))?;
                self.syncer = Some(s);
            }
            let s = self.syncer.as_ref().expect("started");
            let (lock, cv) = &*s.shared;
            lock.lock().unwrap_or_else(|e| e.into_inner()).asked += 1;
            cv.notify_one();
            return Ok(false);
        }
        self.file.sync_data().map_err(err)?;
        self.fsync_ns += t.elapsed().as_nanos() as u64;
        Ok(true)
    }

    /// Whether a handed-off round is being synced.
    fn in_flight(&self) -> bool {
        self.committing.iter().any(|&n| n > 0)
    }

    /// The sync thread's answer arrived: Ok(true) if the round in flight is durable.
    fn synced(&mut self) -> Result<bool, String> {
        let Some(s) = &mut self.syncer else {
            return Ok(false);
        };
        let mut b = [0u8; 64];
        while matches!((&s.synced).read(&mut b), Ok(n) if n > 0) {}
        let st = s.shared.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = &st.failed {
            return Err(format!("log {}: fdatasync: {e}", self.path.display()));
        }
        self.fsync_ns = st.fsync_ns;
        Ok(st.done == st.asked)
    }
}

impl Drop for GroupLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The caller's end: connects, runs the warm-up and the measurement, and closes its sockets
/// (by dropping them) so the echo thread sees every connection end. Returns (round trips,
/// seconds).
fn client(
    config: &EchoConfig,
    addr: std::net::SocketAddr,
    stop: &AtomicBool,
) -> Result<(u64, f64), String> {
    if let Some((cpu, _)) = config.cpus {
        let _ = pin_current_thread(cpu);
    }
    let mut conns = Vec::with_capacity(config.connections);
    for _ in 0..config.connections {
        match TcpStream::connect(addr) {
            Ok(s) => conns.push(s),
            Err(e) => {
                // The echo thread waits in accept for the rest: give it connections that
                // close at once so it can finish.
                stop.store(true, Ordering::Relaxed);
                for _ in conns.len()..config.connections {
                    drop(TcpStream::connect(addr));
                }
                return Err(format!("connect: {e}"));
            }
        }
    }
    // Every way out drops `side` and closes its sockets, so the echo thread sees each
    // connection end and finishes.
    let mut side = Side::new(conns, config.response_bytes, config.request_bytes)?;
    side.start()?;
    side.run_for(WARMUP, config.busy_poll)?;
    let start = Instant::now();
    let round_trips = side.run_for(config.measure, config.busy_poll)?;
    Ok((round_trips, start.elapsed().as_secs_f64()))
}

/// One end of the pair: answers every complete incoming message of `in_bytes` with one of
/// `out_bytes` on the same connection.
struct Side {
    conns: Vec<TcpStream>,
    /// Bytes of the current incoming message received so far, per connection.
    have: Vec<usize>,
    in_bytes: usize,
    out: Vec<u8>,
    buf: Vec<u8>,
    epoll: Epoll,
    /// The echo end's log: answers wait for it (see the module's "With a log").
    log: Option<GroupLog>,
    /// The echo end's stand-in for a store's work per request.
    work: Option<Work>,
}

/// `EchoConfig::work_lines` random line reads per request from a table past the caches.
struct Work {
    table: Vec<u64>,
    lines: usize,
    rng: u64,
}

impl Work {
    fn new(lines: usize) -> Work {
        // Written, so every page is backed (reads of a never-written page would all hit the
        // one zero page and stay in the cache).
        let table: Vec<u64> = (0..WORK_TABLE_BYTES / 8).map(|i| i as u64).collect();
        Work {
            table,
            lines,
            rng: 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// Reads `lines` random lines; the addresses do not depend on what is read, so the core
    /// keeps many misses in flight as a prefetching store does.
    fn run(&mut self) {
        let line_words = 64 / 8;
        let lines_in_table = self.table.len() / line_words;
        let mut sum = 0u64;
        for _ in 0..self.lines {
            // xorshift64
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let line = (self.rng as usize) % lines_in_table;
            sum = sum.wrapping_add(self.table[line * line_words]);
        }
        std::hint::black_box(sum);
    }
}

impl Side {
    fn new(conns: Vec<TcpStream>, in_bytes: usize, out_bytes: usize) -> Result<Side, String> {
        let epoll = Epoll::new().map_err(|e| format!("epoll_create1: {e}"))?;
        for (i, s) in conns.iter().enumerate() {
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            epoll
                .add(s.as_raw_fd(), i as u64)
                .map_err(|e| format!("epoll_ctl: {e}"))?;
        }
        Ok(Side {
            have: vec![0; conns.len()],
            conns,
            in_bytes,
            out: vec![b'x'; out_bytes],
            buf: vec![0; in_bytes.clamp(64 << 10, 1 << 20)],
            epoll,
            log: None,
            work: None,
        })
    }

    /// Sends the first message on every connection (the caller's end opens the exchange).
    fn start(&mut self) -> Result<(), String> {
        for s in &mut self.conns {
            s.write_all(&self.out).map_err(|e| format!("send: {e}"))?;
        }
        Ok(())
    }

    /// Exchanges messages for `span`; returns how many complete messages came in.
    fn run_for(&mut self, span: Duration, busy: bool) -> Result<u64, String> {
        let never = AtomicBool::new(false);
        self.run(&never, busy, Some(Instant::now() + span))
    }

    /// Exchanges messages until `stop`, the deadline, or every peer closed; returns how many
    /// complete messages came in.
    fn run(
        &mut self,
        stop: &AtomicBool,
        busy: bool,
        deadline: Option<Instant>,
    ) -> Result<u64, String> {
        let mut events = [Epoll::EMPTY; EVENTS_MAX];
        let mut open = self.conns.len();
        let mut messages = 0u64;
        while open > 0 && !stop.load(Ordering::Relaxed) {
            // A clock read (vDSO, tens of ns) is small next to a poll (a system call).
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let n = self
                .epoll
                .wait(&mut events, if busy { 0 } else { SLEEP_POLL_MS })
                .map_err(|e| format!("epoll_wait: {e}"))?;
            if n == 0 && busy {
                // Nothing arrived: give the core away if anyone else wants it.
                std::thread::yield_now();
            }
            for ev in &events[..n] {
                if Epoll::token(ev) == SYNCED_TOKEN {
                    let log = self.log.as_mut().expect("only a log's sync thread answers");
                    if log.synced()? {
                        let committing = std::mem::take(&mut log.committing);
                        self.answer_all(&committing, deadline.is_some())?;
                        let log = self.log.as_mut().expect("checked");
                        log.committing = committing;
                        log.committing.fill(0);
                    }
                    continue;
                }
                let i = Epoll::token(ev) as usize;
                let got = match self.conns[i].read(&mut self.buf) {
                    Ok(0) => {
                        self.epoll.remove(self.conns[i].as_raw_fd());
                        open -= 1;
                        continue;
                    }
                    Ok(got) => got,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                        self.epoll.remove(self.conns[i].as_raw_fd());
                        open -= 1;
                        continue;
                    }
                    Err(e) => return Err(format!("recv: {e}")),
                };
                self.have[i] += got;
                while self.have[i] >= self.in_bytes {
                    self.have[i] -= self.in_bytes;
                    messages += 1;
                    if let Some(w) = &mut self.work {
                        w.run();
                    }
                    if let Some(log) = &mut self.log {
                        log.hold(i);
                        continue;
                    }
                    if !self.answer(i, 1, deadline.is_some())? {
                        break;
                    }
                }
            }
            // With a log, a round ends when every open connection waits for an answer (and
            // with a hand-off, the last round is durable).
            if self
                .log
                .as_ref()
                .is_some_and(|l| l.holding > 0 && l.holding >= open && !l.in_flight())
            {
                let log = self.log.as_mut().expect("checked");
                log.holding = 0;
                if log.commit(&self.epoll)? {
                    let held = std::mem::take(&mut log.held);
                    self.answer_all(&held, deadline.is_some())?;
                    let log = self.log.as_mut().expect("checked");
                    log.held = held;
                    log.held.fill(0);
                } else {
                    std::mem::swap(&mut log.held, &mut log.committing);
                }
            }
        }
        Ok(messages)
    }

    /// Sends `counts[i]` answers on each connection `i`.
    fn answer_all(&mut self, counts: &[usize], caller: bool) -> Result<(), String> {
        for (i, &n) in counts.iter().enumerate() {
            if n > 0 {
                self.answer(i, n, caller)?;
            }
        }
        Ok(())
    }

    /// Sends `n` answers on connection `i`. Ok(false): the peer closed it meanwhile (only the
    /// echo end, `caller` false, carries on).
    fn answer(&mut self, i: usize, n: usize, caller: bool) -> Result<bool, String> {
        for _ in 0..n {
            if let Err(e) = self.conns[i].write_all(&self.out) {
                if caller {
                    return Err(format!("send: {e}"));
                }
                // The echo end: the caller closed this connection while it answered.
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(connections: usize, busy_poll: bool) -> EchoConfig {
        EchoConfig {
            connections,
            request_bytes: 900,
            response_bytes: 650,
            measure: Duration::from_millis(300),
            busy_poll,
            cpus: None,
            fsync: None,
            work_lines: 0,
        }
    }

    #[test]
    fn echo_pair_exchanges_whole_messages_and_stops() {
        for busy in [true, false] {
            let r = echo(&config(3, busy)).unwrap();
            assert!(r.round_trips > 0, "{r:?}");
            // The echo thread answered every request the caller counted, plus the warm-up's
            // and at most one in flight per connection.
            assert!(r.server_round_trips >= r.round_trips, "{r:?}");
            assert!(r.seconds >= 0.3, "{r:?}");
            assert_eq!(r.connections, 3);
            assert_eq!(r.ops_per_sec(64), r.round_trips_per_sec * 64.0);
        }
    }

    #[test]
    fn with_a_log_each_round_answers_every_connection_after_one_fdatasync() {
        for handoff in [false, true] {
            with_a_log(handoff);
        }
    }

    fn with_a_log(handoff: bool) {
        let dir = crate::net::compare::DataDir::create("echo-fsync-test").unwrap();
        let r = echo(&EchoConfig {
            fsync: Some(EchoFsync {
                dir: dir.path.clone(),
                record_bytes: 700,
                handoff,
            }),
            ..config(3, true)
        })
        .unwrap();
        let fsyncs = r.fsyncs.expect("a run with a log counts its fdatasyncs");
        assert!(fsyncs > 0 && r.round_trips > 0, "{r:?}");
        // One request in flight per connection: a round holds one of each, and a last
        // round may have been left unanswered when the run stopped.
        let answered = fsyncs * 3;
        assert!(
            r.server_round_trips >= answered && r.server_round_trips <= answered + 3,
            "{r:?}"
        );
        assert!(r.round_trips <= answered, "{r:?}");
        assert!(r.fsync_mean_us.is_some_and(|us| us > 0.0), "{r:?}");
        // The log file is gone after the run.
        assert_eq!(std::fs::read_dir(&dir.path).unwrap().count(), 0);
        // Without a log there is no fdatasync count.
        assert_eq!(echo(&config(1, true)).unwrap().fsyncs, None);
    }

    #[test]
    fn a_log_that_cannot_be_made_is_a_clear_error() {
        let missing = std::env::temp_dir().join(format!("no-such-dir-{}", std::process::id()));
        let e = echo(&EchoConfig {
            fsync: Some(EchoFsync {
                dir: missing.clone(),
                record_bytes: 700,
                handoff: false,
            }),
            ..config(1, true)
        })
        .unwrap_err();
        assert!(
            e.contains("create") && e.contains(&missing.display().to_string()),
            "{e}"
        );
        let zero = EchoConfig {
            fsync: Some(EchoFsync {
                dir: std::env::temp_dir(),
                record_bytes: 0,
                handoff: false,
            }),
            ..config(1, true)
        };
        assert!(echo(&zero).unwrap_err().contains("record of 0 bytes"));
    }

    #[test]
    fn messages_larger_than_one_read_are_reassembled() {
        // 200 KiB requests arrive in several reads; each still counts once.
        let r = echo(&EchoConfig {
            request_bytes: 200 << 10,
            response_bytes: 10,
            ..config(2, true)
        })
        .unwrap();
        assert!(r.round_trips > 0 && r.server_round_trips >= r.round_trips);
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(echo(&config(0, true)).unwrap_err().contains("connections"));
        let big = EchoConfig {
            request_bytes: MESSAGE_BYTES_MAX + 1,
            ..config(1, true)
        };
        assert!(echo(&big).unwrap_err().contains("request"));
        let long = EchoConfig {
            measure: Duration::from_secs(601),
            ..config(1, true)
        };
        assert!(echo(&long).unwrap_err().contains("measurement"));
    }

    #[test]
    fn native_batch_sizes_follow_the_protocol() {
        let (req1, resp1) = native_batch_bytes(1, 8, 8).unwrap();
        let (req64, resp64) = native_batch_bytes(64, 8, 8).unwrap();
        // A frame header plus a fixed size per operation.
        let per_req = (req64 - req1) / 63;
        let per_resp = (resp64 - resp1) / 63;
        assert_eq!(req64 - req1, per_req * 63);
        assert_eq!(resp64 - resp1, per_resp * 63);
        assert!(per_req > 8, "a GET carries its 8-byte key: {per_req}");
        assert!(per_resp > 8, "a reply carries its 8-byte value: {per_resp}");
        assert!(native_batch_bytes(0, 8, 8).unwrap_err().contains("depth 0"));
        assert!(native_batch_bytes(1 << 20, 8, 8)
            .unwrap_err()
            .contains("depth"));
        assert!(native_batch_bytes(64, 0, 8)
            .unwrap_err()
            .contains("key size 0"));
        assert!(native_batch_bytes(64, 251, 8).unwrap_err().contains("250"));
        let (req64k, resp64v) = native_batch_bytes(64, 16, 24).unwrap();
        assert_eq!(req64k - req64, 64 * 8);
        assert_eq!(resp64v - resp64, 64 * 16);
    }
}
