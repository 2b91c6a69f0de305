//! `directkv serve`: the server's flags, laid over the configuration file (if any) and the
//! defaults, then the server run until Ctrl-C or SIGTERM.

use std::io::Write;

use clap::Args;

use crate::flags::parse_bytes;

#[derive(Args)]
pub struct ServeFlags {
    /// A TOML file with any server setting, keyed by the flags' names (`metrics_port = 7072`,
    /// `memory = "1G"`; docs/directkv.example.toml lists them all). Flags override it.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Address to bind; anything but loopback requires --requirepass.
    #[arg(long)]
    bind: Option<String>,
    #[arg(long)]
    port: Option<u16>,
    /// Port of the Prometheus metrics endpoint (0 = any free port).
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Shard threads (default: one per core but one, at least one).
    #[arg(long)]
    shards: Option<usize>,
    /// Total arena memory, split over the shards, e.g. 1G.
    #[arg(long, value_parser = parse_bytes)]
    memory: Option<usize>,
    /// Expected key + value bytes, for the engine's choice of hash index ratio and inline
    /// threshold (default 32).
    #[arg(long)]
    kv_size: Option<usize>,
    /// Memory utilization the engine is tuned for (default 0.5, as the seeds measure).
    #[arg(long)]
    utilization: Option<f64>,
    /// Password for RESP AUTH/HELLO and native HELLO (an empty one is refused). While it is
    /// set, native UDP and OCSM are off unless asked for (see --udp-insecure).
    #[arg(long)]
    requirepass: Option<String>,
    /// Native protocol over UDP on the TCP port: yes | no (default: yes on a loopback address
    /// without --requirepass, else no). Its datagrams carry no password: with --requirepass,
    /// `--udp yes` is refused unless --udp-insecure is given too.
    #[arg(long, value_parser = parse_yes_no)]
    udp: Option<bool>,
    /// OCSM over UDP: yes | no (default as --udp; `--ocsm yes` with --requirepass needs
    /// --udp-insecure).
    #[arg(long, value_parser = parse_yes_no, conflicts_with = "no_ocsm")]
    ocsm: Option<bool>,
    /// Acknowledge that --udp yes / --ocsm yes serve unauthenticated datagrams although
    /// --requirepass is set: anyone who reaches those ports can read and write every key.
    #[arg(long)]
    udp_insecure: bool,
    /// OCSM UDP port (0 = any free port).
    #[arg(long)]
    ocsm_port: Option<u16>,
    /// Do not serve OCSM (as --ocsm no).
    #[arg(long, conflicts_with = "ocsm_port")]
    no_ocsm: bool,
    /// OCSM server path: plain (recv_from/send_to) | batched (recvmmsg/sendmmsg bursts on
    /// their own thread) | batched-shard (the same bursts inside shard 0's thread).
    #[arg(long, value_parser = parse_ocsm_path)]
    ocsm_path: Option<directkv_server::ocsm::OcsmPath>,
    /// Microseconds a shard keeps polling its sockets without sleeping after a request, at
    /// most: it stops earlier while another thread wants its core (0 = block in epoll at once;
    /// default 100).
    #[arg(long)]
    busy_poll_us: Option<u64>,
    /// Close a client that sends nothing for this many seconds (0 = never, the default).
    #[arg(long)]
    timeout: Option<u64>,
    /// Serve Prometheus metrics on --metrics-port: yes | no (default yes).
    #[arg(long, value_parser = parse_yes_no)]
    metrics: Option<bool>,
    /// Client connections served at once; more are refused with
    /// "-ERR max number of clients reached" (default 10000).
    #[arg(long)]
    connections_max: Option<usize>,
    /// Memory all client buffers (input, replies, results) may hold together, e.g. 256M
    /// (default 256M; 0 = no limit); past it the clients holding the most are disconnected.
    #[arg(long, value_parser = parse_bytes)]
    maxmemory_clients: Option<usize>,
    /// Reply data one request may produce per shard, e.g. 64M (default 64M, at least the
    /// largest value); operations past it get an error and writes among them are not applied.
    #[arg(long, value_parser = parse_bytes)]
    results_bytes_max: Option<usize>,
    /// Main buckets of the index one step of a shard's expiry sweep visits between batches
    /// (default 256).
    #[arg(long)]
    expire_sweep_buckets: Option<usize>,
    /// Milliseconds between full passes of a shard's expiry sweep (default 100).
    #[arg(long)]
    expire_sweep_interval_ms: Option<u64>,
    /// Fault each shard's hash index in at start-up on a background thread: yes | no
    /// (default yes). The first requests then skip first-touch page faults, and the index is
    /// resident from the start.
    #[arg(long, value_parser = parse_yes_no)]
    prefault_index: Option<bool>,
    /// What goes when a shard's arena runs short, by Redis's names: noeviction (default:
    /// writes answer out-of-memory), allkeys-lru, allkeys-random, volatile-lru, volatile-ttl,
    /// volatile-random. CONFIG SET maxmemory-policy changes it live.
    #[arg(long)]
    maxmemory_policy: Option<String>,
    /// Share of the arena eviction keeps free (default 0.01, at most 0.5).
    #[arg(long)]
    eviction_watermark: Option<f64>,
    /// memcached's text and meta protocols on this TCP port, same bind address (default
    /// 11211; 0 = off).
    #[arg(long)]
    memcache_port: Option<u16>,
    /// Main buckets of a shard's index one step of SCAN, KEYS or RANDOMKEY visits before the
    /// shard serves its other requests (default 65536, at most 16777216).
    #[arg(long)]
    scan_step_buckets: Option<usize>,
    /// Directory of the persistence files: each shard's log and snapshot, MANIFEST, LOCK
    /// (default ./directkv-data; docs/persistence.md).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// Log every write and recover the store from --dir at start: yes (default) or no.
    #[arg(long, value_parser = parse_yes_no)]
    appendonly: Option<bool>,
    /// When a write's reply may leave: always (its log record is durable), everysec (default:
    /// written, fdatasync every second) or no (written). CONFIG SET appendfsync changes it.
    #[arg(long)]
    appendfsync: Option<String>,
    /// A shard snapshots itself when its log passes this many bytes and its last snapshot's
    /// size (default 64 MiB; 0 = off; docs/persistence.md "Snapshots").
    #[arg(long)]
    auto_snapshot_log_bytes: Option<usize>,
    /// The most of a shard's time automatic snapshots take, in percent (default 1; 0 = no
    /// limit): after one that took the shard W, the next waits W x 100 / percent.
    #[arg(long)]
    auto_snapshot_cpu_percent: Option<u32>,
    /// Under appendfsync always, how long (us) a sync round may wait for the batches the last
    /// round answered, so one fdatasync covers them all (default 500, at most 100000; 0 = no
    /// wait). CONFIG SET group-commit-delay-us changes it.
    #[arg(long)]
    group_commit_delay_us: Option<u64>,
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s {
        "yes" | "true" | "on" => Ok(true),
        "no" | "false" | "off" => Ok(false),
        _ => Err(format!("{s:?}: give yes or no")),
    }
}

