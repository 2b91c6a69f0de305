//! CONFIG GET / SET / RESETSTAT / HELP, with Redis 7's reply shapes and error texts.
//!
//! CONFIG GET answers every setting of `ServerConfig` under its file key with dashes
//! (`value_len_max` is `value-len-max`), the live value where CONFIG SET may change it
//! (`live.rs`), and the Redis names tools ask for where directkv has the setting under its own
//! name (`maxmemory` is `memory`, `maxclients` is `connections-max`) or a fixed answer (`save`
//! "", `appendonly` no, `databases` 1). Patterns are Redis's globs (`*`, `?`, `[a-z]`, `\`),
//! several per call, matched without regard to case; a name matches once.
//!
//! CONFIG SET takes one or more `name value` pairs, all or nothing, and changes only the
//! settings in `SETTABLE`; every other known name answers Redis's "can't set immutable config".
//! Each change takes effect at once: `timeout` at every connection's next read,
//! `maxclients` at the next accept, `maxmemory-clients` at the next buffer report,
//! `requirepass` at the next login (connections already in stay in),
//! `reply-write-timeout-secs` for connections opened afterwards, and `maxmemory-policy` at
//! every shard's next batch, `appendfsync` at the next reply (and the log sync thread within a
//! second), `group-commit-delay-us` at the log sync thread's next round,
//! `auto-snapshot-log-bytes` (Redis's `auto-aof-rewrite-min-size`) and
//! `auto-snapshot-cpu-percent` at each shard's next check (within 100 ms; a budget's wait
//! already running keeps its end).
//!
//! Non-goals: CONFIG REWRITE (the file is the operator's); settings the engines or listeners
//! were built with.

use std::sync::atomic::Ordering;

use directkv_proto::resp::{self, RespWriter};

use super::{arity, error, Planned, Session};
use crate::config::ServerConfig;
use crate::resp::reply::Pending;
use crate::stats::ServerStats;

/// The settings CONFIG SET changes, by their CONFIG names.
const SETTABLE: &[&str] = &[
    "timeout",
    "maxclients",
    "connections-max",
    "maxmemory-clients",
    "requirepass",
    "reply-write-timeout-secs",
    "maxmemory-policy",
    "appendfsync",
    "group-commit-delay-us",
    "auto-snapshot-log-bytes",
    "auto-aof-rewrite-min-size",
    "auto-snapshot-cpu-percent",
];

/// Redis names for directkv settings: (Redis name, directkv key).
const REDIS_ALIASES: &[(&str, &str)] = &[
    ("maxmemory", "memory"),
    ("maxclients", "connections_max"),
    ("proto-max-bulk-len", "value_len_max"),
    ("client-query-buffer-limit", "conn_input_bytes_max"),
    ("auto-aof-rewrite-min-size", "auto_snapshot_log_bytes"),
];

/// Redis settings directkv answers with a fixed value (unless a setting of that name exists).
const REDIS_FIXED: &[(&str, &str)] = &[
    ("save", ""),
    ("appendonly", "no"),
    ("databases", "1"),
    ("cluster-enabled", "no"),
];

/// The longest CONFIG GET pattern matched (a longer one matches nothing; Redis's names are
/// shorter than 40 bytes). The matcher is linear-time anyway (`glob_match`).
const PATTERN_BYTES_MAX: usize = 256;

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "HELP",
    "    Prints this help.",
];

/// A TOML value as CONFIG GET shows it.
fn shown(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Boolean(b) => if *b { "yes" } else { "no" }.to_string(),
        other => other.to_string(),
    }
}

