//! Control frames: HELLO and its reply with the shard map, PING/PONG, ATTACH, ERROR.
//!
//! ```text
//!   HELLO        pass_len u8 | password | name_len u8 | client name
//!   HELLO_REPLY  frame_len_max u32 | value_len_max u32 | frame_ops_max u16 | key_len_max u8
//!                | hash_id u8 | shard_count u16 | port u16 x shard_count
//!                | name_len u8 | server name (UTF-8)
//!   PING / PONG  payload (0..=64 bytes, echoed)
//!   ATTACH       shard_id u16            ATTACH_REPLY  shard_id u16
//!   ERROR        code u8 | flags u8 (bit 0 CLOSING) | op_index u16 (0xFFFF: none)
//!                | msg_len u8 | message (UTF-8)
//! ```
//!
//! Shard rule: `h = xxh3_64(key)` (seed 0; hash_id 1), `shard = ((h >> 52) * shard_count) >> 12`.
//! The top 12 bits of the hash are a number in 0..4096; multiplying by the shard count and
//! keeping the top 12 bits of the product maps it onto 0..shard_count without a division, in
//! proportional contiguous slices (exactly equal when the count divides 4096, within one slice
//! of 4096 otherwise). Bits 52..64 are unused by the engine (bucket 0..32, secondary hash 32..41,
//! reservation station 41..51), so a shard's keys still spread evenly over its buckets.
//!
//! A shard's port is where a connection is served by that shard's thread; 0 means "no port of
//! its own: connect to the main port and send ATTACH shard_id". ATTACH is valid on TCP only.
//!
//! Goals: every length bounded by a one- or two-byte field or a named limit.
//! The `put_*` functions may leave a partial body on error; the frame encoders in `native.rs`
//! truncate `out` back to the frame's start.
//! Non-goals: authentication policy and what a server does on ATTACH (see docs/protocol.md).

use super::error::{EncodeError, ErrorCode};
use super::limits::NativeLimits;
use super::wire::{put_u16, put_u32, Cursor};

/// Longest PING payload (an echo for latency probes: timestamps, nonces).
pub const PING_PAYLOAD_MAX: usize = 64;
/// Hash id of xxh3-64 with seed 0, the only one defined.
pub const HASH_XXH3_64: u8 = 1;
/// Most shards a map can have: the rule uses 12 bits of the hash.
pub const SHARD_COUNT_MAX: u16 = 4096;
/// A shard port of 0: no dedicated port, use ATTACH on the main port.
pub const SHARD_PORT_ATTACH: u16 = 0;
/// ERROR flag: the server closes the connection after this frame.
pub const ERROR_FLAG_CLOSING: u8 = 0x01;
/// `op_index` on the wire when the error is not about one operation.
const OP_INDEX_NONE: u16 = 0xFFFF;

/// The shard of a key whose xxh3-64 hash is `hash`, among `shard_count` shards (1..=4096).
pub const fn shard_of_hash(hash: u64, shard_count: u16) -> u16 {
    (((hash >> 52) * shard_count as u64) >> 12) as u16
}

/// HELLO: the first frame of a connection. An empty password means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello<'a> {
    pub password: &'a [u8],
    pub client_name: &'a [u8],
}

/// Where the shards are and how keys map to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMap {
    /// Hash function id (`HASH_XXH3_64`).
    pub hash: u8,
    /// One port per shard, in shard order; `SHARD_PORT_ATTACH` for none.
    pub ports: Vec<u16>,
}

impl ShardMap {
    pub fn shard_count(&self) -> u16 {
        self.ports.len() as u16
    }

    /// The shard of a key whose hash is `hash`.
    pub fn shard_of_hash(&self, hash: u64) -> u16 {
        shard_of_hash(hash, self.shard_count())
    }
}

/// HELLO_REPLY: the server's limits, shard map and name. Owned: it arrives once per connection
/// and the client keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloReply {
    pub limits: NativeLimits,
    pub shard_map: ShardMap,
    /// Server name and version, e.g. "directkv 0.1.0".
    pub server_name: String,
}

/// ERROR: why a frame was rejected. `code` is raw so codes from newer servers still decode;
/// `ErrorCode::from_code` interprets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorReply<'a> {
    pub code: u8,
    /// The server closes the connection after this frame.
    pub closing: bool,
    pub op_index: Option<u16>,
    pub message: &'a str,
}

/// A u8-length-prefixed field.
fn short_bytes<'a>(c: &mut Cursor<'a>) -> Result<&'a [u8], ErrorCode> {
    let n = c.u8()?;
    c.bytes(usize::from(n))
}

