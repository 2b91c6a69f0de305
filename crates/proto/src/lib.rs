//! directkv's wire protocols as sans-IO codecs: bytes in, requests out; replies in, bytes out.
//! No I/O, no async: the server and the client share these so they cannot drift.
pub mod native;
pub mod resp;