fn parse_ocsm_path(s: &str) -> Result<directkv_server::ocsm::OcsmPath, String> {
    directkv_server::ocsm::OcsmPath::parse(s)
        .ok_or_else(|| format!("unknown OCSM path {s:?} (plain | batched | batched-shard)"))
}

pub fn run(f: ServeFlags) -> Result<(), String> {
    // Structured logs on stderr; RUST_LOG=debug (or directkv_server=debug) shows connections.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let mut cfg = match &f.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            directkv_server::ServerConfig::from_toml(&text)?
        }
        None => directkv_server::ServerConfig::default(),
    };
    if let Some(b) = f.bind {
        cfg.bind = b;
    }
    if let Some(p) = f.port {
        cfg.port = p;
    }
    if f.metrics_port.is_some() {
        cfg.metrics_port = f.metrics_port;
    }
    if let Some(s) = f.shards {
        cfg.shards = s;
    }
    if let Some(m) = f.memory {
        cfg.memory_bytes = m;
    }
    if let Some(k) = f.kv_size {
        if k == 0 {
            return Err("--kv-size must be at least 1".into());
        }
        cfg.expected_kv_bytes = k;
    }
    if let Some(u) = f.utilization {
        if !(u > 0.0 && u < 1.0) {
            return Err(format!("--utilization must be in (0, 1), got {u}"));
        }
        cfg.target_utilization = u;
    }
    if f.requirepass.is_some() {
        cfg.requirepass = f.requirepass;
    }
    if f.ocsm_port.is_some() {
        cfg.ocsm_port = f.ocsm_port;
    }
    if f.udp.is_some() {
        cfg.udp = f.udp;
    }
    if f.ocsm.is_some() {
        cfg.ocsm = f.ocsm;
    }
    if f.udp_insecure {
        cfg.udp_insecure = true;
    }
    if f.no_ocsm {
        cfg.ocsm_port = None;
    }
    if let Some(p) = f.ocsm_path {
        cfg.ocsm_path = p;
    }
    if let Some(us) = f.busy_poll_us {
        cfg.busy_poll_us = us;
    }
    if let Some(t) = f.timeout {
        cfg.timeout = t;
    }
    if let Some(m) = f.metrics {
        cfg.metrics = m;
    }
    if let Some(n) = f.connections_max {
        cfg.connections_max = n;
    }
    if let Some(b) = f.maxmemory_clients {
        cfg.maxmemory_clients = b;
    }
    if let Some(b) = f.results_bytes_max {
        cfg.results_bytes_max = b;
    }
    if let Some(n) = f.expire_sweep_buckets {
        cfg.expire_sweep_buckets = n;
    }
    if let Some(ms) = f.expire_sweep_interval_ms {
        cfg.expire_sweep_interval_ms = ms;
    }
    if let Some(p) = f.prefault_index {
        cfg.prefault_index = p;
    }
    if let Some(p) = f.maxmemory_policy {
        cfg.maxmemory_policy = p;
    }
    if let Some(w) = f.eviction_watermark {
        cfg.eviction_watermark = w;
    }
    if let Some(p) = f.memcache_port {
        cfg.memcache_port = p;
    }
    if let Some(n) = f.scan_step_buckets {
        cfg.scan_step_buckets = n;
    }
    if let Some(d) = f.dir {
        cfg.dir = d;
    }
    if let Some(a) = f.appendonly {
        cfg.appendonly = a;
    }
    if let Some(p) = f.appendfsync {
        cfg.appendfsync = p;
    }
    if let Some(n) = f.auto_snapshot_log_bytes {
        cfg.auto_snapshot_log_bytes = n;
    }
    if let Some(p) = f.auto_snapshot_cpu_percent {
        cfg.auto_snapshot_cpu_percent = p;
    }
    if let Some(us) = f.group_commit_delay_us {
        cfg.group_commit_delay_us = us;
    }
    let server = directkv_server::Server::start(cfg.clone())?;
    let _ = writeln!(
        std::io::stderr(),
        "directkv {} serving RESP and native on {} (native UDP {}, metrics {}, OCSM {} {}, memcached {}) with {} shard{} and {} bytes of memory; {}",
        env!("CARGO_PKG_VERSION"),
        server.addr(),
        if server.udp_addr().is_some() { "on" } else { "off" },
        server.metrics_addr().map_or("off".to_string(), |a| a.to_string()),
        server.ocsm_addr().map_or("off".to_string(), |a| a.to_string()),
        cfg.ocsm_path.name(),
        server.memcache_addr().map_or("off".to_string(), |a| a.to_string()),
        server.shards(),
        if server.shards() == 1 { "" } else { "s" },
        cfg.memory_bytes,
        if cfg.appendonly {
            format!(
                "data logged in {} (appendfsync {})",
                cfg.dir.display(),
                cfg.appendfsync
            )
        } else {
            "in memory only (appendonly no)".to_string()
        }
    );
    server.run_until_signal();
    // A closed stderr (the parent went away) must not turn a clean stop into a panic.
    let _ = writeln!(std::io::stderr(), "directkv stopped");
    Ok(())
}
