//! The network benchmark against real servers: the RESP driver on `directkv serve` and on
//! redis-server, the memcached driver on memcached, open-loop queueing, and the `bench run` /
//! `bench compare` commands end to end. Servers are started on ephemeral ports by
//! `directkv_sys::process` and stopped by PID when their guard drops. redis-server and
//! memcached come from scripts/test.sh; a test skips, loudly, only when one is not installed
//! and peers are not required (`directkv_testkit::peer`: scripts/test.sh and CI require them).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use directkv_bench::dist::Distribution;
use directkv_bench::net::driver::memcache::MemcacheDriver;
use directkv_bench::net::driver::resp::RespDriver;
use directkv_bench::net::driver::{
    write_key, write_value, BatchOutcome, BenchOp, BenchOpKind, DataShape, Driver, DriverError,
    Target,
};
use directkv_bench::net::runner::{self, NoProgress, Pacing, RunConfig};
use directkv_bench::net::workload::{vector_elem, ValueFormat, WorkloadKind, WorkloadSpec};
use directkv_bench::report::RunResult;
use directkv_proto::resp::{encode_command, parse_reply, Reply};
use directkv_sys::process::ServerProcess;
use directkv_testkit::peer::require_program;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const EXE: &str = env!("CARGO_BIN_EXE_directkv");

const SHAPE: DataShape = DataShape {
    key_size: 8,
    value_size: 8,
};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn directkv() -> ServerProcess {
    ServerProcess::directkv(Path::new(EXE), "64M", 32, 0.5, None).expect("directkv serve starts")
}

/// The server, or `None` (skipped) when its program is not installed and peers are not
/// required; a failure when they are.
fn system_server(program: &str) -> Option<ServerProcess> {
    require_program(program, program)?;
    Some(match program {
        "redis-server" => ServerProcess::redis(None).expect("redis-server starts"),
        _ => ServerProcess::memcached(64, None).expect("memcached starts"),
    })
}

fn op(kind: BenchOpKind, key_id: u64) -> BenchOp {
    BenchOp { kind, key_id }
}

fn puts(ids: std::ops::Range<u64>) -> Vec<BenchOp> {
    ids.map(|id| op(BenchOpKind::Put, id)).collect()
}

async fn exec(d: &mut Driver, ops: &[BenchOp]) -> BatchOutcome {
    let mut out = BatchOutcome::default();
    d.execute(ops, &mut out).await.expect("batch runs");
    assert_eq!(out.total(), ops.len() as u64);
    out
}

fn outcome(ok: u64, missed: u64, failed: u64) -> BatchOutcome {
    BatchOutcome { ok, missed, failed }
}

/// Runs the operations `(kind, key id)` as one batch and returns its outcome.
async fn exec_ops(d: &mut Driver, ops: &[(BenchOpKind, u64)]) -> BatchOutcome {
    let ops: Vec<BenchOp> = ops.iter().map(|&(kind, key_id)| op(kind, key_id)).collect();
    exec(d, &ops).await
}

/// Loads `keys` counters through a driver of the counter format (each starts at "0"), then adds
/// to counter `key` `adds` times in one batch: every operation succeeds.
async fn load_and_add_counters(target: &Target, keys: u64, key: u64, adds: u64) {
    let shape = DataShape {
        key_size: 9,
        value_size: 8,
    };
    let mut c = Driver::connect(target, shape, ValueFormat::Counter)
        .await
        .unwrap();
    assert_eq!(exec(&mut c, &puts(0..keys)).await, outcome(keys, 0, 0));
    let ops: Vec<BenchOp> = (0..adds).map(|_| op(BenchOpKind::AtomicAdd, key)).collect();
    assert_eq!(exec(&mut c, &ops).await, outcome(adds, 0, 0));
}

/// One RESP command over a fresh connection, for checking what a driver stored.
async fn resp_command(addr: std::net::SocketAddr, args: &[&[u8]]) -> Reply {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut out = Vec::new();
    encode_command(args, &mut out);
    s.write_all(&out).await.unwrap();
    let mut buf = Vec::new();
    loop {
        if let Some((reply, _)) = parse_reply(&buf).unwrap() {
            return reply;
        }
        assert!(s.read_buf(&mut buf).await.unwrap() > 0, "connection closed");
    }
}

fn key(id: u64) -> Vec<u8> {
    let mut k = Vec::new();
    write_key(id, SHAPE.key_size, &mut k);
    k
}

