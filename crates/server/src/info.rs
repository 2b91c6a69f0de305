//! INFO: server, clients, memory, engine, cross-shard forwarding, OCSM and busy-polling sections in Redis' `field:value` text format.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use crate::shard::{ask_all, Job, ShardCtx};

pub async fn info(ctx: &ShardCtx) -> String {
    let reports = ask_all(ctx, |reply| Job::Report { reply }).await;
    let st = &ctx.stats;
    let mut s = String::new();
    let keys: u64 = reports.iter().map(|r| r.counts.keys).sum();
    let kv_bytes: u64 = reports.iter().map(|r| r.counts.kv_bytes).sum();
    let arena: usize = reports.iter().map(|r| r.arena_bytes).sum();
    let forwarded: u64 = reports.iter().map(|r| r.stats.forwarded).sum();
    let ops: u64 = reports.iter().map(|r| r.stats.total().ops).sum();
    let accesses: u64 = reports.iter().map(|r| r.stats.total().accesses()).sum();
    let _ = write!(
        s,
        "# Server\r\nredis_version:7.0.0\r\ndirectkv_version:{}\r\nuptime_in_seconds:{}\r\ntcp_port:{}\r\nshards:{}\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        ctx.started.elapsed().as_secs(),
        ctx.cfg.port,
        ctx.shards()
    );
    let _ = write!(
        s,
        "# Clients\r\nconnected_clients:{}\r\ntotal_connections_received:{}\r\nrejected_connections:{}\r\n\r\n",
        st.connections.load(Ordering::Relaxed),
        st.connections_total.load(Ordering::Relaxed),
        st.rejected_connections.load(Ordering::Relaxed)
    );
    let _ = write!(
        s,
        "# Memory\r\narena_bytes:{arena}\r\nkv_bytes:{kv_bytes}\r\nmemory_utilization:{:.4}\r\n\r\n",
        kv_bytes as f64 / arena.max(1) as f64
    );
    let _ = write!(
        s,
        "# Stats\r\ntotal_commands_processed:{}\r\nengine_ops:{ops}\r\nengine_forwarded_ops:{forwarded}\r\nengine_memory_accesses:{accesses}\r\nprotocol_errors:{}\r\n\r\n# Keyspace\r\ndb0:keys={keys},expires=0,avg_ttl=0\r\n",
        st.commands.load(Ordering::Relaxed),
        st.protocol_errors.load(Ordering::Relaxed)
    );
    let o = &st.ocsm;
    let _ = write!(
        s,
        "\r\n# Forwarding\r\nforwarded_batches:{}\r\nforwarded_ops:{}\r\n\r\n# OCSM\r\nocsm_datagrams:{}\r\nocsm_messages:{}\r\nocsm_errors:{}\r\nocsm_bursts:{}\r\nocsm_segmented_sends:{}\r\n\r\n# Busy polling\r\nbusy_poll_us:{}\r\nbusy_polls:{}\r\nbusy_poll_sleeps:{}\r\n",
        st.forwarded_batches.load(Ordering::Relaxed),
        st.forwarded_ops.load(Ordering::Relaxed),
        o.datagrams.load(Ordering::Relaxed),
        o.messages.load(Ordering::Relaxed),
        o.errors.load(Ordering::Relaxed),
        o.bursts.load(Ordering::Relaxed),
        o.segmented_sends.load(Ordering::Relaxed),
        ctx.cfg.busy_poll_us,
        st.busy_polls.load(Ordering::Relaxed),
        st.busy_poll_sleeps.load(Ordering::Relaxed)
    );
    s
}
