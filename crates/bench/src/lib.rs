//! directkv's benchmarks: key distributions, the machine-limit probe, the in-process engine
//! benchmark (`directkv bench engine`), the network benchmark (`directkv bench run` and
//! `bench compare`: workloads, drivers per protocol, the closed/open-loop runner, reports and
//! charts, and the side-by-side comparison with redis-server and memcached) and the OCSM
//! benchmark (`directkv bench ocsm`).

pub mod chart;
pub mod compare;
pub mod dist;
pub mod driver;
pub mod engine_bench;
pub mod engine_sweep;
pub mod loopback;
pub mod netbench;
pub mod ocsm;
pub mod probe;
pub mod progress;
pub mod report;
pub mod runner;
pub mod servers;
pub mod workload;
