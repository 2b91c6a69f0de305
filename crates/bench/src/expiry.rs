//! `directkv bench expiry`: the expiry-lag target of issue 20 ("with 1 M keys of which 10%
//! expire within a minute under a YCSB-B load, p99 lag <= 1 s; expired keys never returned"),
//! measured against a running server over the native client.
//!
//! ```text
//!   load     keys without a deadline (90%) ── put, batches of LOAD_BATCH_OPS
//!            t0 = now; keys with one (10%) ── put_with_deadline(t0 + U[0, window))
//!   run      `connections` threads, YCSB-B (95% get, 5% update) over a Zipf 0.99 key choice,
//!            `depth` operations a batch, until t0 + `run`:
//!              get    hit on a key whose deadline <= the batch's send time  -> violation
//!                     miss on a key that must be live at the reply          -> unexpected miss
//!              update put_with_deadline(KEEP_DEADLINE, XX): keeps the deadline, never
//!                     re-creates an expired key, so every key's deadline stays what the
//!                     load gave it, and the same two checks apply to its reply
//!   settle   poll INFO until no key has a deadline (every expiring key reclaimed)
//!   report   INFO's expired_keys and the cumulative lag buckets (< 16, 128, 1024, 8192 ms)
//!            before and after: p50, p99 and the maximum as bucket bounds; pass when there
//!            are no violations and no unexpected misses, and p99 < 1024 ms
//! ```
//!
//! Times are milliseconds on the wall clock the server reads too (the same machine): a key with
//! deadline `d` must be gone for a batch sent at `t_send` when `d <= t_send`, and must be there
//! for one answered at `t_recv` when `d > t_recv`; between the two the server may decide either
//! way, and nothing is checked.
//!
//! Goals: the target's own figures, from the server's lag histogram, with the "never returned"
//! half checked on every reply. Non-goals: a throughput figure (the load is there to make the
//! shards busy while they sweep; the machine is shared with the client).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use directkv_client::{cond, BlockingClient, ClientConfig, Reply, KEEP_DEADLINE};
use directkv_proto::resp::Reply as RespReply;
use serde::Serialize;

use crate::dist::{Distribution, KeyGen};
use crate::soak::wire::Resp;

/// Operations per batch while loading.
pub const LOAD_BATCH_OPS: usize = 1024;
/// The lag bounds INFO reports as cumulative counts (`expired_lag_lt_<N>ms`).
pub const LAG_BOUNDS_MS: [u64; 4] = [16, 128, 1024, 8192];
/// The target: the 99th percentile of the expiry lag below this.
pub const LAG_P99_TARGET_MS: u64 = 1024;
/// How long the settle phase waits for the last expiring keys to be reclaimed.
pub const SETTLE_MAX: Duration = Duration::from_secs(30);
/// How long an INFO request may take.
const INFO_PATIENCE: Duration = Duration::from_secs(10);

/// What to run.
#[derive(Debug, Clone)]
pub struct ExpirySpec {
    pub keys: u64,
    /// Share of the keys that get a deadline.
    pub expiring_fraction: f64,
    /// Deadlines are spread uniformly over this much time after the load.
    pub window: Duration,
    /// The YCSB-B phase runs this long after the load.
    pub run: Duration,
    pub key_size: usize,
    pub value_size: usize,
    pub depth: usize,
    pub connections: usize,
    pub dist: Distribution,
    pub seed: u64,
}

