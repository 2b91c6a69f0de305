//! The soak's well-behaved clients. `latency` sends PING and GET of a small key at a steady
//! pace on one authenticated connection and records every round trip; `writer` overwrites its
//! own keys and increments its own counters, remembering every write the server acknowledged,
//! and `verify` reads them all back at the end.
//!
//! A reply that does not come within `REPLY_PATIENCE` (or a connection the server closes)
//! counts as an error and as a round trip of `REPLY_PATIENCE`, so that a starved client shows
//! in the p99 instead of vanishing from it. A write whose reply was lost that way may or may
//! not have been applied: `verify` accepts either outcome for it, and nothing else.

use std::time::{Duration, Instant};

use directkv_proto::resp::Reply;
use hdrhistogram::Histogram;
use serde::Serialize;

use super::wire::Resp;
use super::Soak;

/// The pace of each well-behaved client: one request per this.
pub const REQUEST_INTERVAL: Duration = Duration::from_millis(1);
/// How long a well-behaved client waits for a reply before it counts an error.
pub const REPLY_PATIENCE: Duration = Duration::from_secs(2);
/// The key the latency client reads (set up before the attacks start).
pub const GET_KEY: &[u8] = b"soak:get";
/// Keys the writer overwrites, and counters it increments.
pub const WRITER_KEYS: usize = 1000;
pub const WRITER_COUNTERS: usize = 100;
/// The largest latency recorded, microseconds.
const LATENCY_US_MAX: u64 = 60_000_000;

/// One command's round trips, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyStats {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Replies that did not come (timeouts, closed connections, error replies).
    pub errors: u64,
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid histogram bounds")
}

fn summary(h: &Histogram<u64>, errors: u64) -> LatencyStats {
    LatencyStats {
        count: h.len(),
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        max_us: h.max(),
        errors,
    }
}

