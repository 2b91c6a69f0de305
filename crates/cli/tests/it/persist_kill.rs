//! The kill -9 harness (issue 22 item 5): a server with its append-only log on is killed with
//! SIGKILL at random moments while a writer pipelines writes at it, restarted on the same
//! directory, and every write it acknowledged must be there: no lost write, no resurrected key.
//!
//! ```text
//!   cycle:  start(DIR) ─ poll PING until +PONG (deadline) ─ check every key against the model
//!           ─ killer thread: sleep 5..=200 ms, SIGKILL by PID
//!           ─ writer: batches of 1..=64 writes on distinct keys, pipelined in one write(2);
//!             each reply checked against the model, then the write counts as acknowledged
//!           ─ the connection breaks: the writes without a reply stay "pending"
//!           ─ reap the server; [after_kill(DIR): the mutation checks damage the files here]
//!   model per key: the acknowledged state (value, absolute deadline) and at most one pending
//!   write (a batch never names a key twice, and one batch is in flight), so after a restart
//!   the key is the acknowledged state or the pending write applied to it, nothing else
//! ```
//!
//! The writes: SET of a unique value, INCR (a counter is its acknowledged count, or one more
//! when its one INCR in flight had no reply), DEL, APPEND, SETRANGE, and PEXPIREAT with absolute
//! deadlines in the past (the key is deleted and must stay deleted), an hour ahead (the key and
//! its deadline must come back exactly) and within `NEAR_DEADLINE_MS` (the key must be gone
//! once its deadline passed: replaying the log must not resurrect it). A key with a near
//! deadline gets no other write until the deadline has passed (what a write after it does
//! would depend on when the server ran it); then the model calls it absent. Deadlines are
//! compared with `DEADLINE_SLACK_MS` of slack either side of the check's wall-clock window.
//!
//! The harness is generic over the server (`Subject`: how to start one on a directory), so it
//! was validated on redis-server with `--appendonly yes` before directkv had persistence; the
//! directkv tests skip, saying why, while `directkv serve` has no `--appendonly`, and run as soon
//! as it has. The mutation checks show it catches a loss: a server without persistence, and
//! redis-server whose append-only file loses its tail after the kill, must both fail it.
//!
//! Cycles per run: `CYCLES_DEFAULT` in CI; `DKV_KILL_CYCLES=1000` for the longer run, and
//! `DKV_KILL_SEED` to replay a failing run (the seed is in every failure message). The
//! redis-server runs (validation of the harness, not of directkv) are in the suite at
//! `REDIS_CYCLES_DEFAULT` cycles for `appendfsync always` and `no`; `DKV_KILL_CYCLES` sets
//! theirs too. Redis's `everysec` is not: the harness caught it losing acknowledged writes
//! (its test, ignored, says why).
//!
//! On directkv the writer also updates vectors (`DKV.VSET` of u32s and `DKV.UPDATEV add`,
//! whose reply is the vector before). `the_model_agrees_with_directkv_in_memory` holds the
//! writer's model, replies included, to directkv as it runs today, so the directkv runs fail
//! only on what a restart changed.
//!
//! Non-goals: power loss (the page cache survives a kill -9; `directkv_persist`'s fault-
//! injection tests cover torn and lost writes), timing anything.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use directkv_sys::process::{kill_now, ServerProcess};
use directkv_testkit::raw::{encode, frame_len};

const EXE: &str = env!("CARGO_BIN_EXE_directkv");

/// Kill cycles per directkv policy in the suite (issue 22: at least 200 in CI time).
const CYCLES_DEFAULT: usize = 200;
/// Kill cycles per redis-server policy in the suite: enough to validate the harness on every
/// run without doubling its time.
const REDIS_CYCLES_DEFAULT: usize = 60;
/// Overrides both cycle counts (the longer run of the report: 1000).
const CYCLES_ENV: &str = "DKV_KILL_CYCLES";
/// Fixes the random seed (of the writes, depths and kill delays) to replay a run.
const SEED_ENV: &str = "DKV_KILL_SEED";
/// String keys (SET, DEL, APPEND, SETRANGE, PEXPIREAT), counter keys (INCR) and, for
/// directkv, vector keys (`DKV.VSET` of `VECTOR_LEN` u32s, `DKV.UPDATEV add`).
const STRING_KEYS: usize = 96;
const COUNTER_KEYS: usize = 32;
const VECTOR_KEYS: usize = 16;
const VECTOR_LEN: usize = 4;
/// Writes per pipelined batch: 1..=DEPTH_MAX.
const DEPTH_MAX: usize = 64;
/// The SIGKILL comes this many milliseconds after the writer starts: KILL_DELAY_MS_MIN..=MAX.
const KILL_DELAY_MS_MIN: u64 = 5;
const KILL_DELAY_MS_MAX: u64 = 200;
/// A near deadline is this many milliseconds ahead at most (and 1 at least).
const NEAR_DEADLINE_MS: u64 = 300;
/// A far deadline is about an hour ahead: the key must come back with it.
const FAR_DEADLINE_MS: u64 = 3_600_000;
/// A deadline less than this far ahead makes its key frozen (no other write) until it passed.
const FROZEN_HORIZON_MS: u64 = 60_000;
/// Tolerance between the server's clock and the check's wall-clock window, milliseconds.
const DEADLINE_SLACK_MS: u64 = 250;
/// How long a restarted server may take to answer PING with PONG (loading included).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between readiness polls.
const READY_POLL: Duration = Duration::from_millis(2);
/// A reply slower than this fails the run (the server hangs).
const READ_TIMEOUT: Duration = Duration::from_secs(20);
/// Starts tried per restart: a port handed out by a probe listener can be taken before the
/// server binds it (redis-server).
const START_TRIES: usize = 5;