/// The RESP driver's contract, run against any RESP server.
async fn resp_contract(server: &ServerProcess) {
    use BenchOpKind::{Get, Put, ReadModifyWrite as Rmw};
    let target = Target::Resp(server.addr);
    let mut d = Driver::connect(&target, SHAPE, ValueFormat::Bytes)
        .await
        .unwrap();
    assert_eq!(exec(&mut d, &puts(0..100)).await, outcome(100, 0, 0));
    let mut value = Vec::new();
    write_value(42, SHAPE.value_size, &mut value);
    assert_eq!(
        resp_command(server.addr, &[b"GET", &key(42)]).await,
        Reply::Bulk(Some(value))
    );
    // Reads of loaded keys hit, reads of absent ones miss, in one pipeline with writes.
    let batch = [
        (Get, 1),
        (Get, 5_000),
        (Put, 2),
        (Rmw, 3),
        (Rmw, 6_000),
        (Get, 1),
    ];
    assert_eq!(exec_ops(&mut d, &batch).await, outcome(4, 2, 0));
    // INCRBY on a loaded 8-byte string that is not a number is an error reply: failed.
    assert_eq!(
        exec(&mut d, &[op(BenchOpKind::AtomicAdd, 7)]).await,
        outcome(0, 0, 1)
    );
    // Counters: loaded as "0", then added to.
    load_and_add_counters(&target, 4, 3, 10).await;
    assert_eq!(
        resp_command(server.addr, &[b"GET", b"000000003"]).await,
        Reply::Bulk(Some(b"10".to_vec()))
    );
}

#[test]
fn resp_driver_against_directkv() {
    let server = directkv();
    rt().block_on(async {
        resp_contract(&server).await;
        // Vector workloads run through DKV.* commands.
        let shape = DataShape {
            key_size: 10,
            value_size: 16,
        };
        let target = Target::Resp(server.addr);
        let mut v = Driver::connect(&target, shape, ValueFormat::VectorU32 { elems: 4 })
            .await
            .unwrap();
        assert_eq!(exec(&mut v, &puts(0..50)).await, outcome(50, 0, 0));
        let ops = [
            op(BenchOpKind::VectorUpdate, 1),
            op(BenchOpKind::VectorReduce, 1),
            op(BenchOpKind::VectorFilter, 1),
        ];
        assert_eq!(exec(&mut v, &ops).await, outcome(3, 0, 0));
        // The update added 1 to every element the load phase stored.
        let got = resp_command(server.addr, &[b"DKV.VGET", b"0000000001", b"u32"]).await;
        let want: Vec<Reply> = (0..4)
            .map(|i| Reply::Bulk(Some((vector_elem(1, i) + 1).to_string().into_bytes())))
            .collect();
        assert_eq!(got, Reply::Array(Some(want)));
        // INFO tells the arena size, which --utilization uses.
        let mut r = RespDriver::connect(server.addr, SHAPE, ValueFormat::Bytes)
            .await
            .unwrap();
        let arena: u64 = r
            .info_field("memory", "arena_bytes")
            .await
            .unwrap()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(arena, 64 << 20);
    });
}

#[test]
fn resp_driver_against_redis_and_the_server_is_stopped_by_pid() {
    let Some(server) = system_server("redis-server") else {
        return;
    };
    let pid = server.pid();
    rt().block_on(async {
        resp_contract(&server).await;
        let refused =
            RespDriver::connect(server.addr, SHAPE, ValueFormat::VectorU32 { elems: 2 }).await;
        assert!(
            matches!(&refused, Err(DriverError::Unsupported(m)) if m.contains("not directkv")),
            "{:?}",
            refused.err()
        );
    });
    drop(server);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "redis-server {pid} still running"
    );
}

