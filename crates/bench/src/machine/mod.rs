//! What the machine gives, measured without a store: the references every directkv figure is
//! judged against.
//!
//! ```text
//!   probe.rs     memory: random 64-byte line reads per second over a region, and how much of a
//!                line's latency computation can hide (`bench probe`; `bench engine` runs it too)
//!   loopback.rs  network: round trips per second of an echo pair over loopback TCP with
//!                directkv-native batch sizes and no work (`bench loopback`; `bench compare`
//!                runs it as a reference, not a bound: issue 19 item 17)
//! ```
//!
//! Goals: measure each reference in the same session and with the same shape (region size,
//! connections, message bytes) as the run it bounds. Non-goals: any key-value work; latency of
//! a single access or message.

pub mod loopback;
pub mod probe;