/// A connection for a well-behaved client, retried until the soak stops; `failed` is called
/// for each attempt the server did not complete (refused, or AUTH not answered), even when
/// the soak stopped meanwhile, so that a client the server never served is counted.
fn connect(soak: &Soak, failed: &mut dyn FnMut()) -> Option<Resp> {
    loop {
        match Resp::connect(soak.target.addr, &soak.target.password) {
            Ok(c) => return Some(c),
            Err(_) => failed(),
        }
        if soak.stopped() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the next tick of a client paced at `REQUEST_INTERVAL`.
fn pace(next: &mut Instant) {
    *next += REQUEST_INTERVAL;
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    } else {
        // Behind (the machine was busy): start again from now rather than catch up in a burst.
        *next = now;
    }
}

/// PING and GET round trips until the soak stops: (PING, GET).
pub fn latency(soak: &Soak) -> (LatencyStats, LatencyStats) {
    let (mut ping, mut get) = (new_histogram(), new_histogram());
    let (mut ping_errors, mut get_errors) = (0, 0);
    let patience_us = REPLY_PATIENCE.as_micros() as u64;
    // A connection the server does not complete is a PING and a GET that got no answer.
    let refused =
        |ping: &mut Histogram<u64>, get: &mut Histogram<u64>, pe: &mut u64, ge: &mut u64| {
            ping.record(patience_us).expect("within bounds");
            get.record(patience_us).expect("within bounds");
            *pe += 1;
            *ge += 1;
        };
    let mut conn = connect(soak, &mut || {
        refused(&mut ping, &mut get, &mut ping_errors, &mut get_errors)
    });
    let mut next = Instant::now();
    // At least one PING and GET, even if the soak stopped while the client connected.
    while let Some(c) = conn.as_mut() {
        let mut ok = true;
        for (args, h, errors) in [
            (&[&b"PING"[..]][..], &mut ping, &mut ping_errors),
            (&[&b"GET"[..], GET_KEY][..], &mut get, &mut get_errors),
        ] {
            let start = Instant::now();
            let reply = c.cmd(args, REPLY_PATIENCE);
            let us = (start.elapsed().as_micros() as u64).clamp(1, LATENCY_US_MAX);
            match reply {
                Ok(Reply::Error(_)) => *errors += 1,
                Ok(_) => {}
                Err(_) => {
                    *errors += 1;
                    ok = false;
                }
            }
            h.record(if ok {
                us
            } else {
                REPLY_PATIENCE.as_micros() as u64
            })
            .expect("within bounds");
            if !ok {
                break;
            }
        }
        if soak.stopped() {
            break;
        }
        if !ok {
            conn = connect(soak, &mut || {
                refused(&mut ping, &mut get, &mut ping_errors, &mut get_errors)
            });
        }
        pace(&mut next);
    }
    (summary(&ping, ping_errors), summary(&get, get_errors))
}

/// What the writer knows about one of its keys or counters.
#[derive(Debug, Clone, Default)]
struct KeyLog {
    /// The value (sequence number) of the last acknowledged SET; counters: INCRs acknowledged.
    acked: u64,
    /// SETs sent after it whose reply was lost (each may have been applied); counters: INCRs
    /// whose reply was lost.
    unknown: Vec<u64>,
}

/// The writer's record, checked by `verify`.
#[derive(Debug, Default)]
pub struct WriterLog {
    keys: Vec<KeyLog>,
    counters: Vec<KeyLog>,
    pub acked: u64,
    pub rejected: u64,
    pub unknown: u64,
}

/// The value the writer stores for sequence number `seq`: 16 bytes, so every overwrite has
/// the size of the value before it.
fn value_of(seq: u64) -> Vec<u8> {
    format!("{seq:016}").into_bytes()
}

fn key_name(i: usize) -> Vec<u8> {
    format!("soak:w:{i}").into_bytes()
}

fn counter_name(i: usize) -> Vec<u8> {
    format!("soak:c:{i}").into_bytes()
}

/// Creates the writer's keys (sequence 0) and counters (0); before the arena is filled, so
/// that the writer overwrites in place afterwards.
pub fn prepare(c: &mut Resp) -> Result<(), String> {
    let patience = Duration::from_secs(5);
    for i in 0..WRITER_KEYS {
        expect_ok(c.cmd(&[b"SET", &key_name(i), &value_of(0)], patience)?)?;
    }
    for i in 0..WRITER_COUNTERS {
        expect_ok(c.cmd(&[b"SET", &counter_name(i), b"0"], patience)?)?;
    }
    Ok(())
}

fn expect_ok(r: Reply) -> Result<(), String> {
    match r {
        Reply::Simple(_) => Ok(()),
        other => Err(format!("set-up write answered {other:?}")),
    }
}

/// SETs and INCRs, alternating, until the soak stops.
pub fn writer(soak: &Soak) -> WriterLog {
    let mut log = WriterLog {
        keys: vec![KeyLog::default(); WRITER_KEYS],
        counters: vec![KeyLog::default(); WRITER_COUNTERS],
        ..WriterLog::default()
    };
    let mut conn = connect(soak, &mut || {});
    let mut next = Instant::now();
    let mut seq = 0u64;
    while let Some(c) = conn.as_mut() {
        if soak.stopped() {
            break;
        }
        seq += 1;
        let set = seq % 2 == 1;
        let (reply, entry) = if set {
            let i = (seq / 2) as usize % WRITER_KEYS;
            let r = c.cmd(&[b"SET", &key_name(i), &value_of(seq)], REPLY_PATIENCE);
            (r, &mut log.keys[i])
        } else {
            let i = (seq / 2) as usize % WRITER_COUNTERS;
            (
                c.cmd(&[b"INCR", &counter_name(i)], REPLY_PATIENCE),
                &mut log.counters[i],
            )
        };
        match reply {
            Ok(Reply::Simple(_)) if set => {
                entry.acked = seq;
                entry.unknown.clear();
                log.acked += 1;
            }
            Ok(Reply::Integer(_)) if !set => {
                entry.acked += 1;
                log.acked += 1;
            }
            // Refused (out of memory, say): not applied.
            Ok(_) => log.rejected += 1,
            Err(_) => {
                entry.unknown.push(seq);
                log.unknown += 1;
                conn = connect(soak, &mut || {});
            }
        }
        pace(&mut next);
    }
    log
}

/// The end check of the writer's record.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WriteCheck {
    /// Writes the server acknowledged.
    pub acked: u64,
    /// Writes it refused with an error reply.
    pub rejected: u64,
    /// Writes whose reply never came.
    pub unknown: u64,
    /// Keys whose value is not what the last acknowledged SET (or a later unanswered one)
    /// stored.
    pub keys_lost: u64,
    /// Counters outside [acknowledged INCRs, acknowledged + unanswered INCRs].
    pub counters_wrong: u64,
    /// Reads that failed during the check (each also counts as lost or wrong).
    pub read_errors: u64,
    /// The first few differences, for the report.
    pub examples: Vec<String>,
}