// ---------------------------------------------------------------- the subject and the run

/// The server under test: how to start it on a data directory (ready to accept), and what to do
/// to that directory after each kill (nothing, except in the mutation checks).
struct Subject<'a> {
    name: String,
    start: &'a dyn Fn(&Path) -> Result<ServerProcess, String>,
    after_kill: &'a dyn Fn(&Path),
    /// The server has directkv's vector operations (the vector keys are written).
    vectors: bool,
}

/// What a run saw.
#[derive(Debug, Default)]
struct Summary {
    cycles: usize,
    acked: u64,
    /// Writes sent whose reply never came (the kill cut them).
    pending: u64,
    /// Of those, found applied after the restart.
    pending_applied: u64,
    /// Wall time of the run (not of waiting for another run to end).
    seconds: f64,
}

/// One run at a time: a run keeps a server and the writer busy on both cores, and the timed
/// tests of this binary (bench_net) share the machine with it.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `cycles` kill cycles (and a last restart and check) on a fresh directory; `Err` names
/// the first acknowledged write missing or key resurrected, with the seed to replay it.
fn run(subject: &Subject, cycles: usize, seed: u64) -> Result<Summary, String> {
    let _alone = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let dir = DataDir::create(&subject.name);
    let mut rng = Rng(seed | 1);
    let mut keys = Keys::new(subject.vectors);
    let mut summary = Summary::default();
    let fail = |cycle: usize, e: String| {
        format!(
            "{} cycle {cycle}: {e} ({SEED_ENV}={seed} replays this run)",
            subject.name
        )
    };
    for cycle in 0..=cycles {
        let (server, mut conn) = start(subject, &dir.path).map_err(|e| fail(cycle, e))?;
        keys.check(&mut conn, &mut summary)
            .map_err(|e| fail(cycle, e))?;
        if cycle == cycles {
            summary.cycles = cycles;
            summary.seconds = started.elapsed().as_secs_f64();
            return Ok(summary);
        }
        let pid = server.pid();
        let delay = Duration::from_millis(rng.range(KILL_DELAY_MS_MIN, KILL_DELAY_MS_MAX));
        // The killer only signals our child, which stays unreaped (so its PID stays ours)
        // until `server` is dropped after the join.
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            kill_now(pid)
        });
        let written = keys.write_until_broken(&mut conn, &mut rng, cycle, usize::MAX);
        let killed = killer.join().expect("the killer thread");
        drop(conn);
        drop(server);
        written.map_err(|e| fail(cycle, e))?;
        if !killed {
            return Err(fail(cycle, format!("could not SIGKILL process {pid}")));
        }
        summary.acked += keys.acked_this_cycle;
        (subject.after_kill)(&dir.path);
    }
    unreachable!("the loop returns after its last check")
}

/// Starts the subject on `dir` and connects to it once it has loaded its files, retrying a
/// start that failed or whose port turned out to be another process's (a port handed out by a
/// probe listener can be taken before the server binds it, and the readiness probe then
/// connects to the other process).
fn start(subject: &Subject, dir: &Path) -> Result<(ServerProcess, Conn), String> {
    let mut last = String::new();
    for _ in 0..START_TRIES {
        let server = match (subject.start)(dir) {
            Ok(server) => server,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let mut conn = ready(server.addr)?;
        match process_id(&mut conn)? {
            pid if pid == server.pid() => return Ok((server, conn)),
            pid => last = format!("{} is process {pid}'s, not ours", server.addr),
        }
    }
    Err(format!("cannot start {}: {last}", subject.name))
}

/// `process_id` of `INFO server` (Redis's field; directkv has it too).
fn process_id(conn: &mut Conn) -> Result<u32, String> {
    let info = match conn.call(&[b"INFO", b"server"])? {
        Reply::Bulk(Some(text)) => String::from_utf8_lossy(&text).into_owned(),
        other => return Err(format!("INFO server answered {other:?}")),
    };
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:")?.trim().parse().ok())
        .ok_or_else(|| format!("no process_id in INFO server: {info:?}"))
}

/// A connection on which PING answered PONG: the server has loaded its files (redis-server
/// answers `-LOADING` until then).
fn ready(addr: SocketAddr) -> Result<Conn, String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let mut last = String::new();
        if let Ok(mut conn) = Conn::connect(addr) {
            match conn.call(&[b"PING"]) {
                Ok(Reply::Status(s)) if s == "PONG" => return Ok(conn),
                Ok(other) => last = format!("PING answered {other:?}"),
                Err(e) => last = e,
            }
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no PONG from {addr} within {READY_TIMEOUT:?}: {last}"
            ));
        }
        std::thread::sleep(READY_POLL);
    }
}

