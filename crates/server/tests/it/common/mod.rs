//! The server tests' helpers live in `directkv_testkit::server` (a real server on a loopback
//! ephemeral port, its metrics, a tiny RESP client), shared with the client's tests.

pub use directkv_testkit::server::*;