/// Every setting: (CONFIG name, value), live values where CONFIG SET changes them.
fn settings(cfg: &ServerConfig, stats: &ServerStats) -> Vec<(String, String)> {
    let live = &stats.live;
    let table = toml::Table::try_from(cfg).unwrap_or_default();
    let mut all: Vec<(String, String)> = Vec::with_capacity(table.len() + 16);
    for key in ServerConfig::keys() {
        let value = match *key {
            "timeout" => live.timeout_secs().to_string(),
            "connections_max" => live.connections_max().to_string(),
            "maxmemory_clients" => live.maxmemory_clients().to_string(),
            "reply_write_timeout_secs" => live.reply_write_timeout_secs().to_string(),
            "requirepass" => live.requirepass().as_deref().unwrap_or("").to_string(),
            "maxmemory_policy" => live.maxmemory_policy().name().to_string(),
            "appendfsync" => live.appendfsync().name().to_string(),
            "group_commit_delay_us" => live.group_commit_delay_us().to_string(),
            "auto_snapshot_log_bytes" => live.auto_snapshot_log_bytes().to_string(),
            "auto_snapshot_cpu_percent" => live.auto_snapshot_cpu_percent().to_string(),
            k => table.get(k).map(shown).unwrap_or_default(),
        };
        all.push((key.replace('_', "-"), value));
    }
    for (redis, key) in REDIS_ALIASES {
        let dashed = key.replace('_', "-");
        if let Some(v) = all
            .iter()
            .find(|(n, _)| *n == dashed)
            .map(|(_, v)| v.clone())
        {
            all.push((redis.to_string(), v));
        }
    }
    for (name, v) in REDIS_FIXED {
        if !all.iter().any(|(n, _)| n == name) {
            all.push((name.to_string(), v.to_string()));
        }
    }
    all
}

/// CONFIG subcommand ...
pub(crate) fn config(p: &mut Pending, s: &mut Session, a: &[&[u8]]) -> Planned {
    let v = s.version;
    let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    s.admin.sub = super::Name::lower(a[1]);
    match sub.as_str() {
        "get" if a.len() < 3 => arity(p, v, b"config|get"),
        "set" if a.len() < 4 || !a.len().is_multiple_of(2) => arity(p, v, b"config|set"),
        "resetstat" | "help" if a.len() != 2 => arity(p, v, format!("config|{sub}").as_bytes()),
        "get" => get(p, s, &a[2..]),
        "set" => set(p, s, &a[2..]),
        "resetstat" => {
            reset_stats(&s.admin.stats);
            p.immediate(|o| RespWriter::new(o, v).simple("OK"));
            Planned::Queued
        }
        "help" => {
            super::help_lines(p, v, CONFIG_HELP);
            Planned::Queued
        }
        _ => {
            let msg = resp::err_unknown_subcommand("CONFIG", a[1]);
            error(p, v, &msg)
        }
    }
}