// ---------------------------------------------------------------- the model

/// A key's value and absolute deadline (ms since the Unix epoch); `None` is an absent key.
#[derive(Clone, PartialEq, Eq)]
struct Item {
    value: Vec<u8>,
    deadline_ms: Option<u64>,
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{:?}", show(&self.value))?;
        match self.deadline_ms {
            Some(d) => write!(f, " until {d}"),
            None => Ok(()),
        }
    }
}

type State = Option<Item>;

#[derive(Debug, Clone)]
enum Op {
    Set(Vec<u8>),
    Incr,
    Del,
    Append(Vec<u8>),
    SetRange(usize, Vec<u8>),
    /// An absolute deadline, and whether it had passed when the write was made: a past one
    /// deletes the key, a future one may pass before the server runs the write (the key is
    /// then deleted, which the model's kept deadline explains).
    PexpireAt {
        deadline_ms: u64,
        past: bool,
    },
    /// `DKV.VSET key u32 n...`: a vector of `VECTOR_LEN` u32s (little-endian in the value).
    VSet(Vec<u32>),
    /// `DKV.UPDATEV key add u32 delta` on a vector key: every element plus `delta`; answers
    /// the vector before.
    UpdateVAdd(u32),
}

/// A value of u32s as the engine stores a u32 vector: little-endian, one after the other.
fn u32s(value: &[u8]) -> Vec<u32> {
    value
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Other(Vec<u8>),
}

impl Op {
    fn command(&self, key: &[u8]) -> Vec<u8> {
        let (offset, deadline);
        let args: Vec<&[u8]> = match self {
            Op::Set(v) => vec![b"SET", key, v],
            Op::Incr => vec![b"INCR", key],
            Op::Del => vec![b"DEL", key],
            Op::Append(v) => vec![b"APPEND", key, v],
            Op::SetRange(at, v) => {
                offset = at.to_string();
                vec![b"SETRANGE", key, offset.as_bytes(), v]
            }
            Op::PexpireAt { deadline_ms, .. } => {
                deadline = deadline_ms.to_string();
                vec![b"PEXPIREAT", key, deadline.as_bytes()]
            }
            Op::VSet(v) => {
                let numbers: Vec<String> = v.iter().map(u32::to_string).collect();
                let mut args: Vec<&[u8]> = vec![b"DKV.VSET", key, b"u32"];
                args.extend(numbers.iter().map(|n| n.as_bytes()));
                return encode(&args);
            }
            Op::UpdateVAdd(d) => {
                offset = d.to_string();
                vec![b"DKV.UPDATEV", key, b"add", b"u32", offset.as_bytes()]
            }
        };
        encode(&args)
    }