#[test]
fn memcache_driver_against_memcached() {
    use BenchOpKind::{AtomicAdd, Get, Put, ReadModifyWrite as Rmw};
    let Some(server) = system_server("memcached") else {
        return;
    };
    rt().block_on(async {
        let target = Target::Memcache(server.addr);
        let mut d = Driver::connect(&target, SHAPE, ValueFormat::Bytes)
            .await
            .unwrap();
        assert_eq!(exec(&mut d, &puts(0..300)).await, outcome(300, 0, 0));
        // Misses are found among hits, duplicates and read-modify-writes of one multi-get.
        let batch = [
            (Get, 9_000),
            (Get, 1),
            (Get, 1),
            (Rmw, 2),
            (Get, 9_001),
            (Put, 400),
            (Rmw, 9_002),
            (Get, 299),
            (Get, 9_003),
        ];
        assert_eq!(exec_ops(&mut d, &batch).await, outcome(5, 4, 0));
        // The Put stored key 400, so it now hits.
        assert_eq!(exec_ops(&mut d, &[(Get, 400)]).await, outcome(1, 0, 0));
        // incr on a non-numeric value is a CLIENT_ERROR: failed; on an absent key: missed.
        let incrs = [(AtomicAdd, 5), (AtomicAdd, 9_999)];
        assert_eq!(exec_ops(&mut d, &incrs).await, outcome(0, 1, 1));
        load_and_add_counters(&target, 3, 2, 7).await;
        // A large pipeline crosses several socket reads.
        let big: Vec<BenchOp> = (0..2_000)
            .map(|i| op(BenchOpKind::Get, (i * 7) % 600))
            .collect();
        let hits = big
            .iter()
            .filter(|o| o.key_id < 300 || o.key_id == 400)
            .count() as u64;
        assert_eq!(exec(&mut d, &big).await, outcome(hits, 2_000 - hits, 0));
        let refused =
            MemcacheDriver::connect(server.addr, SHAPE, ValueFormat::VectorU32 { elems: 2 }).await;
        assert!(matches!(refused, Err(DriverError::Unsupported(_))));
    });
}

/// A depth-1, one-connection run against `addr`.
fn depth_one_run(addr: std::net::SocketAddr, pacing: Pacing, seconds: f64) -> RunResult {
    let spec = WorkloadSpec {
        kind: WorkloadKind::YcsbC,
        dist: Distribution::Uniform,
        keys: 1_000,
        shape: SHAPE,
        seed: 3,
    };
    let config = RunConfig {
        connections: 1,
        depth: 1,
        warmup: Duration::ZERO,
        measure: Duration::from_secs_f64(seconds),
        pacing,
        busy_poll: true,
    };
    rt().block_on(async {
        let mut drivers = vec![
            Driver::connect(&Target::Resp(addr), SHAPE, ValueFormat::Bytes)
                .await
                .unwrap(),
        ];
        runner::load(&mut drivers, &spec, 100).await.unwrap();
        let stats = runner::run(
            &mut drivers,
            &spec,
            &config,
            std::sync::Arc::new(NoProgress),
        )
        .await
        .unwrap();
        RunResult::new(&config, &stats)
    })
}

/// Timing-sensitive tests of this file take this lock, so that they do not compete for the two
/// cores with the other tests' servers (the machine itself may still be busy).
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The run with the median p50 of `REPEATS` runs, to ride out a busy machine.
fn median_run(addr: std::net::SocketAddr, pacing: Pacing, seconds: f64) -> RunResult {
    const REPEATS: usize = 3;
    let mut runs: Vec<RunResult> = (0..REPEATS)
        .map(|_| depth_one_run(addr, pacing, seconds))
        .collect();
    runs.sort_by(|a, b| a.latency.p50_us.total_cmp(&b.latency.p50_us));
    runs.swap_remove(REPEATS / 2)
}