fn short_str<'a>(c: &mut Cursor<'a>) -> Result<&'a str, ErrorCode> {
    std::str::from_utf8(short_bytes(c)?).map_err(|_| ErrorCode::BadControl)
}

fn put_short(out: &mut Vec<u8>, field: &'static str, b: &[u8]) -> Result<(), EncodeError> {
    let len = u8::try_from(b.len()).map_err(|_| EncodeError::FieldTooLong {
        field,
        len: b.len(),
        max: usize::from(u8::MAX),
    })?;
    out.push(len);
    out.extend_from_slice(b);
    Ok(())
}

fn no_trailing(c: &Cursor<'_>) -> Result<(), ErrorCode> {
    if c.remaining() == 0 {
        Ok(())
    } else {
        Err(ErrorCode::TrailingBytes)
    }
}

pub(crate) fn parse_hello(body: &[u8]) -> Result<Hello<'_>, ErrorCode> {
    let mut c = Cursor::new(body);
    let password = short_bytes(&mut c)?;
    let client_name = short_bytes(&mut c)?;
    no_trailing(&c)?;
    Ok(Hello {
        password,
        client_name,
    })
}

pub(crate) fn put_hello(out: &mut Vec<u8>, h: &Hello<'_>) -> Result<(), EncodeError> {
    put_short(out, "password", h.password)?;
    put_short(out, "client name", h.client_name)
}

pub(crate) fn parse_hello_reply(body: &[u8]) -> Result<HelloReply, ErrorCode> {
    let mut c = Cursor::new(body);
    let frame_len_max = c.u32()?;
    let value_len_max = c.u32()?;
    let frame_ops_max = c.u16()?;
    let key_len_max = c.u8()?;
    let hash = c.u8()?;
    let shard_count = c.u16()?;
    if shard_count == 0 || shard_count > SHARD_COUNT_MAX {
        return Err(ErrorCode::BadControl);
    }
    // Bounded above by 4096 and by the frame: check the bytes exist before allocating.
    let raw = c.bytes(2 * usize::from(shard_count))?;
    let ports = raw
        .chunks_exact(2)
        .map(|p| u16::from_le_bytes([p[0], p[1]]))
        .collect();
    let server_name = short_str(&mut c)?.to_owned();
    no_trailing(&c)?;
    Ok(HelloReply {
        limits: NativeLimits {
            frame_len_max,
            frame_ops_max,
            key_len_max,
            value_len_max,
        },
        shard_map: ShardMap { hash, ports },
        server_name,
    })
}

pub(crate) fn put_hello_reply(out: &mut Vec<u8>, r: &HelloReply) -> Result<(), EncodeError> {
    let n = r.shard_map.ports.len();
    if n == 0 || n > usize::from(SHARD_COUNT_MAX) {
        return Err(EncodeError::BadShardCount(n));
    }
    put_u32(out, r.limits.frame_len_max);
    put_u32(out, r.limits.value_len_max);
    put_u16(out, r.limits.frame_ops_max);
    out.push(r.limits.key_len_max);
    out.push(r.shard_map.hash);
    put_u16(out, n as u16);
    for &port in &r.shard_map.ports {
        put_u16(out, port);
    }
    put_short(out, "server name", r.server_name.as_bytes())
}

pub(crate) fn parse_ping(body: &[u8]) -> Result<&[u8], ErrorCode> {
    if body.len() > PING_PAYLOAD_MAX {
        return Err(ErrorCode::BadControl);
    }
    Ok(body)
}

pub(crate) fn put_ping(out: &mut Vec<u8>, payload: &[u8]) -> Result<(), EncodeError> {
    if payload.len() > PING_PAYLOAD_MAX {
        return Err(EncodeError::FieldTooLong {
            field: "ping payload",
            len: payload.len(),
            max: PING_PAYLOAD_MAX,
        });
    }
    out.extend_from_slice(payload);
    Ok(())
}

pub(crate) fn parse_shard_id(body: &[u8]) -> Result<u16, ErrorCode> {
    let mut c = Cursor::new(body);
    let shard = c.u16()?;
    no_trailing(&c)?;
    Ok(shard)
}

pub(crate) fn parse_error(body: &[u8]) -> Result<ErrorReply<'_>, ErrorCode> {
    let mut c = Cursor::new(body);
    let code = c.u8()?;
    let flags = c.u8()?;
    if flags & !ERROR_FLAG_CLOSING != 0 {
        return Err(ErrorCode::BadControl);
    }
    let op_index = match c.u16()? {
        OP_INDEX_NONE => None,
        i => Some(i),
    };
    let message = short_str(&mut c)?;
    no_trailing(&c)?;
    Ok(ErrorReply {
        code,
        closing: flags & ERROR_FLAG_CLOSING != 0,
        op_index,
        message,
    })
}

