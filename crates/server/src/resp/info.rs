//! INFO: server, clients, memory, stats, replication, keyspace, cross-shard forwarding, OCSM
//! and busy-polling sections in Redis' `field:value` text format. Every counter comes from
//! `stats::COUNTERS` (the table /metrics renders too); this file adds only what is not a
//! counter: versions, uptime, memory, the replication role, the keyspace line, the sampled
//! operation rate and the busy-polling window.
//!
//! Section arguments follow Redis 7: none, `default`, `all` and `everything` give every
//! section (directkv has no section Redis keeps out of the default one); otherwise each
//! argument names a section, case-insensitively (`busy_polling` for `# Busy polling`), and
//! the reply holds the named ones in their usual order. Unknown names add nothing, so
//! `INFO nosuch` is an empty bulk string, as in Redis.
//!
//! The fields Redis tools read (`redis-cli --stat`, exporters) are present with honest values:
//! a field that would have to be invented is left out rather than shown as 0. `keyspace_hits`
//! and `keyspace_misses` are counted where RESP replies are rendered from read results.
//!
//! In RESP3 the reply is a verbatim string of format `txt` (`=len\r\ntxt:...`), as Redis 7
//! sends it; in RESP2 a bulk string.

use std::fmt::Write;
use std::time::{Duration, Instant};

use directkv_engine::Report;

use crate::shard::{ask_all, Job, ShardCtx};
use crate::stats::{self, ServerStats};

/// The sections in INFO order: header as printed.
const SECTIONS: &[&str] = &[
    "Server",
    "Clients",
    "Memory",
    "Stats",
    "Replication",
    "Keyspace",
    "Forwarding",
    "OCSM",
    "Busy polling",
    "Persistence",
];

/// Shortest interval over which `instantaneous_ops_per_sec` is sampled: INFO calls closer
/// together than this repeat the previous rate (Redis samples every 100 ms too).
const OPS_SAMPLE_INTERVAL_MIN: Duration = Duration::from_millis(100);

/// Which sections `args` (INFO's arguments) ask for, as flags in `SECTIONS` order.
fn wanted(args: &[&[u8]]) -> [bool; SECTIONS.len()] {
    let mut w = [false; SECTIONS.len()];
    if args.is_empty() {
        return [true; SECTIONS.len()];
    }
    for a in args {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        if matches!(a.as_str(), "default" | "all" | "everything") {
            return [true; SECTIONS.len()];
        }
        for (i, name) in SECTIONS.iter().enumerate() {
            if name.to_ascii_lowercase().replace(' ', "_") == a {
                w[i] = true;
            }
        }
    }
    w
}

pub(crate) async fn info(ctx: &ShardCtx, args: &[&[u8]]) -> String {
    if !wanted(args).contains(&true) {
        return String::new();
    }
    let reports = ask_all(ctx, |reply| Job::Report { reply }).await;
    render(ctx, args, &reports)
}

/// INFO's text for `args` from every shard's engine report: [`info`] asks the shards for
/// them, a transaction (`resp/multi.rs`) asks its parked shards.
pub(crate) fn render(ctx: &ShardCtx, args: &[&[u8]], reports: &[Report]) -> String {
    let want = wanted(args);
    let mut s = String::new();
    if !want.contains(&true) {
        return s;
    }
    let stats = &ctx.stats;
    for (i, name) in SECTIONS.iter().enumerate() {
        if !want[i] {
            continue;
        }
        if !s.is_empty() {
            s.push_str("\r\n");
        }
        let _ = write!(s, "# {name}\r\n");
        section(&mut s, name, ctx, stats, reports);
    }
    s
}

