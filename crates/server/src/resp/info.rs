//! INFO: server, clients, memory, stats, keyspace, cross-shard forwarding, OCSM and
//! busy-polling sections in Redis' `field:value` text format. Every counter comes from
//! `stats::COUNTERS` (the table /metrics renders too); this file adds only what is not a
//! counter: versions, uptime, memory, the keyspace line and the busy-polling window.

use std::fmt::Write;

use directkv_engine::Report;

use crate::shard::{ask_all, Job, ShardCtx};
use crate::stats::{self, ServerStats};

pub(crate) async fn info(ctx: &ShardCtx) -> String {
    let reports = ask_all(ctx, |reply| Job::Report { reply }).await;
    let stats = &ctx.stats;
    let mut s = String::new();
    let keys: u64 = reports.iter().map(|r| r.counts.keys).sum();
    let kv_bytes: u64 = reports.iter().map(|r| r.counts.kv_bytes).sum();
    let arena: usize = reports.iter().map(|r| r.arena_bytes).sum();
    let _ = write!(
        s,
        "# Server\r\nredis_version:7.0.0\r\ndirectkv_version:{}\r\nuptime_in_seconds:{}\r\ntcp_port:{}\r\nshards:{}\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        ctx.started.elapsed().as_secs(),
        ctx.cfg.port,
        ctx.shards()
    );
    s.push_str("# Clients\r\n");
    counters(&mut s, "Clients", stats, &reports);
    let _ = write!(
        s,
        "\r\n# Memory\r\narena_bytes:{arena}\r\nkv_bytes:{kv_bytes}\r\nmemory_utilization:{:.4}\r\n\r\n",
        kv_bytes as f64 / arena.max(1) as f64
    );
    s.push_str("# Stats\r\n");
    counters(&mut s, "Stats", stats, &reports);
    let _ = write!(
        s,
        "\r\n# Keyspace\r\ndb0:keys={keys},expires=0,avg_ttl=0\r\n"
    );
    s.push_str("\r\n# Forwarding\r\n");
    counters(&mut s, "Forwarding", stats, &reports);
    s.push_str("\r\n# OCSM\r\n");
    counters(&mut s, "OCSM", stats, &reports);
    let _ = write!(
        s,
        "\r\n# Busy polling\r\nbusy_poll_us:{}\r\n",
        ctx.cfg.busy_poll_us
    );
    counters(&mut s, "Busy polling", stats, &reports);
    s
}

/// Appends the `field:value` lines of a section's counters.
fn counters(s: &mut String, section: &'static str, stats: &ServerStats, reports: &[Report]) {
    for c in stats::section(section) {
        let _ = write!(s, "{}:{}\r\n", c.info, c.info_value(stats, reports));
    }
}