pub(crate) fn put_error(out: &mut Vec<u8>, e: &ErrorReply<'_>) -> Result<(), EncodeError> {
    if e.op_index == Some(OP_INDEX_NONE) {
        // 0xFFFF means "none" on the wire; frame_ops_max keeps real indexes below it.
        return Err(EncodeError::TooManyOps {
            max: usize::from(OP_INDEX_NONE),
        });
    }
    out.push(e.code);
    out.push(if e.closing { ERROR_FLAG_CLOSING } else { 0 });
    put_u16(out, e.op_index.unwrap_or(OP_INDEX_NONE));
    put_short(out, "error message", e.message.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_rule_uses_the_top_twelve_bits_proportionally() {
        assert_eq!(shard_of_hash(0, 4), 0);
        assert_eq!(shard_of_hash(u64::MAX, 4), 3);
        assert_eq!(shard_of_hash(0x4000_0000_0000_0000, 4), 1);
        assert_eq!(shard_of_hash(0x3FFF_FFFF_FFFF_FFFF, 4), 0);
        assert_eq!(shard_of_hash(u64::MAX, 1), 0);
        assert_eq!(shard_of_hash(u64::MAX, SHARD_COUNT_MAX), 4095);
        // Three shards: the 4096 slices split 1366 / 1365 / 1365.
        let mut counts = [0u32; 3];
        for top in 0..4096u64 {
            counts[usize::from(shard_of_hash(top << 52, 3))] += 1;
        }
        assert_eq!(counts, [1366, 1365, 1365]);
    }

    #[test]
    fn hello_reply_round_trips() {
        let r = HelloReply {
            limits: NativeLimits::DEFAULT,
            shard_map: ShardMap {
                hash: HASH_XXH3_64,
                ports: vec![0, 7081, 7082],
            },
            server_name: "directkv 0.1.0".into(),
        };
        let mut out = Vec::new();
        put_hello_reply(&mut out, &r).unwrap();
        assert_eq!(out.len(), 14 + 6 + 1 + 14);
        assert_eq!(parse_hello_reply(&out), Ok(r.clone()));
        assert_eq!(r.shard_map.shard_of_hash(u64::MAX), 2);
        // Zero shards and truncated port lists are rejected before anything is allocated.
        let mut zero = out.clone();
        zero[12..14].copy_from_slice(&[0, 0]);
        assert_eq!(parse_hello_reply(&zero), Err(ErrorCode::BadControl));
        let mut many = out.clone();
        many[12..14].copy_from_slice(&4096u16.to_le_bytes());
        assert_eq!(parse_hello_reply(&many), Err(ErrorCode::Truncated));
    }

    #[test]
    fn control_bodies_reject_bad_fields() {
        assert_eq!(parse_hello(&[0, 0, 9]), Err(ErrorCode::TrailingBytes));
        assert_eq!(parse_hello(&[3, b'a']), Err(ErrorCode::Truncated));
        assert_eq!(parse_ping(&[0; 65]), Err(ErrorCode::BadControl));
        assert_eq!(parse_shard_id(&[1]), Err(ErrorCode::Truncated));
        assert_eq!(parse_shard_id(&[1, 0, 0]), Err(ErrorCode::TrailingBytes));
        assert_eq!(
            parse_error(&[1, 2, 0xff, 0xff, 0]),
            Err(ErrorCode::BadControl)
        );
        assert_eq!(
            parse_error(&[1, 0, 0xff, 0xff, 1, 0xff]),
            Err(ErrorCode::BadControl)
        );
        let mut out = Vec::new();
        let long = [b'x'; 256];
        assert!(put_hello(
            &mut out,
            &Hello {
                password: &long,
                client_name: b""
            }
        )
        .is_err());
        assert!(put_ping(&mut out, &[0; 65]).is_err());
    }

    #[test]
    fn error_reply_round_trips() {
        let e = ErrorReply {
            code: 8,
            closing: false,
            op_index: Some(2),
            message: "unknown opcode",
        };
        let mut out = Vec::new();
        put_error(&mut out, &e).unwrap();
        assert_eq!(&out[..5], &[8, 0, 2, 0, 14]);
        assert_eq!(parse_error(&out), Ok(e));
        let none = ErrorReply {
            op_index: None,
            closing: true,
            ..e
        };
        out.clear();
        put_error(&mut out, &none).unwrap();
        assert_eq!(&out[..4], &[8, 1, 0xff, 0xff]);
        assert_eq!(parse_error(&out), Ok(none));
    }
}