/// Appends the fields of section `name`.
fn section(
    s: &mut String,
    name: &'static str,
    ctx: &ShardCtx,
    stats: &ServerStats,
    reports: &[Report],
) {
    match name {
        "Server" => {
            let _ = write!(
                s,
                "redis_version:7.0.0\r\ndirectkv_version:{}\r\nredis_mode:standalone\r\nprocess_id:{}\r\nuptime_in_seconds:{}\r\ntcp_port:{}\r\nshards:{}\r\n",
                env!("CARGO_PKG_VERSION"),
                std::process::id(),
                ctx.started.elapsed().as_secs(),
                ctx.cfg.port,
                ctx.shards()
            );
        }
        "Clients" => {
            counters(s, name, stats, reports);
            // No command blocks a client (there are no BLPOP-like commands).
            s.push_str("blocked_clients:0\r\n");
        }
        "Memory" => memory(s, reports, stats.live.maxmemory_policy()),
        "Stats" => {
            counters(s, name, stats, reports);
            let _ = write!(
                s,
                "instantaneous_ops_per_sec:{}\r\n",
                ops_per_sec(stats, ctx.started)
            );
        }
        // No replication: every server is a master without replicas.
        "Replication" => s.push_str("role:master\r\nconnected_slaves:0\r\n"),
        "Keyspace" => {
            let keys: u64 = reports.iter().map(|r| r.counts.keys).sum();
            let expires: u64 = reports.iter().map(|r| r.counts.expiring_keys).sum();
            let _ = write!(s, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
        }
        "Persistence" => {
            crate::persistence::info::render(s, ctx.store.as_deref());
            counters(s, name, stats, reports);
        }
        "Busy polling" => {
            let _ = write!(s, "busy_poll_us:{}\r\n", ctx.cfg.busy_poll_us);
            counters(s, name, stats, reports);
        }
        _ => counters(s, name, stats, reports),
    }
}

/// The memory section. `used_memory` is the bytes of the shards' arenas in use: each arena
/// (its hash index and its slab region) less the slab's free blocks; `maxmemory` is the
/// arenas' size, which the server never exceeds for keys and values. `used_memory_rss` is the
/// resident set of the whole process (from /proc; 0 where there is none), so it also holds
/// the connections' buffers and the code, and `mem_fragmentation_ratio` is RSS / used_memory
/// as in Redis.
fn memory(s: &mut String, reports: &[Report], policy: directkv_engine::EvictionPolicy) {
    let kv_bytes: u64 = reports.iter().map(|r| r.counts.kv_bytes).sum();
    let arena: u64 = reports.iter().map(|r| r.arena_bytes as u64).sum();
    let free: u64 = reports.iter().map(|r| r.slab_free_bytes).sum();
    let used = arena.saturating_sub(free).max(1);
    let rss = rss_bytes();
    let _ = write!(
        s,
        "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nmaxmemory:{arena}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nmem_fragmentation_ratio:{:.2}\r\narena_bytes:{arena}\r\nkv_bytes:{kv_bytes}\r\nmemory_utilization:{:.4}\r\n",
        human(used),
        human(rss),
        human(arena),
        policy.name(),
        rss as f64 / used as f64,
        kv_bytes as f64 / arena.max(1) as f64
    );
}

/// Resident set size of the process in bytes (`VmRSS` of /proc/self/status), 0 if unknown.
fn rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Bytes as Redis' `*_human` fields print them (`1.50M`).
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes}B")
    } else {
        format!("{v:.2}{}", UNITS[u])
    }
}

/// RESP commands per second since the previous sample (the previous INFO at least
/// `OPS_SAMPLE_INTERVAL_MIN` ago); the first INFO gives the mean since the server started.
fn ops_per_sec(stats: &ServerStats, started: Instant) -> u64 {
    let now = Instant::now();
    let commands = stats.commands.load(std::sync::atomic::Ordering::Relaxed);
    let mut sample = stats
        .ops_sample
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (at, before) = match sample.at {
        Some(at) => (at, sample.commands),
        None => (started, 0),
    };
    let elapsed = now.duration_since(at);
    if sample.at.is_none() || elapsed >= OPS_SAMPLE_INTERVAL_MIN {
        sample.rate =
            (commands.saturating_sub(before) as f64 / elapsed.as_secs_f64().max(1e-3)) as u64;
        sample.at = Some(now);
        sample.commands = commands;
    }
    sample.rate
}

/// Appends the `field:value` lines of a section's counters.
fn counters(s: &mut String, section: &'static str, stats: &ServerStats, reports: &[Report]) {
    for c in stats::section(section) {
        let _ = write!(s, "{}:{}\r\n", c.info, c.info_value(stats, reports));
    }
}
