//! Prometheus metrics over HTTP (default 127.0.0.1:7072, `GET /metrics`): a blocking accept
//! thread hands each connection to a thread of its own, which asks every shard for its engine
//! report over the shard queues. The counters come from `stats::COUNTERS`, the table INFO
//! renders too.
//!
//! Connections are served concurrently so that sockets which connect and stay silent (a
//! port scanner, a stuck scraper, an attacker) cannot delay a scrape (issue 19 item 13): each
//! has `READ_TIMEOUT` to send its request line, and at most `CONNECTIONS_MAX` are served at
//! once. When all of them are taken, the oldest connection still waiting for its request is
//! shut down to make room (`Silent`), so that `CONNECTIONS_MAX` silent sockets cannot turn
//! scrapes away; only when every one of them is busy answering is a new connection closed
//! without an answer.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use directkv_engine::stats::KindCounters;
use directkv_engine::{OpKind, Report};
use tokio::sync::{mpsc, watch};

use crate::shard::{ask_all_blocking, Job};
use crate::stats::{Reader, ServerStats, COUNTERS};

/// Bytes of an HTTP request read before answering (the request line is all that matters).
const REQUEST_BYTES_MAX: usize = 8 << 10;

/// Metrics connections served at once; more are closed unanswered.
const CONNECTIONS_MAX: usize = 16;

/// Time a metrics connection has to send its request (and to take the reply).
const READ_TIMEOUT: Duration = Duration::from_millis(500);

pub(crate) fn serve(
    listener: TcpListener,
    peers: Arc<Vec<mpsc::Sender<Job>>>,
    stats: Arc<ServerStats>,
    stop: watch::Receiver<bool>,
) {
    let busy = Arc::new(AtomicUsize::new(0));
    let silent = Arc::new(Silent::default());
    let mut backoff = crate::files::Backoff::new();
    for (id, conn) in listener.incoming().enumerate() {
        if *stop.borrow() {
            return;
        }
        // Out of file descriptors, accept fails at once however often it is called: pause
        // instead of spinning (issue 19 item 8).
        let Ok(c) = conn else {
            backoff.pause();
            continue;
        };
        backoff.reset();
        // When full, the oldest silent connection makes way (its thread ends at once); the
        // new one is served meanwhile, so the count may pass the cap by the evicted ones.
        if busy.fetch_add(1, Ordering::AcqRel) >= CONNECTIONS_MAX && !silent.evict_oldest() {
            busy.fetch_sub(1, Ordering::AcqRel);
            continue; // dropping `c` closes it
        }
        silent.add(id, &c);
        let (peers, stats, busy2, silent2) =
            (peers.clone(), stats.clone(), busy.clone(), silent.clone());
        let spawned = std::thread::Builder::new()
            .name("directkv-metrics-conn".into())
            .spawn(move || {
                let _ = answer(c, id, &silent2, &peers, &stats);
                silent2.remove(id);
                busy2.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            silent.remove(id);
            busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The connections that have not sent their request yet, oldest first, each with a second
/// handle on its socket to shut it down by.
#[derive(Default)]
struct Silent(Mutex<VecDeque<(usize, TcpStream)>>);

impl Silent {
    fn add(&self, id: usize, c: &TcpStream) {
        // Without a second handle (no file descriptor left), the connection cannot be
        // evicted; its read timeout still ends it.
        if let Ok(handle) = c.try_clone() {
            self.lock().push_back((id, handle));
        }
    }

    fn remove(&self, id: usize) {
        self.lock().retain(|(i, _)| *i != id);
    }

    /// Shuts the oldest silent connection down (its read returns at once); false if none.
    fn evict_oldest(&self) -> bool {
        let Some((_, oldest)) = self.lock().pop_front() else {
            return false;
        };
        let _ = oldest.shutdown(std::net::Shutdown::Both);
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(usize, TcpStream)>> {
        // A poisoned lock only means a panic in another connection's thread: the list holds.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn answer(
    mut c: TcpStream,
    id: usize,
    silent: &Silent,
    peers: &[mpsc::Sender<Job>],
    stats: &ServerStats,
) -> std::io::Result<()> {
    c.set_read_timeout(Some(READ_TIMEOUT))?;
    c.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut buf = vec![0u8; REQUEST_BYTES_MAX];
    let n = c.read(&mut buf)?;
    // It spoke: no longer a candidate for eviction.
    silent.remove(id);
    let line = String::from_utf8_lossy(&buf[..n]);
    let (status, body) = if line.starts_with("GET /metrics") {
        ("200 OK", render(&reports(peers), stats))
    } else {
        ("404 Not Found", "try GET /metrics\n".to_string())
    };
    write!(
        c,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn reports(peers: &[mpsc::Sender<Job>]) -> Vec<Report> {
    ask_all_blocking(peers, |reply| Job::Report { reply })
}

/// The metrics text (Prometheus exposition format 0.0.4): the server-wide rows of
/// `stats::COUNTERS`, the per-shard gauges, then the engine rows per shard (and kind).
pub(crate) fn render(reports: &[Report], stats: &ServerStats) -> String {
    let mut s = String::new();
    // Server-wide values: one line each, read from the shared atomic counters.
    for c in COUNTERS {
        if let Reader::Server(read) = c.read {
            header(&mut s, c.metric, c.kind.name(), c.help);
            let _ = writeln!(s, "{} {}", c.metric, read(stats));
        }
    }
    per_shard(
        &mut s,
        reports,
        "directkv_keys",
        "gauge",
        "Keys stored, per shard.",
        |r| r.counts.keys.to_string(),
    );
    per_shard(
        &mut s,
        reports,
        "directkv_memory_utilization",
        "gauge",
        "Key and value bytes / arena bytes, per shard.",
        |r| r.memory_utilization.to_string(),
    );
    // Engine counters: those with one sample per shard first, then those per shard and kind.
    for c in COUNTERS {
        if let Reader::Engine {
            total,
            per_kind: None,
        } = c.read
        {
            per_shard(&mut s, reports, c.metric, c.kind.name(), c.help, |r| {
                total(r).to_string()
            });
        }
    }
    for c in COUNTERS {
        if let Reader::Engine {
            per_kind: Some(value),
            ..
        } = c.read
        {
            per_kind(&mut s, reports, c.metric, c.kind.name(), c.help, value);
        }
    }
    s
}

fn header(s: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// One sample per shard.
fn per_shard(
    s: &mut String,
    reports: &[Report],
    name: &str,
    kind: &str,
    help: &str,
    value: impl Fn(&Report) -> String,
) {
    header(s, name, kind, help);
    for (i, r) in reports.iter().enumerate() {
        let _ = writeln!(s, "{name}{{shard=\"{i}\"}} {}", value(r));
    }
}

/// One counter per shard and operation kind.
fn per_kind(
    s: &mut String,
    reports: &[Report],
    name: &str,
    kind: &str,
    help: &str,
    value: impl Fn(&KindCounters) -> u64,
) {
    header(s, name, kind, help);
    for (i, r) in reports.iter().enumerate() {
        for k in OpKind::ALL {
            let _ = writeln!(
                s,
                "{name}{{shard=\"{i}\",kind=\"{}\"}} {}",
                k.name(),
                value(r.stats.kind(k))
            );
        }
    }
}
