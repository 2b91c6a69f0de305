//! Prometheus metrics over HTTP (default 127.0.0.1:7072, `GET /metrics`), served by a small
//! blocking thread that asks every shard for its engine report over the shard queues.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

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
    let g = |s: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    g(
        &mut s,
        "directkv_connections",
        "gauge",
        "Open client connections.",
    );
    let _ = writeln!(
        s,
        "directkv_connections {}",
        stats.connections.load(Ordering::Relaxed)
    );
    g(
        &mut s,
        "directkv_commands_total",
        "counter",
        "RESP commands processed.",
    );
    let _ = writeln!(
        s,
        "directkv_commands_total {}",
        stats.commands.load(Ordering::Relaxed)
    );
    g(
        &mut s,
        "directkv_protocol_errors_total",
        "counter",
        "Connections closed for malformed input.",
    );
    let _ = writeln!(
        s,
        "directkv_protocol_errors_total {}",
        stats.protocol_errors.load(Ordering::Relaxed)
    );
    g(&mut s, "directkv_keys", "gauge", "Keys stored, per shard.");
    for (i, r) in reports.iter().enumerate() {
        let _ = writeln!(s, "directkv_keys{{shard=\"{i}\"}} {}", r.counts.keys);
    }
    g(
        &mut s,
        "directkv_memory_utilization",
        "gauge",
        "Key and value bytes / arena bytes, per shard.",
    );
    for (i, r) in reports.iter().enumerate() {
        let _ = writeln!(
            s,
            "directkv_memory_utilization{{shard=\"{i}\"}} {}",
            r.memory_utilization
        );
    }
    g(
        &mut s,
        "directkv_engine_ops_total",
        "counter",
        "Engine operations by kind.",
    );
    for (i, r) in reports.iter().enumerate() {
        for k in OpKind::ALL {
            let _ = writeln!(
                s,
                "directkv_engine_ops_total{{shard=\"{i}\",kind=\"{}\"}} {}",
                k.name(),
                r.stats.kind(k).ops
            );
        }
    }
    g(
        &mut s,
        "directkv_engine_memory_accesses_total",
        "counter",
        "Buckets and records read or written, by kind.",
    );
    for (i, r) in reports.iter().enumerate() {
        for k in OpKind::ALL {
            let _ = writeln!(
                s,
                "directkv_engine_memory_accesses_total{{shard=\"{i}\",kind=\"{}\"}} {}",
                k.name(),
                r.stats.kind(k).accesses()
            );
        }
    }
    g(
        &mut s,
        "directkv_engine_forwarded_total",
        "counter",
        "Operations served by data forwarding.",
    );
    for (i, r) in reports.iter().enumerate() {
        let _ = writeln!(
            s,
            "directkv_engine_forwarded_total{{shard=\"{i}\"}} {}",
            r.stats.forwarded
        );
    }
    s
}