/// Examples kept in a `WriteCheck`.
const EXAMPLES_MAX: usize = 5;
/// The longest the end check takes: a server that stopped answering fails it in this time
/// instead of holding the soak for a reply timeout per key.
pub const VERIFY_TIME_MAX: Duration = Duration::from_secs(60);
/// How long the end check waits for one reply.
const VERIFY_PATIENCE: Duration = Duration::from_secs(5);

/// The end check's reads: a fresh connection after any failure (a late reply must not be
/// taken for the next key's), and none at all after `VERIFY_TIME_MAX`.
struct Reader<'a> {
    soak: &'a Soak,
    conn: Option<Resp>,
    deadline: Instant,
}

impl Reader<'_> {
    /// The value of `key` (None: no such key), or Err when it could not be read.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, ()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(());
        }
        if self.conn.is_none() {
            self.conn = Resp::connect(self.soak.target.addr, &self.soak.target.password).ok();
        }
        let c = self.conn.as_mut().ok_or(())?;
        match c.cmd(&[b"GET", key], left.min(VERIFY_PATIENCE)) {
            Ok(Reply::Bulk(v)) => Ok(v),
            Ok(_) => Ok(None),
            Err(_) => {
                self.conn = None;
                Err(())
            }
        }
    }
}

/// Reads back every key and counter of `log` on connections of its own.
pub fn verify(soak: &Soak, log: &WriterLog) -> WriteCheck {
    let mut check = WriteCheck {
        acked: log.acked,
        rejected: log.rejected,
        unknown: log.unknown,
        ..WriteCheck::default()
    };
    let mut r = Reader {
        soak,
        conn: None,
        deadline: Instant::now() + VERIFY_TIME_MAX,
    };
    for (i, k) in log.keys.iter().enumerate() {
        let ok = match r.get(&key_name(i)) {
            Ok(Some(v)) => v == value_of(k.acked) || k.unknown.iter().any(|&s| v == value_of(s)),
            Ok(None) => false,
            Err(()) => {
                check.read_errors += 1;
                false
            }
        };
        if !ok {
            check.keys_lost += 1;
            if check.examples.len() < EXAMPLES_MAX {
                check
                    .examples
                    .push(format!("soak:w:{i}: last acknowledged SET {}", k.acked));
            }
        }
    }
    for (i, k) in log.counters.iter().enumerate() {
        let got = match r.get(&counter_name(i)) {
            Ok(v) => v.and_then(|v| String::from_utf8_lossy(&v).parse::<u64>().ok()),
            Err(()) => {
                check.read_errors += 1;
                None
            }
        };
        let range = k.acked..=k.acked + k.unknown.len() as u64;
        if !got.is_some_and(|n| range.contains(&n)) {
            check.counters_wrong += 1;
            if check.examples.len() < EXAMPLES_MAX {
                check
                    .examples
                    .push(format!("soak:c:{i}: {got:?}, expected {range:?}"));
            }
        }
    }
    check
}
