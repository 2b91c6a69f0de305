//! The native protocol (docs/protocol.md; codec in `directkv_proto::native`, shared with the
//! client): over TCP on the server's port (`conn.rs`, told from RESP by its first byte), and
//! over UDP on the same port number (`udp.rs`, one frame per datagram, never authenticated).
//! Most operations are the engine's, planned by key; exists and type are engine reads whose
//! replies the server words, and scan (`scan.rs`) walks the shards' indexes.

pub(crate) mod conn;
pub(crate) mod scan;
pub(crate) mod udp;