impl ExpirySpec {
    /// The issue's target: 1 M keys of 8 + 8 bytes, 10% expiring within a minute, 70 s of
    /// YCSB-B.
    pub fn target() -> ExpirySpec {
        ExpirySpec {
            keys: 1_000_000,
            expiring_fraction: 0.1,
            window: Duration::from_secs(60),
            run: Duration::from_secs(70),
            key_size: 8,
            value_size: 8,
            depth: 64,
            connections: 2,
            dist: Distribution::YcsbZipf { theta: 0.99 },
            seed: 1,
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.keys == 0 || self.keys > 100_000_000 {
            return Err(format!("keys {} not in 1..=100000000", self.keys));
        }
        let digits = self.keys.to_string().len();
        if self.key_size < digits || self.key_size > 250 {
            return Err(format!(
                "key size {} must hold {digits} digits and be at most 250",
                self.key_size
            ));
        }
        if !(0.0..=1.0).contains(&self.expiring_fraction) {
            return Err("the expiring fraction must be in 0..=1".into());
        }
        if self.depth == 0 || self.connections == 0 || self.value_size == 0 {
            return Err("depth, connections and value size must be at least 1".into());
        }
        if self.window.is_zero() || self.run < self.window {
            return Err("the run must last at least the deadline window".into());
        }
        Ok(())
    }
}

/// INFO's expiry counters at one moment.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ExpiryCounters {
    pub expired_keys: u64,
    pub expiring_keys: u64,
    /// `expired_lag_lt_<LAG_BOUNDS_MS[i]>ms`.
    pub lag_below: [u64; 4],
}

/// What the run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ExpiryReport {
    pub keys: u64,
    pub expiring_keys: u64,
    pub load_seconds: f64,
    pub run_seconds: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub gets: u64,
    /// GETs of keys whose deadline had passed when their batch was sent.
    pub gets_of_expired_keys: u64,
    /// Expired keys returned (or updated): must be 0.
    pub violations: u64,
    /// Live keys reported missing: must be 0 (nothing is evicted).
    pub unexpected_misses: u64,
    /// Server counters: expired keys and lag buckets during this run (after minus before).
    pub expired_keys: u64,
    pub lag_below: [u64; 4],
    /// Keys with a deadline the server still held when the settle phase ended (0: every one
    /// was reclaimed; `expired_keys` may be a little below `expiring_keys`, as a key whose
    /// deadline passed while the load was on its way was deleted by its put, never stored).
    pub expiring_keys_left: u64,
    pub settle_seconds: f64,
    /// Bucket bounds ("< 16 ms", ">= 8192 ms") of the lag quantiles and maximum.
    pub lag_p50: String,
    pub lag_p99: String,
    pub lag_max: String,
    pub passed: bool,
}

/// The key of index `i`: its decimal digits, zero-padded to `size` bytes.
fn key_of(i: u64, size: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend(std::iter::repeat_n(b'0', size));
    let mut n = i;
    for b in out.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
}

/// A well-mixed 64-bit function of `x` (splitmix64's finaliser): which keys expire, and when.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// INFO's expiry counters.
pub fn read_counters(addr: SocketAddr, password: &str) -> Result<ExpiryCounters, String> {
    let mut c = Resp::connect(addr, password)?;
    let text = match c.cmd(&[b"INFO"], INFO_PATIENCE)? {
        RespReply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        other => return Err(format!("INFO answered {other:?}")),
    };
    let field = |name: &str| -> Result<u64, String> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("INFO has no {name}"))
    };
    let mut lag_below = [0; 4];
    for (slot, bound) in lag_below.iter_mut().zip(LAG_BOUNDS_MS) {
        *slot = field(&format!("expired_lag_lt_{bound}ms"))?;
    }
    Ok(ExpiryCounters {
        expired_keys: field("expired_keys")?,
        expiring_keys: field("expiring_keys")?,
        lag_below,
    })
}

/// The bucket bound under which a share `q` of `total` lags lie.
fn lag_bound(lag_below: &[u64; 4], total: u64, q: f64) -> String {
    if total == 0 {
        return "none expired".into();
    }
    let need = (q * total as f64).ceil() as u64;
    for (count, bound) in lag_below.iter().zip(LAG_BOUNDS_MS) {
        if *count >= need {
            return format!("< {bound} ms");
        }
    }
    format!(">= {} ms", LAG_BOUNDS_MS[3])
}