fn is_glob(p: &[u8]) -> bool {
    p.iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// CONFIG GET pattern [pattern ...]
fn get(p: &mut Pending, s: &Session, patterns: &[&[u8]]) -> Planned {
    let v = s.version;
    let all = settings(&s.admin.cfg, &s.admin.stats);
    let mut hits: Vec<(Vec<u8>, &str)> = Vec::new();
    let mut taken = vec![false; all.len()];
    for &pat in patterns {
        for (i, (name, value)) in all.iter().enumerate() {
            if taken[i] {
                continue;
            }
            let exact = !is_glob(pat) && pat.eq_ignore_ascii_case(name.as_bytes());
            if exact || (is_glob(pat) && glob_match(pat, name.as_bytes())) {
                taken[i] = true;
                // An exact name is answered as it was asked (Redis 7 echoes its case).
                let shown = if exact {
                    pat.to_vec()
                } else {
                    name.as_bytes().to_vec()
                };
                hits.push((shown, value));
            }
        }
    }
    p.immediate(|o| {
        RespWriter::new(o, v).map_len(hits.len());
        for (name, value) in hits {
            RespWriter::new(o, v).bulk(&name);
            RespWriter::new(o, v).bulk(value.as_bytes());
        }
    });
    Planned::Queued
}

/// A parsed CONFIG SET change.
enum Change {
    Timeout(u64),
    Clients(usize),
    ClientMemory(usize),
    Password(Option<String>),
    WriteTimeout(u64),
    Policy(directkv_engine::EvictionPolicy),
    AppendFsync(crate::config::AppendFsync),
    GroupCommitDelay(u64),
    AutoSnapshotLogBytes(u64),
    AutoSnapshotCpuPercent(u32),
}

fn failed(name: &str, why: &str) -> String {
    format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
}

/// An integer in `min..=max` as Redis's numeric configs take it.
fn int_in(name: &str, value: &[u8], min: i64, max: i64) -> Result<i64, String> {
    let n = super::parse_int(value)
        .ok_or_else(|| failed(name, "argument couldn't be parsed into an integer"))?;
    if n < min || n > max {
        return Err(failed(
            name,
            &format!("argument must be between {min} and {max} inclusive"),
        ));
    }
    Ok(n)
}

/// A memory value as Redis's configs take it (bytes, or with K, M, G: `64mb`); `note` ends
/// the error's text.
fn memory_value(name: &str, value: &[u8], note: &str) -> Result<usize, String> {
    let text = std::str::from_utf8(value).unwrap_or("?");
    crate::config::parse_size(text).map_err(|_| {
        failed(
            name,
            &format!("argument must be a memory value (bytes, or with K, M, G: 64mb{note})"),
        )
    })
}

/// Parses one pair; checks what the server's safety rules need (config.rs's `validate`).
fn parse_change(s: &Session, name: &str, value: &[u8]) -> Result<Change, String> {
    let cfg = &s.admin.cfg;
    Ok(match name {
        "timeout" => Change::Timeout(int_in(name, value, 0, i32::MAX as i64)? as u64),
        "maxclients" | "connections-max" => {
            Change::Clients(int_in(name, value, 1, u32::MAX as i64)? as usize)
        }
        "reply-write-timeout-secs" => {
            Change::WriteTimeout(int_in(name, value, 1, i32::MAX as i64)? as u64)
        }
        "maxmemory-clients" => Change::ClientMemory(memory_value(name, value, "")?),
        "requirepass" => {
            let text = std::str::from_utf8(value)
                .map_err(|_| failed(name, "the password must be UTF-8"))?;
            if text.is_empty() && !cfg.bind_is_loopback() {
                return Err(failed(
                    name,
                    "refusing to remove the password: the server listens on a non-loopback address",
                ));
            }
            if !text.is_empty()
                && !cfg.udp_insecure
                && (cfg.udp_enabled() || cfg.ocsm_port_effective().is_some())
            {
                return Err(failed(
                    name,
                    "native UDP or OCSM is served and its datagrams carry no password: set requirepass in the configuration file (which turns them off) or start with udp_insecure",
                ));
            }
            Change::Password((!text.is_empty()).then(|| text.to_string()))
        }
        "maxmemory-policy" => Change::Policy(policy(name, value)?),
        "appendfsync" => Change::AppendFsync(
            crate::config::AppendFsync::from_name(&String::from_utf8_lossy(value)).ok_or_else(
                || {
                    failed(
                        name,
                        "argument(s) must be one of the following: always, everysec, no",
                    )
                },
            )?,
        ),
        "group-commit-delay-us" => Change::GroupCommitDelay(int_in(
            name,
            value,
            0,
            crate::config::GROUP_COMMIT_DELAY_US_MAX as i64,
        )? as u64),
        "auto-snapshot-log-bytes" | "auto-aof-rewrite-min-size" => {
            Change::AutoSnapshotLogBytes(memory_value(name, value, "; 0 = off")? as u64)
        }
        "auto-snapshot-cpu-percent" => {
            Change::AutoSnapshotCpuPercent(int_in(name, value, 0, 100)? as u32)
        }
        _ => return Err(failed(name, "can't set immutable config")),
    })
}

/// Redis's enum names of `maxmemory-policy`, in its order (its error lists them).
const REDIS_POLICIES: &str = "volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction";

/// A `maxmemory-policy` value: Redis's names in any case; the LFU ones, which Redis has and
/// directkv has not, are refused with their own reason.
fn policy(name: &str, value: &[u8]) -> Result<directkv_engine::EvictionPolicy, String> {
    let text = String::from_utf8_lossy(value);
    if let Some(p) = directkv_engine::EvictionPolicy::from_name(&text) {
        return Ok(p);
    }
    if text.eq_ignore_ascii_case("allkeys-lfu") || text.eq_ignore_ascii_case("volatile-lfu") {
        return Err(failed(
            name,
            "directkv has no LFU eviction: use allkeys-lru or volatile-lru",
        ));
    }
    Err(failed(
        name,
        &format!("argument(s) must be one of the following: {REDIS_POLICIES}"),
    ))
}

/// CONFIG SET name value [name value ...]: all or nothing.
fn set(p: &mut Pending, s: &Session, pairs: &[&[u8]]) -> Planned {
    let v = s.version;
    let known = settings(&s.admin.cfg, &s.admin.stats);
    let mut changes = Vec::with_capacity(pairs.len() / 2);
    let mut seen: Vec<String> = Vec::new();
    for pair in pairs.chunks(2) {
        let name = String::from_utf8_lossy(pair[0]).to_ascii_lowercase();
        if !known.iter().any(|(n, _)| *n == name) {
            let msg = format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                String::from_utf8_lossy(pair[0])
            );
            return error(p, v, &msg);
        }
        if !SETTABLE.contains(&name.as_str()) {
            return error(p, v, &failed(&name, "can't set immutable config"));
        }
        // maxclients and connections-max are one setting.
        let canonical = match name.as_str() {
            "connections-max" => "maxclients".to_string(),
            "auto-aof-rewrite-min-size" => "auto-snapshot-log-bytes".to_string(),
            _ => name.clone(),
        };
        if seen.contains(&canonical) {
            return error(p, v, &failed(&name, "duplicate parameter"));
        }
        seen.push(canonical);
        match parse_change(s, &name, pair[1]) {
            Ok(c) => changes.push(c),
            Err(e) => return error(p, v, &e),
        }
    }
    let live = &s.admin.stats.live;
    for c in changes {
        match c {
            Change::Timeout(t) => {
                live.set_timeout_secs(t);
                if t > 0 {
                    crate::clients::Clients::start_idle_sweeper(&s.admin.stats);
                }
            }
            Change::Clients(n) => live.set_connections_max(n),
            Change::ClientMemory(b) => live.set_maxmemory_clients(b),
            Change::Password(pw) => live.set_requirepass(pw.as_deref()),
            Change::WriteTimeout(t) => live.set_reply_write_timeout_secs(t),
            Change::Policy(policy) => live.set_maxmemory_policy(policy),
            Change::AppendFsync(p) => live.set_appendfsync(p),
            Change::GroupCommitDelay(us) => live.set_group_commit_delay_us(us),
            Change::AutoSnapshotLogBytes(b) => live.set_auto_snapshot_log_bytes(b),
            Change::AutoSnapshotCpuPercent(pc) => live.set_auto_snapshot_cpu_percent(pc),
        }
    }
    tracing::info!(client = s.admin.me.id, "CONFIG SET {}", show_names(pairs));
    p.immediate(|o| RespWriter::new(o, v).simple("OK"));
    Planned::Queued
}

/// The names of a CONFIG SET (never the values: one may be a password).
fn show_names(pairs: &[&[u8]]) -> String {
    pairs
        .chunks(2)
        .map(|p| String::from_utf8_lossy(p[0]).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// CONFIG RESETSTAT: the counters Redis resets (`total_commands_processed`,
/// `total_connections_received`, `rejected_connections`, `keyspace_hits`, `keyspace_misses`,
/// `evicted_clients`). Engine counters (per shard) are not reset.
fn reset_stats(stats: &ServerStats) {
    for counter in [
        &stats.commands,
        &stats.connections_total,
        &stats.rejected_connections,
        &stats.keyspace_hits,
        &stats.keyspace_misses,
    ] {
        counter.store(0, Ordering::Relaxed);
    }
    stats.clients.reset_stats();
    if let Ok(mut sample) = stats.ops_sample.lock() {
        *sample = Default::default();
    }
}

/// A CONFIG GET (or COMMAND LIST FILTERBY PATTERN) pattern against a name: Redis's glob
/// without regard to case (`glob.rs`, the one matcher), for patterns up to `PATTERN_BYTES_MAX`.
pub(crate) fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    pattern.len() <= PATTERN_BYTES_MAX && super::glob::glob_match(pattern, name, true)
}