    /// The state after this write on `state` and its reply, as Redis 7 answers. A past
    /// deadline deletes the key; a future one is kept, even if it passed before the server ran
    /// the write (`explains` treats a key whose deadline passed as absent).
    fn apply(&self, state: &State) -> (State, Reply) {
        let value = || state.as_ref().map_or(Vec::new(), |i| i.value.clone());
        let deadline = state.as_ref().and_then(|i| i.deadline_ms);
        let with = |value: Vec<u8>| {
            let len = value.len() as i64;
            let item = Item {
                value,
                deadline_ms: deadline,
            };
            (Some(item), Reply::Int(len))
        };
        match self {
            Op::Set(v) => {
                let item = Item {
                    value: v.clone(),
                    deadline_ms: None,
                };
                (Some(item), Reply::Status("OK".into()))
            }
            Op::Incr => {
                let n: i64 = state.as_ref().map_or(0, |i| {
                    std::str::from_utf8(&i.value)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .expect("a counter holds a number")
                });
                let item = Item {
                    value: (n + 1).to_string().into_bytes(),
                    deadline_ms: deadline,
                };
                (Some(item), Reply::Int(n + 1))
            }
            Op::Del => (None, Reply::Int(state.is_some() as i64)),
            Op::Append(suffix) => with([value(), suffix.clone()].concat()),
            Op::SetRange(at, bytes) => {
                let mut v = value();
                if v.len() < at + bytes.len() {
                    v.resize(at + bytes.len(), 0);
                }
                v[*at..at + bytes.len()].copy_from_slice(bytes);
                with(v)
            }
            Op::VSet(v) => {
                let item = Item {
                    value: v.iter().flat_map(|n| n.to_le_bytes()).collect(),
                    deadline_ms: None,
                };
                (Some(item), Reply::Status("OK".into()))
            }
            Op::UpdateVAdd(d) => {
                let before = u32s(&value());
                let after: Vec<u8> = before
                    .iter()
                    .flat_map(|n| n.wrapping_add(*d).to_le_bytes())
                    .collect();
                let numbers: Vec<String> = before.iter().map(u32::to_string).collect();
                let args: Vec<&[u8]> = numbers.iter().map(|n| n.as_bytes()).collect();
                let item = Item {
                    value: after,
                    deadline_ms: deadline,
                };
                (Some(item), Reply::Other(encode(&args)))
            }
            Op::PexpireAt { deadline_ms, past } => match state {
                None => (None, Reply::Int(0)),
                Some(_) if *past => (None, Reply::Int(1)),
                Some(item) => {
                    let item = Item {
                        value: item.value.clone(),
                        deadline_ms: Some(*deadline_ms),
                    };
                    (Some(item), Reply::Int(1))
                }
            },
        }
    }
}

