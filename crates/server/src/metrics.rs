//! Prometheus metrics over HTTP (default 127.0.0.1:7072, `GET /metrics`), served by a small
//! blocking thread that asks every shard for its engine report over the shard queues.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use directkv_engine::stats::KindCounters;
use directkv_engine::{OpKind, Report};
use tokio::sync::{mpsc, oneshot, watch};

use crate::shard::{Job, ServerStats};

/// Bytes of an HTTP request read before answering (the request line is all that matters).
const REQUEST_BYTES_MAX: usize = 8 << 10;

pub fn serve(
    listener: TcpListener,
    peers: Arc<Vec<mpsc::Sender<Job>>>,
    stats: Arc<ServerStats>,
    stop: watch::Receiver<bool>,
) {
    for conn in listener.incoming() {
        if *stop.borrow() {
            return;
        }
        if let Ok(c) = conn {
            let _ = answer(c, &peers, &stats);
        }
    }
}

fn answer(
    mut c: TcpStream,
    peers: &[mpsc::Sender<Job>],
    stats: &ServerStats,
) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = vec![0u8; REQUEST_BYTES_MAX];
    let n = c.read(&mut buf)?;
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
    peers
        .iter()
        .filter_map(|p| {
            let (tx, rx) = oneshot::channel();
            p.blocking_send(Job::Report { reply: tx }).ok()?;
            rx.blocking_recv().ok()
        })
        .collect()
}

/// The metrics text (Prometheus exposition format 0.0.4).
pub fn render(reports: &[Report], stats: &ServerStats) -> String {
    let mut s = String::new();
    // Server-wide values: one line each, read from the shared atomic counters.
    let o = &stats.ocsm;
    let globals: [(&str, &str, &str, u64); 12] = [
        (
            "directkv_connections",
            "gauge",
            "Open client connections.",
            stats.connections.load(Ordering::Relaxed) as u64,
        ),
        (
            "directkv_commands_total",
            "counter",
            "RESP commands processed.",
            stats.commands.load(Ordering::Relaxed),
        ),
        (
            "directkv_protocol_errors_total",
            "counter",
            "Connections closed for malformed input.",
            stats.protocol_errors.load(Ordering::Relaxed),
        ),
        (
            "directkv_forwarded_batches_total",
            "counter",
            "Batches sent to another shard's thread (cross-shard hops).",
            stats.forwarded_batches.load(Ordering::Relaxed),
        ),
        (
            "directkv_forwarded_ops_total",
            "counter",
            "Operations in batches sent to another shard's thread.",
            stats.forwarded_ops.load(Ordering::Relaxed),
        ),
        (
            "directkv_ocsm_datagrams_total",
            "counter",
            "OCSM datagrams received.",
            o.datagrams.load(Ordering::Relaxed),
        ),
        (
            "directkv_ocsm_messages_total",
            "counter",
            "OCSM messages executed.",
            o.messages.load(Ordering::Relaxed),
        ),
        (
            "directkv_ocsm_errors_total",
            "counter",
            "OCSM datagrams refused.",
            o.errors.load(Ordering::Relaxed),
        ),
        (
            "directkv_ocsm_bursts_total",
            "counter",
            "recvmmsg bursts (batched path).",
            o.bursts.load(Ordering::Relaxed),
        ),
        (
            "directkv_ocsm_segmented_sends_total",
            "counter",
            "Segmented (UDP GSO) sends of several replies to one sender (batched paths).",
            o.segmented_sends.load(Ordering::Relaxed),
        ),
        (
            "directkv_busy_polls_total",
            "counter",
            "Zero-timeout socket polls of the shards' busy pollers (counted when a poller parks).",
            stats.busy_polls.load(Ordering::Relaxed),
        ),
        (
            "directkv_busy_poll_sleeps_total",
            "counter",
            "Times a shard stopped busy polling after busy_poll_us without a request.",
            stats.busy_poll_sleeps.load(Ordering::Relaxed),
        ),
    ];
    for (name, kind, help, v) in globals {
        header(&mut s, name, kind, help);
        let _ = writeln!(s, "{name} {v}");
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
    per_shard(
        &mut s,
        reports,
        "directkv_engine_forwarded_total",
        "counter",
        "Operations served by data forwarding.",
        |r| r.stats.forwarded.to_string(),
    );
    per_kind(
        &mut s,
        reports,
        "directkv_engine_ops_total",
        "Engine operations by kind.",
        |c| c.ops,
    );
    per_kind(
        &mut s,
        reports,
        "directkv_engine_memory_accesses_total",
        "Buckets and records read or written, by kind.",
        |c| c.accesses(),
    );
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
    help: &str,
    value: impl Fn(&KindCounters) -> u64,
) {
    header(s, name, "counter", help);
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
