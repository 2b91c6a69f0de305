//! directkv's wire protocols as sans-IO codecs: bytes in, requests out; replies in, bytes out.
//! Native, RESP, OCSM (UDP, seed 004) and memcached's text and meta protocols. No I/O, no
//! async: the server and the client share these so they cannot drift.
pub mod memcache;
pub mod native;
pub mod ocsm;
pub mod resp;