#[test]
fn open_loop_latency_includes_queueing_delay_when_overloaded() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let server = directkv();
    let closed_short = median_run(server.addr, Pacing::Closed, 0.3);
    let closed_long = median_run(server.addr, Pacing::Closed, 0.9);
    // Offer twenty times what one connection at depth 1 served just now, and at least 2 M ops/s
    // (several times what it can serve on this machine however quiet): on a loaded machine the
    // closed-loop rate measured first can be a fraction of what the server serves a moment later,
    // and a smaller overload queues too little for the growth checked below (CI flake: open p50
    // 72.7 ms over 0.9 s against 1.5 x 50.3 ms over 0.3 s).
    let rate = (closed_short.ops_per_sec * 20.0).max(2_000_000.0);
    let open_short = median_run(server.addr, Pacing::Open { ops_per_sec: rate }, 0.3);
    let open_long = median_run(server.addr, Pacing::Open { ops_per_sec: rate }, 0.9);
    let p50 = |r: &RunResult| r.latency.p50_us;
    eprintln!(
        "closed p50 {:.1} / {:.1} us, open p50 {:.1} / {:.1} us at {rate:.0} ops/s offered",
        p50(&closed_short),
        p50(&closed_long),
        p50(&open_short),
        p50(&open_long)
    );
    assert_eq!(open_short.failed + open_short.missed, 0);
    // Batch k is served about k/mu after the start but was due at k/lambda, so the waits grow
    // linearly through the run: the median is about half the run, far above one round trip.
    assert!(
        p50(&open_short) > 20.0 * p50(&closed_short),
        "open {open_short:?}\nclosed {closed_short:?}"
    );
    assert!(p50(&open_short) > 30_000.0, "{open_short:?}");
    // ... and it grows with the run's length (three times longer here), which a closed loop's
    // does not.
    assert!(
        p50(&open_long) > 1.5 * p50(&open_short),
        "{open_long:?}\n{open_short:?}"
    );
    // The closed loop's median stays at round-trip scale however long it runs: far below the
    // open loop's (a machine whose cores are taken by other work moves the round trip from
    // about 10 us to several ms, so the bound is relative, not absolute).
    assert!(
        p50(&closed_long) * 50.0 < p50(&open_long),
        "{closed_long:?}\n{closed_short:?}"
    );
    // An open loop well below capacity does not queue: it sees about the round-trip time (a
    // busy machine adds scheduling delays, hence the bound relative to the overloaded case).
    // The relaxed run is only meaningful when the machine serves its rate: on a machine whose
    // cores other work takes (CI flake: 1.7 k of 4.5 k ops/s served, p50 69 ms), it is run
    // again, up to `RELAXED_ATTEMPTS` times, and judged on a run that kept up.
    const RELAXED_ATTEMPTS: usize = 5;
    let mut relaxed = None;
    for attempt in 1..=RELAXED_ATTEMPTS {
        let offered = closed_short.ops_per_sec / 10.0;
        let r = median_run(
            server.addr,
            Pacing::Open {
                ops_per_sec: offered,
            },
            0.3,
        );
        if r.ops_per_sec >= 0.8 * offered {
            relaxed = Some(r);
            break;
        }
        eprintln!("relaxed run {attempt}: {:.0} of {offered:.0} ops/s served (the machine is busy); again", r.ops_per_sec);
    }
    let relaxed = relaxed.unwrap_or_else(|| {
        panic!("no relaxed open-loop run served its rate in {RELAXED_ATTEMPTS} attempts")
    });
    assert!(p50(&relaxed) * 10.0 < p50(&open_short), "{relaxed:?}");
}

fn directkv_cmd(args: &[&str]) -> std::process::Output {
    Command::new("timeout")
        .arg("120")
        .arg(EXE)
        .args(args)
        .output()
        .expect("directkv runs")
}

