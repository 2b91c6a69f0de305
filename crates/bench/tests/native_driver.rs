//! The native driver against a real in-process server: a load phase, then every operation
//! kind, counted as the runner will count them.

use directkv_bench::net::driver::native::NativeDriver;
use directkv_bench::net::driver::{
    write_key, write_value, BatchOutcome, BenchOp, BenchOpKind, DataShape, DriverError,
};
use directkv_server::{Server, ServerConfig};

const KEYS: u64 = 4000;
const DEPTH: usize = 64;

fn ops(kind: BenchOpKind, ids: impl Iterator<Item = u64>) -> Vec<BenchOp> {
    ids.map(|key_id| BenchOp { kind, key_id }).collect()
}

async fn run(d: &mut NativeDriver, ops: &[BenchOp]) -> BatchOutcome {
    let mut out = BatchOutcome::default();
    for chunk in ops.chunks(DEPTH) {
        d.execute(chunk, &mut out).await.unwrap();
    }
    out
}

#[tokio::test]
async fn load_then_every_operation_kind() {
    let srv = Server::start(ServerConfig {
        port: 0,
        shards: 2,
        memory_bytes: 64 << 20,
        metrics_port: Some(0),
        appendonly: false,
        ..ServerConfig::default()
    })
    .unwrap();
    let shape = DataShape {
        key_size: 8,
        value_size: 8,
    };
    let mut d = NativeDriver::connect(&srv.addr().to_string(), shape)
        .await
        .unwrap();

    let load = run(&mut d, &ops(BenchOpKind::Put, 0..KEYS)).await;
    assert_eq!(
        load,
        BatchOutcome {
            ok: KEYS,
            missed: 0,
            failed: 0
        }
    );
    let gets = run(&mut d, &ops(BenchOpKind::Get, 0..KEYS)).await;
    assert_eq!(
        gets,
        BatchOutcome {
            ok: KEYS,
            missed: 0,
            failed: 0
        }
    );
    // The values are the ones the workload defines.
    let (mut k, mut v) = (Vec::new(), Vec::new());
    write_key(1234, 8, &mut k);
    write_value(1234, 8, &mut v);
    assert_eq!(d.client().get(&k).await.unwrap(), Some(v));

    // Absent keys are misses, not errors; a batch can mix both.
    let mixed = ops(BenchOpKind::Get, KEYS - 10..KEYS + 20);
    let out = run(&mut d, &mixed).await;
    assert_eq!(
        out,
        BatchOutcome {
            ok: 10,
            missed: 20,
            failed: 0
        }
    );

    // Read-modify-write: read then write, one operation each.
    let out = run(
        &mut d,
        &ops(BenchOpKind::ReadModifyWrite, (0..100).chain(KEYS..KEYS + 5)),
    )
    .await;
    assert_eq!(
        out,
        BatchOutcome {
            ok: 100,
            missed: 5,
            failed: 0
        }
    );
    let mut k = Vec::new();
    write_key(KEYS + 1, 8, &mut k);
    assert!(
        d.client().get(&k).await.unwrap().is_some(),
        "the write of a missed RMW happened"
    );

    // Atomics and vector operations on the 8-byte values (one u64, or two u32).
    for kind in [
        BenchOpKind::AtomicAdd,
        BenchOpKind::VectorUpdate,
        BenchOpKind::VectorReduce,
        BenchOpKind::VectorFilter,
    ] {
        let out = run(&mut d, &ops(kind, 0..500)).await;
        assert_eq!(
            out,
            BatchOutcome {
                ok: 500,
                missed: 0,
                failed: 0
            },
            "{kind:?}"
        );
    }
    d.set_no_return(true);
    let out = run(&mut d, &ops(BenchOpKind::AtomicAdd, 0..500)).await;
    assert_eq!(out.ok, 500);
    // Each key got +1 as u64, then +1 on each u32 half, then +1 as u64 again.
    let (mut k, mut v) = (Vec::new(), Vec::new());
    write_key(7, 8, &mut k);
    write_value(7, 8, &mut v);
    let base = u64::from_le_bytes(v.try_into().unwrap());
    let want = base + 1 + (1 + (1 << 32)) + 1;
    let got = d.client().get(&k).await.unwrap().unwrap();
    assert_eq!(u64::from_le_bytes(got.try_into().unwrap()), want);
    srv.stop();
}

#[tokio::test]
async fn wrong_widths_count_as_failures_and_bad_targets_as_errors() {
    let srv = Server::start(ServerConfig {
        port: 0,
        shards: 1,
        memory_bytes: 32 << 20,
        metrics_port: Some(0),
        appendonly: false,
        ..ServerConfig::default()
    })
    .unwrap();
    let shape = DataShape {
        key_size: 6,
        value_size: 5,
    };
    let addr = srv.addr().to_string();
    let mut d = NativeDriver::connect(&addr, shape).await.unwrap();
    run(&mut d, &ops(BenchOpKind::Put, 0..10)).await;
    // Five-byte values are neither a u64 nor u32 elements: every op fails on its own.
    let out = run(&mut d, &ops(BenchOpKind::AtomicAdd, 0..10)).await;
    assert_eq!(
        out,
        BatchOutcome {
            ok: 0,
            missed: 0,
            failed: 10
        }
    );
    let out = run(&mut d, &ops(BenchOpKind::VectorReduce, 0..10)).await;
    assert_eq!(out.failed, 10);

    let too_long = DataShape {
        key_size: 300,
        value_size: 8,
    };
    let e = NativeDriver::connect(&addr, too_long).await.err().unwrap();
    assert!(matches!(e, DriverError::Unsupported(_)), "{e}");
    srv.stop();
    let e = NativeDriver::connect(&addr, shape).await.err().unwrap();
    assert!(matches!(e, DriverError::Connect { .. }), "{e}");
}
