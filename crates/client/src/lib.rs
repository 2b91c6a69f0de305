//! directkv's Rust client, built on the sans-IO codecs of `directkv-proto` so that it cannot
//! drift from the server. `ocsm`: the OCSM (seed 004) client over UDP.

pub mod ocsm;
