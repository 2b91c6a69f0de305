//! directkv's benchmarks: key distributions, the machine-limit probe, the in-process engine
//! benchmark (`directkv bench engine`) and the OCSM benchmark (`directkv bench ocsm`). Network
//! drivers (native, RESP, memcached) come with the client (issue 4).

pub mod dist;
pub mod driver;
pub mod engine_bench;
pub mod engine_sweep;
pub mod ocsm;
pub mod probe;