#[test]
fn bench_run_json_csv_and_png() {
    let server = directkv();
    let url = format!("resp://{}", server.addr);
    let dir = std::env::temp_dir().join(format!("directkv-bench-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (csv, png) = (dir.join("r.csv"), dir.join("r.png"));
    let out = directkv_cmd(&[
        "bench",
        "run",
        "--target",
        &url,
        "--keys",
        "2000",
        "--seconds",
        "0.3",
        "--warmup",
        "0.1",
        "--depth-sweep",
        "1,8",
        "--connections",
        "2",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
        "--png",
        png.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(v["target"], url.as_str());
    assert_eq!(v["workload"], "ycsb-b");
    assert_eq!(v["dist"], "ycsb-zipf:0.99");
    assert_eq!(v["keys"], 2000);
    assert_eq!(v["key_size"], 8);
    assert_eq!(v["value_size"], 8);
    assert_eq!(v["load"]["keys"], 2000);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (run, depth) in runs.iter().zip([1, 8]) {
        assert_eq!(run["mode"], "closed");
        assert_eq!(run["depth"], depth);
        assert_eq!(run["connections"], 2);
        assert!(run["ops_per_sec"].as_f64().unwrap() > 0.0);
        assert!(run["ops"].as_u64().unwrap() > 0);
        assert_eq!(run["ok"], run["ops"], "every key was loaded: no misses");
        assert_eq!(run["failed"], 0);
        let l = &run["latency"];
        let p: Vec<f64> = ["p5_us", "p50_us", "p95_us", "p99_us", "p999_us"]
            .iter()
            .map(|f| l[f].as_f64().unwrap_or_else(|| panic!("no latency.{f}")))
            .collect();
        assert!(p[0] > 0.0 && p.windows(2).all(|w| w[0] <= w[1]), "{l}");
        assert!(l["mean_us"].as_f64().unwrap() > 0.0);
    }
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv_text.lines().count(), 3, "{csv_text}");
    assert!(csv_text.starts_with("target,workload,dist"));
    let png_bytes = std::fs::read(&png).unwrap();
    assert!(png_bytes.starts_with(b"\x89PNG"));
    std::fs::remove_dir_all(&dir).unwrap();

    // Bad input is refused with a message that says what is wrong.
    let bad = directkv_cmd(&["bench", "run", "--target", &url, "--workload", "ycsb-q"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown workload"));
    let bad = directkv_cmd(&["bench", "run", "--target", "localhost:1", "--keys", "1"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no scheme"));
    let bad = directkv_cmd(&[
        "bench", "run", "--target", &url, "--depth", "0", "--keys", "1",
    ]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("depth must be"));
}

#[test]
fn bench_compare_end_to_end() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    for program in ["redis-server", "memcached"] {
        if require_program(program, program).is_none() {
            return;
        }
    }
    let png = std::env::temp_dir().join(format!("directkv-compare-{}.png", std::process::id()));
    let out = directkv_cmd(&[
        "bench",
        "compare",
        "--keys",
        "20000",
        "--seconds",
        "0.5",
        "--warmup",
        "0.2",
        "--json",
        "--png",
        png.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(v["keys"], 20000);
    assert_eq!(v["depth"], 64);
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    // The native target runs where the native driver is built in, and is skipped otherwise.
    let others: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| *n != "directkv-native")
        .collect();
    assert_eq!(others, ["directkv-resp", "redis", "memcached"]);
    assert!(
        names.contains(&"directkv-native") != skipped.contains(&"directkv-native"),
        "{v}"
    );
    for row in rows {
        assert!(row["run"]["ops_per_sec"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["run"]["failed"], 0, "{row}");
        assert_eq!(row["run"]["missed"], 0, "{row}");
        assert!(row["run"]["latency"]["p99_us"].as_f64().unwrap() > 0.0);
        assert!(
            row["server_cpu_sec_per_mop"].as_f64().unwrap() > 0.0,
            "{row}"
        );
        assert!(row["rss_bytes_per_key"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["load"]["keys"], 20000);
    }
    // The loopback echo reference ran after the targets with native GET batches of depth 64.
    let echo = &v["loopback_echo_reference"];
    let (request, response) =
        directkv_bench::machine::loopback::native_batch_bytes(64, 8, 8).unwrap();
    assert_eq!(echo["echo"]["request_bytes"], request, "{echo}");
    assert_eq!(echo["echo"]["response_bytes"], response, "{echo}");
    assert_eq!(echo["echo"]["connections"], 1, "{echo}");
    let round_trips = echo["echo"]["round_trips_per_sec"].as_f64().unwrap();
    assert!(round_trips > 0.0, "{echo}");
    assert_close(echo["ops_per_sec"].as_f64().unwrap(), round_trips * 64.0);
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    std::fs::remove_file(&png).unwrap();
}

/// The one JSON object a successful `--json` command printed.
fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).expect("JSON")
}

/// Equal within a relative 1e-9: JSON numbers parse back within an ulp or so, not always bit
/// for bit.
fn assert_close(got: f64, want: f64) {
    assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
}

#[test]
fn bench_compare_lists_an_echo_it_cannot_measure_as_skipped() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    // A depth above one native frame's operations has no single-frame echo to compare with;
    // the target's run still stands.
    let out = directkv_cmd(&[
        "bench",
        "compare",
        "--targets",
        "directkv-native",
        "--keys",
        "5000",
        "--depth",
        "5000",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--json",
    ]);
    let v = json_of(&out);
    assert!(v["loopback_echo_reference"].is_null(), "{v}");
    let skipped = v["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{v}");
    assert_eq!(skipped[0]["name"], "loopback echo reference");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("depth 5000"),
        "{v}"
    );
    assert_eq!(v["rows"].as_array().unwrap().len(), 1, "{v}");
    assert!(
        v["rows"][0]["run"]["ops_per_sec"].as_f64().unwrap() > 0.0,
        "{v}"
    );
}

#[test]
fn bench_loopback_reports_the_echo_pair() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    let out = directkv_cmd(&[
        "bench",
        "loopback",
        "--connections",
        "2",
        "--depth",
        "16",
        "--seconds",
        "0.3",
        "--json",
    ]);
    let v = json_of(&out);
    let (request, response) =
        directkv_bench::machine::loopback::native_batch_bytes(16, 8, 8).unwrap();
    assert_eq!(v["echo"]["request_bytes"], request, "{v}");
    assert_eq!(v["echo"]["response_bytes"], response, "{v}");
    assert_eq!(v["echo"]["connections"], 2, "{v}");
    let rt = v["echo"]["round_trips_per_sec"].as_f64().unwrap();
    assert!(rt > 0.0, "{v}");
    assert_close(v["ops_per_sec"].as_f64().unwrap(), rt * 16.0);
    // Explicit sizes replace the native batch's; bad input is refused with a reason.
    let out = directkv_cmd(&[
        "bench",
        "loopback",
        "--request-bytes",
        "100",
        "--response-bytes",
        "3000",
        "--seconds",
        "0.2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("100-byte requests, 3000-byte responses"),
        "{text}"
    );
    let bad = directkv_cmd(&[
        "bench",
        "loopback",
        "--connections",
        "0",
        "--seconds",
        "0.1",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("connections 0 outside"));
    // With a log: every answer waited for an fdatasync, and the line says how many ran; the
    // log file is gone afterwards.
    let dir = directkv_bench::net::compare::DataDir::create("cli-loopback-fsync").unwrap();
    let d = dir.path.display().to_string();
    let out = directkv_cmd(&[
        "bench",
        "loopback",
        "--connections",
        "2",
        "--seconds",
        "0.3",
        "--fsync-dir",
        &d,
        "--work-lines",
        "16",
        "--json",
    ]);
    let v = json_of(&out);
    let fsyncs = v["echo"]["fsyncs"].as_u64().unwrap();
    let served = v["echo"]["server_round_trips"].as_u64().unwrap();
    // Each round answers both connections, except a round or two while only one is open: at
    // the start, before the second connects, and at the end, after the first has closed.
    assert!(
        fsyncs > 0 && served + 4 >= 2 * fsyncs && served <= 2 * fsyncs + 2,
        "{v}"
    );
    assert_eq!(std::fs::read_dir(&dir.path).unwrap().count(), 0);
    let text = directkv_cmd(&["bench", "loopback", "--seconds", "0.2", "--fsync-dir", &d]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("answered after fdatasync of 1024-byte records"),
        "{text}"
    );
    // Its output to a reader that stopped reading ends the command quietly (SIGPIPE), not
    // with a panic.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_directkv"))
        .args(["bench", "loopback", "--seconds", "0.2", "--fsync-dir", &d])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {err}",
        out.status
    );
    // --handoff without a log is refused by name.
    let bad = directkv_cmd(&["bench", "loopback", "--handoff", "--seconds", "0.1"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--fsync-dir"));
}

/// `bench compare --targets directkv-memcache,memcached` (issue 21): the memcached driver runs
/// against directkv's memcached port as against memcached, every get answered, with the
/// columns of the other targets (CPU per op, RSS per key).
#[test]
fn bench_compare_directkv_memcache() {
    let _alone = TIMING.lock().unwrap_or_else(|e| e.into_inner());
    if require_program("memcached", "memcached").is_none() {
        return;
    }
    for depth in ["64", "1"] {
        let out = directkv_cmd(&[
            "bench",
            "compare",
            "--targets",
            "directkv-memcache,memcached",
            "--keys",
            "20000",
            "--depth",
            depth,
            "--connections",
            "4",
            "--seconds",
            "0.4",
            "--warmup",
            "0.1",
            "--no-echo-reference",
            "--json",
        ]);
        let v = json_of(&out);
        let rows = v["rows"].as_array().unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["directkv-memcache", "memcached"], "{v}");
        for row in rows {
            assert!(row["run"]["ops_per_sec"].as_f64().unwrap() > 0.0, "{row}");
            assert_eq!(row["run"]["failed"], 0, "{row}");
            assert_eq!(row["run"]["missed"], 0, "{row}");
            assert!(
                row["server_cpu_sec_per_mop"].as_f64().unwrap() > 0.0,
                "{row}"
            );
            assert!(row["rss_bytes_per_key"].as_f64().unwrap() > 0.0, "{row}");
            assert_eq!(row["load"]["keys"], 20000, "{row}");
        }
    }
    let bad = directkv_cmd(&["bench", "compare", "--targets", "directkv-memcached"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("directkv-memcache)"));
}