/// Whether `candidate` (a state the key may be in) explains what the check saw: GET's reply
/// and PEXPIRETIME's (-2 absent, -1 no deadline), both read between `t0` and `t1` (ms).
fn explains(candidate: &State, get: &Option<Vec<u8>>, pet: i64, t0: u64, t1: u64) -> bool {
    let absent = get.is_none() && pet == -2;
    match candidate {
        None => absent,
        Some(Item {
            value,
            deadline_ms: None,
        }) => get.as_ref() == Some(value) && pet == -1,
        Some(Item {
            value,
            deadline_ms: Some(d),
        }) => {
            let present = get.as_ref() == Some(value) && pet == *d as i64;
            if d + DEADLINE_SLACK_MS < t0 {
                absent
            } else if *d > t1 + DEADLINE_SLACK_MS {
                present
            } else {
                // It may expire between the two reads, never come back after.
                let expired_between = get.as_ref() == Some(value) && pet == -2;
                absent || present || expired_between
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    String,
    Counter,
    Vector,
}

struct Key {
    name: Vec<u8>,
    kind: KeyKind,
    /// What the server acknowledged last (or what the last check found).
    acked: State,
    /// The write sent whose reply has not come.
    pending: Option<Op>,
}

impl Key {
    /// No write but the one that set it until its near deadline has passed.
    fn frozen(&self, now: u64) -> bool {
        matches!(&self.acked, Some(Item { deadline_ms: Some(d), .. }) if *d < now + FROZEN_HORIZON_MS)
    }

    /// A key whose deadline passed (with slack) is absent for the model too.
    fn settle(&mut self, now: u64) {
        if matches!(&self.acked, Some(Item { deadline_ms: Some(d), .. }) if d + DEADLINE_SLACK_MS < now)
        {
            self.acked = None;
        }
    }

    fn next_op(&self, rng: &mut Rng, now: u64, seq: u64, cycle: usize) -> Op {
        match self.kind {
            KeyKind::Counter => return Op::Incr,
            KeyKind::Vector => {
                // An update needs a vector there; values stay far from u32's wrap-around.
                if self.acked.is_some() && rng.below(2) == 0 {
                    return Op::UpdateVAdd(rng.range(1, 100) as u32);
                }
                return Op::VSet((0..VECTOR_LEN).map(|_| rng.below(1000) as u32).collect());
            }
            KeyKind::String => {}
        }
        let len = self.acked.as_ref().map_or(0, |i| i.value.len());
        let unique = format!("v{cycle}.{seq}").into_bytes();
        match rng.below(100) {
            0..=29 => Op::Set(unique),
            30..=41 => Op::Del,
            42..=53 => Op::Append(format!("+{seq}").into_bytes()),
            54..=65 => Op::SetRange(rng.below(len as u64 + 4) as usize, unique),
            66..=75 => Op::PexpireAt {
                deadline_ms: now - rng.range(1, 10_000),
                past: true,
            },
            76..=87 => Op::PexpireAt {
                deadline_ms: now + FAR_DEADLINE_MS + rng.below(1000),
                past: false,
            },
            _ => Op::PexpireAt {
                deadline_ms: now + rng.range(1, NEAR_DEADLINE_MS),
                past: false,
            },
        }
    }
}

struct Keys {
    keys: Vec<Key>,
    seq: u64,
    acked_this_cycle: u64,
}

impl Keys {
    fn new(vectors: bool) -> Keys {
        let string = (0..STRING_KEYS).map(|i| (format!("kill:s:{i}"), KeyKind::String));
        let counter = (0..COUNTER_KEYS).map(|i| (format!("kill:c:{i}"), KeyKind::Counter));
        let vector_keys = if vectors { VECTOR_KEYS } else { 0 };
        let vector = (0..vector_keys).map(|i| (format!("kill:v:{i}"), KeyKind::Vector));
        let keys = string
            .chain(counter)
            .chain(vector)
            .map(|(name, kind)| Key {
                name: name.into_bytes(),
                kind,
                acked: None,
                pending: None,
            })
            .collect();
        Keys {
            keys,
            seq: 0,
            acked_this_cycle: 0,
        }
    }

    /// Reads every key (GET and PEXPIRETIME, pipelined) and holds each to the model: the
    /// acknowledged state or the pending write applied to it. Then what was read becomes the
    /// model (the pending write's fate is now known).
    fn check(&mut self, conn: &mut Conn, summary: &mut Summary) -> Result<(), String> {
        let mut bytes = Vec::new();
        for key in &self.keys {
            bytes.extend(encode(&[b"GET", &key.name]));
            bytes.extend(encode(&[b"PEXPIRETIME", &key.name]));
        }
        let t0 = now_ms();
        conn.send(&bytes)?;
        let mut seen = Vec::with_capacity(self.keys.len());
        for key in &self.keys {
            let get = match conn.read()? {
                Reply::Bulk(v) => v,
                other => return Err(format!("GET {} answered {other:?}", show(&key.name))),
            };
            let pet = match conn.read()? {
                Reply::Int(n) => n,
                other => {
                    return Err(format!(
                        "PEXPIRETIME {} answered {other:?}",
                        show(&key.name)
                    ))
                }
            };
            seen.push((get, pet));
        }
        let t1 = now_ms();
        for (key, (get, pet)) in self.keys.iter_mut().zip(seen) {
            let after = key.pending.as_ref().map(|op| op.apply(&key.acked).0);
            let was_acked = explains(&key.acked, &get, pet, t0, t1);
            let was_pending = after
                .as_ref()
                .is_some_and(|a| explains(a, &get, pet, t0, t1));
            if !was_acked && !was_pending {
                return Err(format!(
                    "after the restart {}: GET {:?}, PEXPIRETIME {pet} (read between {t0} and \
                     {t1} ms); acknowledged {:?}, unacknowledged write {:?}: an acknowledged \
                     write was lost or a key came back",
                    show(&key.name),
                    get.as_deref().map(show),
                    key.acked,
                    key.pending,
                ));
            }
            if key.pending.take().is_some() {
                summary.pending += 1;
                summary.pending_applied += (was_pending && !was_acked) as u64;
            }
            key.acked = match (get, pet) {
                (Some(value), -1) => Some(Item {
                    value,
                    deadline_ms: None,
                }),
                (Some(value), d) if d >= 0 => Some(Item {
                    value,
                    deadline_ms: Some(d as u64),
                }),
                _ => None,
            };
        }
        Ok(())
    }

    /// Pipelines batches of writes until the connection breaks (the kill) or `batches_max`
    /// batches are answered; each reply must be what the model predicts. `Err` only for a
    /// wrong reply, never for the broken connection.
    fn write_until_broken(
        &mut self,
        conn: &mut Conn,
        rng: &mut Rng,
        cycle: usize,
        batches_max: usize,
    ) -> Result<(), String> {
        self.acked_this_cycle = 0;
        let mut order: Vec<usize> = (0..self.keys.len()).collect();
        for _ in 0..batches_max {
            let now = now_ms();
            let depth = rng.range(1, DEPTH_MAX as u64) as usize;
            rng.shuffle(&mut order);
            let mut batch = Vec::with_capacity(depth);
            let mut bytes = Vec::new();
            for &i in &order {
                if batch.len() == depth {
                    break;
                }
                let key = &mut self.keys[i];
                key.settle(now);
                if key.frozen(now) {
                    continue;
                }
                self.seq += 1;
                let op = key.next_op(rng, now, self.seq, cycle);
                bytes.extend(op.command(&key.name));
                key.pending = Some(op);
                batch.push(i);
            }
            if conn.send(&bytes).is_err() {
                return Ok(());
            }
            for i in batch {
                let Ok(reply) = conn.read() else {
                    return Ok(());
                };
                let key = &mut self.keys[i];
                let op = key.pending.take().expect("a pending write per batch key");
                let (state, expected) = op.apply(&key.acked);
                if reply != expected {
                    return Err(format!(
                        "{op:?} on {} (state {:?}) answered {reply:?}, not {expected:?}",
                        show(&key.name),
                        key.acked
                    ));
                }
                key.acked = state;
                self.acked_this_cycle += 1;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- plumbing

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64
}

fn show(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

/// xorshift64*: small, seeded, enough for choosing writes and delays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn shuffle(&mut self, v: &mut [usize]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

/// A RESP connection whose failures are values: the kill breaks it mid-batch.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn connect(addr: SocketAddr) -> Result<Conn, String> {
        let s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        s.set_read_timeout(Some(READ_TIMEOUT))
            .and_then(|()| s.set_nodelay(true))
            .map_err(|e| e.to_string())?;
        Ok(Conn { s, buf: Vec::new() })
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.s.write_all(bytes).map_err(|e| format!("send: {e}"))
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.send(&encode(args))?;
        self.read()
    }

    fn read(&mut self) -> Result<Reply, String> {
        loop {
            if let Some(n) = frame_len(&self.buf)? {
                let frame: Vec<u8> = self.buf.drain(..n).collect();
                return Ok(parse(frame));
            }
            let mut chunk = [0u8; 16 << 10];
            match self.s.read(&mut chunk) {
                Ok(0) => return Err("the server closed the connection".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
}

/// One whole reply frame as a `Reply`.
fn parse(frame: Vec<u8>) -> Reply {
    let line_end = frame.windows(2).position(|w| w == b"\r\n").unwrap_or(0);
    let text = || String::from_utf8_lossy(&frame[1..line_end]).into_owned();
    match frame[0] {
        b'+' => Reply::Status(text()),
        b'-' => Reply::Error(text()),
        b':' => text()
            .parse()
            .map_or(Reply::Other(frame.clone()), Reply::Int),
        b'$' if text() == "-1" => Reply::Bulk(None),
        b'$' => Reply::Bulk(Some(frame[line_end + 2..frame.len() - 2].to_vec())),
        b'_' => Reply::Bulk(None),
        _ => Reply::Other(frame),
    }
}

/// A fresh directory for one run's server files, removed when dropped.
struct DataDir {
    path: PathBuf,
}

impl DataDir {
    fn create(name: &str) -> DataDir {
        let path = std::env::temp_dir().join(format!(
            "directkv-kill-{name}-{}-{}",
            std::process::id(),
            now_ms()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create the data directory");
        DataDir { path }
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn cycles(default: usize) -> usize {
    std::env::var(CYCLES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    std::env::var(SEED_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| now_ms() ^ u64::from(std::process::id()) << 32)
}

/// Runs `subject` and panics with the run's failure; prints what it saw.
fn must_lose_nothing(subject: &Subject, cycles: usize) {
    let seed = seed();
    let summary = run(subject, cycles, seed).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "kill -9 harness, {}: {} cycles in {:.1} s (seed {seed}), {} writes acknowledged, none \
         lost; {} unacknowledged at a kill, {} of them found applied",
        subject.name,
        summary.cycles,
        summary.seconds,
        summary.acked,
        summary.pending,
        summary.pending_applied,
    );
}

// ---------------------------------------------------------------- redis-server (the harness's validation)

fn redis_aof(appendfsync: &'static str) -> impl Fn(&Path) -> Result<ServerProcess, String> {
    // Small rewrite threshold: the append-only file is rewritten every few cycles, so kills
    // land around rewrites too, and restarts stay quick.
    move |dir| {
        ServerProcess::redis_aof(
            dir,
            appendfsync,
            &["--auto-aof-rewrite-min-size", "4mb"],
            None,
        )
    }
}

fn redis_subject(
    appendfsync: &'static str,
) -> Option<impl Fn(&Path) -> Result<ServerProcess, String>> {
    directkv_testkit::peer::require_program("redis-server", "redis-server")?;
    Some(redis_aof(appendfsync))
}

#[test]
fn redis_aof_always_loses_nothing_acknowledged_under_kill_9() {
    let Some(start) = redis_subject("always") else {
        return;
    };
    let subject = Subject {
        name: "redis-aof-always".into(),
        start: &start,
        after_kill: &|_| {},
        vectors: false,
    };
    must_lose_nothing(&subject, cycles(REDIS_CYCLES_DEFAULT));
}

#[test]
fn redis_aof_no_loses_nothing_acknowledged_under_kill_9() {
    let Some(start) = redis_subject("no") else {
        return;
    };
    let subject = Subject {
        name: "redis-aof-no".into(),
        start: &start,
        after_kill: &|_| {},
        vectors: false,
    };
    must_lose_nothing(&subject, cycles(REDIS_CYCLES_DEFAULT));
}

/// Fails on this machine, as it should: redis-server under `appendfsync everysec` postpones
/// writing its append-only buffer for up to 2 seconds while a background fdatasync is still
/// running (`flushAppendOnlyFile`), and answers the writes meanwhile, so a kill -9 then loses
/// acknowledged writes (seen within 30 cycles, a few hundred INCRs at a time, on this disk
/// whose fdatasync takes milliseconds). The harness's claim about Redis in issue 22 ("everysec
/// can acknowledge writes that a kill -9 then loses"), measured; ignored because the loss
/// depends on the disk. Run it with `cargo test --profile ci -p directkv --test it
/// persist_kill::redis_aof_everysec -- --ignored --nocapture`.
#[test]
#[ignore = "redis-server everysec loses acknowledged writes under kill -9 when fsync is slow"]
fn redis_aof_everysec_loses_acknowledged_writes_under_kill_9_when_fsync_is_slow() {
    let Some(start) = redis_subject("everysec") else {
        return;
    };
    let subject = Subject {
        name: "redis-aof-everysec".into(),
        start: &start,
        after_kill: &|_| {},
        vectors: false,
    };
    must_lose_nothing(&subject, cycles(REDIS_CYCLES_DEFAULT));
}

// ---------------------------------------------------------------- mutation checks

/// Cycles within which the mutation checks must fail.
const MUTATION_CYCLES: usize = 20;

#[test]
fn the_harness_catches_a_server_that_keeps_nothing() {
    let Some(_) = directkv_testkit::peer::require_program("redis-server", "redis-server") else {
        return;
    };
    // redis-server without persistence, restarted on the "same" directory: every key is gone.
    let start = |_: &Path| ServerProcess::redis(None);
    let subject = Subject {
        name: "redis-in-memory".into(),
        start: &start,
        after_kill: &|_| {},
        vectors: false,
    };
    let err = run(&subject, MUTATION_CYCLES, seed()).expect_err("a loss must be caught");
    eprintln!("caught, as it must be: {err}");
    assert!(err.contains("an acknowledged write was lost"), "{err}");
}

#[test]
fn the_harness_catches_an_append_only_file_that_lost_its_tail() {
    let Some(start) = redis_subject("no") else {
        return;
    };
    // After each kill, the last bytes of redis' newest incremental append-only file go
    // (redis loads a truncated tail by default, `aof-load-truncated yes`): acknowledged writes
    // are lost, as a log that did not reach the file would lose them.
    let truncate = |dir: &Path| {
        if let Some(file) = newest_incremental_aof(dir) {
            let len = std::fs::metadata(&file).map_or(0, |m| m.len());
            let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
            f.set_len(len.saturating_sub(4096)).unwrap();
        }
    };
    let subject = Subject {
        name: "redis-aof-truncated".into(),
        start: &start,
        after_kill: &truncate,
        vectors: false,
    };
    let err = run(&subject, MUTATION_CYCLES, seed()).expect_err("a loss must be caught");
    eprintln!("caught, as it must be: {err}");
    assert!(err.contains("an acknowledged write was lost"), "{err}");
}

#[test]
fn the_harness_catches_a_recovery_that_drops_deadlines() {
    let Some(start) = redis_subject("always") else {
        return;
    };
    // After each kill, a PERSIST of every key is appended to redis' newest incremental
    // append-only file, as a recovery that forgot deadlines would do: keys whose deadline
    // passed come back, keys with one ahead lose it.
    let forget_deadlines = |dir: &Path| {
        let Some(file) = newest_incremental_aof(dir) else {
            return;
        };
        let mut persist = Vec::new();
        for i in 0..STRING_KEYS {
            persist.extend(encode(&[b"PERSIST", format!("kill:s:{i}").as_bytes()]));
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(&persist).unwrap();
    };
    let subject = Subject {
        name: "redis-aof-no-deadlines".into(),
        start: &start,
        after_kill: &forget_deadlines,
        vectors: false,
    };
    let err = run(&subject, MUTATION_CYCLES, seed()).expect_err("a loss must be caught");
    eprintln!("caught, as it must be: {err}");
    assert!(err.contains("a key came back"), "{err}");
}

/// The incremental append-only file redis-server (7) appends to in `dir`: the newest one.
fn newest_incremental_aof(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir.join("appendonlydir"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

// ---------------------------------------------------------------- directkv

/// `auto_snapshot_log_bytes` of the snapshot runs: small enough that a shard's log passes it
/// every few cycles, so kills land before, during and after log rotations, image writes and
/// manifest switches (the default, 64 MiB, is never reached in a cycle).
const SNAPSHOT_RUN_LOG_BYTES: &str = "65536";

/// `directkv serve` with its log on in `dir` under `appendfsync`, two shards (a log each);
/// `auto_snapshot` is its `--auto-snapshot-log-bytes`, with `--auto-snapshot-cpu-percent 0`
/// (None: the defaults).
fn directkv_aof(
    appendfsync: &'static str,
    auto_snapshot: Option<&'static str>,
) -> impl Fn(&Path) -> Result<ServerProcess, String> {
    move |dir| {
        let dir = dir.display().to_string();
        let mut flags = vec![
            "--shards",
            "2",
            "--memory",
            "64M",
            "--dir",
            &dir,
            "--appendonly",
            "yes",
            "--appendfsync",
            appendfsync,
        ];
        if let Some(bytes) = auto_snapshot {
            // No CPU budget either: a shard snapshots again as soon as its log passes.
            flags.extend([
                "--auto-snapshot-log-bytes",
                bytes,
                "--auto-snapshot-cpu-percent",
                "0",
            ]);
        }
        ServerProcess::directkv_serve(Path::new(EXE), &flags, None)
    }
}

fn directkv_must_lose_nothing(appendfsync: &'static str) {
    directkv_must_lose_nothing_with(appendfsync, None);
}

fn directkv_must_lose_nothing_with(appendfsync: &'static str, auto_snapshot: Option<&'static str>) {
    if !directkv_bench::net::compare::directkv_has_persistence(Path::new(EXE)) {
        eprintln!(
            "\n!!! SKIPPED: `directkv serve --help` names no --appendonly: persistence (issue 22) \
             is not in this build, so there is nothing to kill -9 yet\n"
        );
        return;
    }
    let start = directkv_aof(appendfsync, auto_snapshot);
    // Kills after which the directory held a snapshot file (finished or not): the snapshot
    // runs must really have snapshotted between kills.
    let with_snapshot = std::cell::Cell::new(0usize);
    let count_snapshots = |dir: &Path| {
        let has_snapshot = std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("snap-"))
        });
        if has_snapshot {
            with_snapshot.set(with_snapshot.get() + 1);
        }
    };
    let subject = Subject {
        name: match auto_snapshot {
            None => format!("directkv-aof-{appendfsync}"),
            Some(bytes) => format!("directkv-aof-{appendfsync}-snapshot-every-{bytes}-log-bytes"),
        },
        start: &start,
        after_kill: &count_snapshots,
        vectors: true,
    };
    must_lose_nothing(&subject, cycles(CYCLES_DEFAULT));
    if auto_snapshot.is_some() {
        eprintln!(
            "{}: a snapshot file was in the directory after {} of the kills",
            subject.name,
            with_snapshot.get()
        );
        assert!(
            with_snapshot.get() > 0,
            "{}: no kill found a snapshot in the directory: the run never snapshotted",
            subject.name
        );
    }
}

#[test]
fn directkv_always_loses_nothing_acknowledged_under_kill_9() {
    directkv_must_lose_nothing("always");
}

#[test]
fn directkv_everysec_loses_nothing_acknowledged_under_kill_9() {
    directkv_must_lose_nothing("everysec");
}

#[test]
fn directkv_no_loses_nothing_acknowledged_under_kill_9() {
    directkv_must_lose_nothing("no");
}

/// The same with snapshots in the middle of the kills: every shard snapshots itself each time
/// its log passes `SNAPSHOT_RUN_LOG_BYTES`, so a kill may land in a log rotation, an image
/// being written or a manifest switch, and the restart must still have every acknowledged
/// write (everysec: acknowledged after write(2), the case where a rotation's new log holds
/// acknowledged records before any fsync).
#[test]
fn directkv_everysec_with_snapshots_loses_nothing_acknowledged_under_kill_9() {
    directkv_must_lose_nothing_with("everysec", Some(SNAPSHOT_RUN_LOG_BYTES));
}

/// The writer's model (replies and stored states, vector keys included) agrees with directkv
/// as it runs today, in memory, with no kill: what the directkv runs above will hold its
/// persistence to is directkv's own behaviour, not only Redis's.
#[test]
fn the_model_agrees_with_directkv_in_memory() {
    let flags = ["--shards", "2", "--memory", "64M"];
    let server =
        ServerProcess::directkv_serve(Path::new(EXE), &flags, None).expect("directkv serve starts");
    let seed = seed();
    let mut rng = Rng(seed | 1);
    let mut keys = Keys::new(true);
    let mut summary = Summary::default();
    let mut conn = ready(server.addr).unwrap();
    for round in 0..20 {
        keys.write_until_broken(&mut conn, &mut rng, round, 50)
            .unwrap_or_else(|e| panic!("round {round}: {e} ({SEED_ENV}={seed})"));
        assert!(
            keys.acked_this_cycle >= 50,
            "round {round}: every batch answered"
        );
        keys.check(&mut conn, &mut summary)
            .unwrap_or_else(|e| panic!("round {round}: {e} ({SEED_ENV}={seed})"));
    }
    assert_eq!(summary.pending, 0);
}