/// Counts of one load thread.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    ops: u64,
    gets: u64,
    gets_of_expired_keys: u64,
    violations: u64,
    unexpected_misses: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.ops += o.ops;
        self.gets += o.gets;
        self.gets_of_expired_keys += o.gets_of_expired_keys;
        self.violations += o.violations;
        self.unexpected_misses += o.unexpected_misses;
    }

    /// Checks one reply against the key's deadline `d` (0: none) for a batch sent at
    /// `sent` and answered at `answered`.
    fn check(&mut self, d: u64, sent: u64, answered: u64, found: bool) {
        let expired = d != 0 && d <= sent;
        let live = d == 0 || d > answered;
        if found && expired {
            self.violations += 1;
        }
        if !found && live {
            self.unexpected_misses += 1;
        }
    }
}

/// Loads the keys: those without a deadline first, then, from `t0`, those with one. Returns
/// every key's deadline (0: none) and `t0`.
fn load(c: &mut BlockingClient, spec: &ExpirySpec) -> Result<(Vec<u64>, u64), String> {
    let cut = (spec.expiring_fraction * u64::MAX as f64) as u64;
    let expiring = |i: u64| spec.expiring_fraction > 0.0 && mix(i) <= cut;
    let value = vec![b'v'; spec.value_size];
    let mut key = Vec::new();
    let mut deadlines = vec![0u64; spec.keys as usize];
    for phase in [false, true] {
        let t0 = now_ms();
        let window = spec.window.as_millis() as u64;
        let mut i = 0;
        while i < spec.keys {
            let mut b = c.batch();
            while i < spec.keys && b.len() < LOAD_BATCH_OPS {
                if expiring(i) == phase {
                    key_of(i, spec.key_size, &mut key);
                    if phase {
                        let d = t0 + 1 + mix(i ^ spec.seed.rotate_left(17)) % window;
                        deadlines[i as usize] = d;
                        b.put_with_deadline(&key, &value, d, cond::ANY);
                    } else {
                        b.put(&key, &value);
                    }
                }
                i += 1;
            }
            if b.is_empty() {
                continue;
            }
            let replies = b.execute().map_err(|e| format!("load: {e}"))?;
            let failed = replies.iter().find(|r| !r.is_ok()).map(|r| r.to_owned());
            if let Some(r) = failed {
                return Err(format!("load: a put answered {r:?}"));
            }
        }
        if phase {
            return Ok((deadlines, t0));
        }
    }
    unreachable!("the second phase returns")
}

/// One load thread: YCSB-B batches until `end_ms`.
fn drive(
    addr: SocketAddr,
    config: ClientConfig,
    spec: &ExpirySpec,
    deadlines: &[u64],
    stream: u64,
    end_ms: u64,
) -> Result<Tally, String> {
    let mut c =
        BlockingClient::connect(&addr.to_string(), config).map_err(|e| format!("connect: {e}"))?;
    let mut keys = KeyGen::new(spec.dist, spec.keys, spec.seed.wrapping_add(stream));
    let value = vec![b'u'; spec.value_size];
    let mut key = Vec::new();
    let mut picked = vec![0u64; spec.depth];
    let mut tally = Tally::default();
    let mut dice = mix(stream.wrapping_add(spec.seed));
    let mut replies = directkv_client::Replies::new();
    while now_ms() < end_ms {
        keys.fill(&mut picked);
        let mut b = c.batch();
        let mut updates = 0u64;
        for &i in &picked {
            key_of(i, spec.key_size, &mut key);
            dice = mix(dice);
            // YCSB-B: 5% updates (1 in 20).
            if dice.is_multiple_of(20) {
                b.put_with_deadline(&key, &value, KEEP_DEADLINE, cond::XX);
                updates |= 1 << (b.len() - 1).min(63);
            } else {
                b.get(&key);
            }
        }
        let sent = now_ms();
        b.execute_into(&mut replies)
            .map_err(|e| format!("run: {e}"))?;
        let answered = now_ms();
        for (n, (&i, r)) in picked.iter().zip(replies.iter()).enumerate() {
            let d = deadlines[i as usize];
            let update = n < 64 && updates & (1 << n) != 0;
            let found = match r {
                Reply::Ok(_) => true,
                Reply::NotFound | Reply::NotStored => false,
                other => return Err(format!("run: a reply {other:?}")),
            };
            if !update {
                tally.gets += 1;
                if d != 0 && d <= sent {
                    tally.gets_of_expired_keys += 1;
                }
            }
            tally.check(d, sent, answered, found);
        }
        tally.ops += picked.len() as u64;
    }
    Ok(tally)
}

