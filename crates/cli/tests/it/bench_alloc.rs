//! The memcached driver does not allocate in steady state: after a first batch has sized its
//! buffers, further batches of the same shape allocate nothing. Counted by a global allocator
//! that counts per thread, so that other tests' threads do not disturb the count; the driver
//! runs on this test's thread (current-thread runtime). The RESP driver is not held to this:
//! the proto crate's `parse_reply` builds an owned `Reply` for every reply.

use directkv_bench::net::driver::{BatchOutcome, BenchOp, BenchOpKind, DataShape, Driver, Target};
use directkv_bench::net::workload::{OpStream, ValueFormat, WorkloadKind, WorkloadSpec};
use directkv_sys::process::ServerProcess;
use directkv_testkit::alloc::Counting;
use directkv_testkit::peer::require_program;

#[test]
fn memcache_driver_batches_do_not_allocate_in_steady_state() {
    // Skipped when memcached is missing, a failure under scripts/test.sh and CI.
    if require_program("memcached", "memcached").is_none() {
        return;
    }
    let server = ServerProcess::memcached(64, None).expect("memcached starts");
    let shape = DataShape {
        key_size: 8,
        value_size: 16,
    };
    let spec = WorkloadSpec {
        kind: WorkloadKind::YcsbA,
        dist: directkv_bench::dist::Distribution::Uniform,
        keys: 1_000,
        shape,
        seed: 5,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut driver = Driver::connect(&Target::Memcache(server.addr), shape, ValueFormat::Bytes)
            .await
            .unwrap();
        let load: Vec<BenchOp> = (0..1_000)
            .map(|key_id| BenchOp {
                kind: BenchOpKind::Put,
                key_id,
            })
            .collect();
        let mut out = BatchOutcome::default();
        driver.execute(&load, &mut out).await.unwrap();
        let mut stream = OpStream::new(&spec, 0);
        let mut ops = Vec::with_capacity(64);
        // Warm-up batches grow the buffers to their working size.
        for _ in 0..20 {
            stream.fill(&mut ops, 64);
            driver.execute(&ops, &mut out).await.unwrap();
        }
        let counting = Counting::start();
        for _ in 0..200 {
            stream.fill(&mut ops, 64);
            driver.execute(&ops, &mut out).await.unwrap();
        }
        let during = counting.stop().allocations;
        assert_eq!(out.failed, 0);
        assert_eq!(out.missed, 0);
        assert_eq!(
            during, 0,
            "{during} allocations in 200 steady-state batches"
        );
    });
}
