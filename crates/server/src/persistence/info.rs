//! INFO's `# Persistence` section: Redis's field names where they apply (`aof_enabled`,
//! `aof_last_write_status`, `loading`, ...), then directkv's own (`aof_fsync_policy`). The
//! log's counters (records, bytes, fsync latency) are rows in `stats::COUNTERS` and follow.

use std::fmt::Write;

use super::Store;

/// The fields that are not counters. `store` is `None` with `appendonly no`.
pub(crate) fn render(s: &mut String, store: Option<&Store>) {
    // Recovery finishes before the server accepts a connection: never loading when asked.
    s.push_str("loading:0\r\nasync_loading:0\r\n");
    let Some(store) = store else {
        s.push_str("aof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_last_write_status:ok\r\n");
        // Snapshots need the store: none is ever taken (LASTSAVE is the start time).
        s.push_str("rdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_bgsave_status:ok\r\nrdb_last_bgsave_time_sec:-1\r\nrdb_current_bgsave_time_sec:-1\r\nrdb_saves:0\r\n");
        return;
    };
    let status = if store.failure().is_some() {
        "err"
    } else {
        "ok"
    };
    let _ = write!(
        s,
        "aof_enabled:1\r\naof_rewrite_in_progress:0\r\naof_last_write_status:{status}\r\naof_fsync_policy:{}\r\naof_dir:{}\r\n",
        store.policy().name(),
        store.dir.display()
    );
    // Snapshots (`snapshot.rs`): Redis's `rdb_*` fields, the log's records standing for
    // its changed keys.
    let records = store
        .stats
        .persist
        .records
        .load(std::sync::atomic::Ordering::Relaxed);
    store.snapshots.render(s, records);
}