/// Starts `directkv serve` from `exe` with its default flags (what the target is judged on).
pub fn start_server(exe: &std::path::Path) -> Result<directkv_sys::process::ServerProcess, String> {
    directkv_sys::process::ServerProcess::directkv_serve(exe, &[], None)
}

/// Runs the benchmark against the server at `addr` (native and RESP on the same port).
pub fn run(addr: SocketAddr, password: &str, spec: &ExpirySpec) -> Result<ExpiryReport, String> {
    spec.check()?;
    if spec.depth > 64 {
        return Err("depth is at most 64 (the update flags of a batch are one word)".into());
    }
    let config = ClientConfig {
        password: (!password.is_empty()).then(|| password.to_string()),
        ..ClientConfig::default()
    };
    let before = read_counters(addr, password)?;
    let mut c = BlockingClient::connect(&addr.to_string(), config.clone())
        .map_err(|e| format!("connect: {e}"))?;
    let load_start = Instant::now();
    let (deadlines, t0) = load(&mut c, spec)?;
    let load_seconds = load_start.elapsed().as_secs_f64();
    drop(c);
    let expiring_keys = deadlines.iter().filter(|&&d| d != 0).count() as u64;
    let deadlines = Arc::new(deadlines);
    let end_ms = t0 + spec.run.as_millis() as u64;
    let run_start = Instant::now();
    let threads: Vec<_> = (0..spec.connections as u64)
        .map(|stream| {
            let (deadlines, spec, config) = (deadlines.clone(), spec.clone(), config.clone());
            std::thread::spawn(move || drive(addr, config, &spec, &deadlines, stream, end_ms))
        })
        .collect();
    let mut tally = Tally::default();
    for t in threads {
        let t = t
            .join()
            .map_err(|_| "a load thread panicked".to_string())??;
        tally.add(&t);
    }
    let run_seconds = run_start.elapsed().as_secs_f64();
    let settle_start = Instant::now();
    let mut after = read_counters(addr, password)?;
    while after.expiring_keys > before.expiring_keys && settle_start.elapsed() < SETTLE_MAX {
        std::thread::sleep(Duration::from_millis(100));
        after = read_counters(addr, password)?;
    }
    let expired_keys = after.expired_keys - before.expired_keys;
    let mut lag_below = [0; 4];
    for (k, slot) in lag_below.iter_mut().enumerate() {
        *slot = after.lag_below[k] - before.lag_below[k];
    }
    let expiring_keys_left = after.expiring_keys.saturating_sub(before.expiring_keys);
    let p99_ok = lag_below[2] as f64 >= 0.99 * expired_keys as f64;
    // Every key with a deadline was reclaimed when the server holds none any more. (Not
    // `expired_keys >= expiring_keys`: a key whose deadline passed before its put arrived was
    // never stored, as Redis's SET with a past PXAT, and never expires.)
    let passed =
        tally.violations == 0 && tally.unexpected_misses == 0 && expiring_keys_left == 0 && p99_ok;
    Ok(ExpiryReport {
        keys: spec.keys,
        expiring_keys,
        load_seconds,
        run_seconds,
        ops: tally.ops,
        ops_per_sec: tally.ops as f64 / run_seconds.max(1e-9),
        gets: tally.gets,
        gets_of_expired_keys: tally.gets_of_expired_keys,
        violations: tally.violations,
        unexpected_misses: tally.unexpected_misses,
        expired_keys,
        lag_below,
        expiring_keys_left,
        settle_seconds: settle_start.elapsed().as_secs_f64(),
        lag_p50: lag_bound(&lag_below, expired_keys, 0.5),
        lag_p99: lag_bound(&lag_below, expired_keys, 0.99),
        lag_max: lag_bound(&lag_below, expired_keys, 1.0),
        passed,
    })
}

/// The report as the table `directkv bench expiry` prints.
pub fn table(r: &ExpiryReport) -> String {
    let verdict = |ok: bool| if ok { "pass" } else { "FAIL" };
    let p99_ok = r.lag_below[2] as f64 >= 0.99 * r.expired_keys as f64;
    let mut t = String::new();
    t += &format!(
        "keys {} ({} with a deadline), loaded in {:.1} s\n",
        r.keys, r.expiring_keys, r.load_seconds
    );
    t += &format!(
        "YCSB-B for {:.1} s: {} ops ({:.0} ops/s), {} gets, {} of them of expired keys\n",
        r.run_seconds, r.ops, r.ops_per_sec, r.gets, r.gets_of_expired_keys
    );
    t += &format!(
        "server: {} keys expired, {} with a deadline left after {:.1} s of settling\n",
        r.expired_keys, r.expiring_keys_left, r.settle_seconds
    );
    t += &format!(
        "lag buckets: < 16 ms {}, < 128 ms {}, < 1024 ms {}, < 8192 ms {}\n",
        r.lag_below[0], r.lag_below[1], r.lag_below[2], r.lag_below[3]
    );
    t += &format!(
        "lag p50 {}, p99 {}, max {}\n",
        r.lag_p50, r.lag_p99, r.lag_max
    );
    t += &format!(
        "expired keys returned: {} ({})\n",
        r.violations,
        verdict(r.violations == 0)
    );
    t += &format!(
        "live keys missing: {} ({})\n",
        r.unexpected_misses,
        verdict(r.unexpected_misses == 0)
    );
    t += &format!(
        "every expiring key reclaimed: {}\n",
        verdict(r.expiring_keys_left == 0)
    );
    t += &format!("p99 lag < 1024 ms: {}\n", verdict(p99_ok));
    t += &format!("target: {}\n", verdict(r.passed));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_zero_padded_digits() {
        let mut k = Vec::new();
        key_of(42, 8, &mut k);
        assert_eq!(k, b"00000042");
        key_of(0, 3, &mut k);
        assert_eq!(k, b"000");
    }

    #[test]
    fn lag_bounds_from_cumulative_buckets() {
        let below = [50, 90, 99, 100];
        assert_eq!(lag_bound(&below, 100, 0.5), "< 16 ms");
        assert_eq!(lag_bound(&below, 100, 0.99), "< 1024 ms");
        assert_eq!(lag_bound(&below, 100, 1.0), "< 8192 ms");
        assert_eq!(lag_bound(&[0, 0, 0, 0], 10, 1.0), ">= 8192 ms");
        assert_eq!(lag_bound(&below, 0, 0.5), "none expired");
    }

    #[test]
    fn checks_count_only_what_the_clock_decides() {
        let mut t = Tally::default();
        // Deadline 100: sent at 100 -> must be gone; a hit is a violation.
        t.check(100, 100, 105, true);
        // Answered at 99 -> must be there; a miss is unexpected.
        t.check(100, 90, 99, false);
        // Sent at 95, answered at 102: either is fine.
        t.check(100, 95, 102, true);
        t.check(100, 95, 102, false);
        // No deadline: always there.
        t.check(0, 1, 2, true);
        assert_eq!((t.violations, t.unexpected_misses), (1, 1));
    }
}
