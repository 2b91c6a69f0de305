//! The OCSM client (seed 004) over UDP: 96-bit keys with one-message values, and the seed's
//! API on top of them: long keys hashed into 96-bit identifiers, long values spread over
//! several fixed-size entries.
//!
//! Goals: the seed's API (insert, modify, delete, search), pipelining (every message of a call
//! goes out in as few datagrams as possible, all sent before any reply is awaited),
//! retransmission of lost datagrams, clear errors. Non-goals: atomicity of long values against
//! concurrent writers (a reader racing a writer may see `Inconsistent`), async I/O.
//!
//! Long keys: a key of exactly 12 bytes is its own identifier; any other key's identifier is
//! the first 12 bytes (little-endian) of its **xxh3-128** hash (seed 0). Two keys can share an
//! identifier (probability about n²/2⁹⁷ for n keys). The long-value header stores a 32-bit check
//! of the full key (xxh3-64 with seed 1), so `get` of a key whose identifier was taken by
//! another key returns `KeyCollision` instead of the other key's value in nearly every case;
//! `put` of a colliding key replaces the other key's value (as in any hashed store).
//!
//! Long values (as the seed describes: one lookup for the length, then pipelined lookups):
//!
//! ```text
//!  id(key)            header entry: [ len u32 LE | key check u32 LE | 0 u32 ]   (12 bytes)
//!  chunk_id(id, i)    chunk i: value bytes [i*C, (i+1)*C), zero-padded           (C = 12 or 44)
//!  chunk_id(id, i) = first 12 bytes of xxh3-128(id ‖ i u32 LE ‖ "chunk")
//!
//!  get: search id ──► len ──► search chunk_id(id, 0..n) in ⌈n/45⌉ datagrams, sent at once
//!  put: read old header ─► write chunks ─► write header ─► delete chunks beyond the new length
//!  delete: delete header (readers stop seeing the value) ─► delete its chunks
//! ```
//!
//! Retransmission: a datagram without a reply within `timeout` is sent again, up to `tries`
//! times. A retried update may have been applied the first time: a retried insert can then
//! answer `Exists` and a retried delete `NotFound` (the long-value calls tolerate both).

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

use directkv_proto::ocsm::{
    decode_response, encode_header, encode_message, ErrorCode, Header, MessageOut, MessageSize,
    OcsmLimits, Opcode, Response, Status, HEADER_SEQUENCE_MAX, KEY_BYTES,
};
use xxhash_rust::xxh3::{xxh3_128, xxh3_64_with_seed};

/// A 96-bit OCSM key.
pub type KeyId = [u8; KEY_BYTES];

/// Default wait for a reply before a datagram is sent again.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_millis(200);
/// Default sends of one datagram before giving up.
pub const TRIES_DEFAULT: usize = 5;
/// Largest long value (the header's length field is a u32; this keeps a value to a few
/// thousand datagrams).
pub const LONG_VALUE_BYTES_MAX: usize = 16 << 20;
/// Bytes of a reply buffer (a reply is never larger than the largest request).
const REPLY_BYTES_MAX: usize = 65_536;

#[derive(Debug, thiserror::Error)]
pub enum OcsmClientError {
    #[error("OCSM socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("no reply to an OCSM datagram after {tries} tries")]
    Timeout { tries: usize },
    #[error("the server refused a datagram: {0:?}")]
    Refused(ErrorCode),
    #[error("malformed reply: {0}")]
    BadReply(String),
    #[error("value of {len} bytes exceeds {max}")]
    ValueTooLong { len: usize, max: usize },
    #[error("the server could not store the value (status {0:?})")]
    Failed(Status),
    #[error("key identifier collision: the entry belongs to another key")]
    KeyCollision,
    #[error("long value changed while read: {0}")]
    Inconsistent(String),
}

pub type Result<T> = std::result::Result<T, OcsmClientError>;

/// The identifier of an application key (see the module comment).
pub fn key_id(key: &[u8]) -> KeyId {
    if let Ok(k) = <KeyId>::try_from(key) {
        return k;
    }
    let h = xxh3_128(key).to_le_bytes();
    h[..KEY_BYTES].try_into().expect("12 of 16 bytes")
}

/// The 32-bit key check kept in a long value's header.
fn key_check(key: &[u8]) -> u32 {
    xxh3_64_with_seed(key, 1) as u32
}

/// The identifier of chunk `i` of the value under `id`.
pub fn chunk_id(id: &KeyId, i: u32) -> KeyId {
    let mut b = [0u8; KEY_BYTES + 4 + 5];
    b[..KEY_BYTES].copy_from_slice(id);
    b[KEY_BYTES..KEY_BYTES + 4].copy_from_slice(&i.to_le_bytes());
    b[KEY_BYTES + 4..].copy_from_slice(b"chunk");
    xxh3_128(&b).to_le_bytes()[..KEY_BYTES]
        .try_into()
        .expect("12 of 16 bytes")
}

/// One message of a pipelined call.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub op: Opcode,
    pub key: KeyId,
    /// Insert/modify: at most one message's value (12 or 44 bytes); shorter is zero-padded.
    pub value: &'a [u8],
}

/// The server's answer to one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: Status,
    /// Search: the value (a whole slot, zero padding included).
    pub value: Vec<u8>,
}

pub struct OcsmClient {
    sock: UdpSocket,
    size: MessageSize,
    limits: OcsmLimits,
    timeout: Duration,
    tries: usize,
    next_seq: u32,
    buf: Vec<u8>,
}

impl OcsmClient {
    /// A client of `addr` with 32-byte messages and the default timeout and tries.
    pub fn connect(addr: impl ToSocketAddrs) -> Result<OcsmClient> {
        let addr: SocketAddr = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address"))?;
        let local: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0".parse().expect("valid")
        } else {
            "[::]:0".parse().expect("valid")
        };
        let sock = UdpSocket::bind(local)?;
        sock.connect(addr)?;
        Ok(OcsmClient {
            sock,
            size: MessageSize::B32,
            limits: OcsmLimits::DEFAULT,
            timeout: TIMEOUT_DEFAULT,
            tries: TRIES_DEFAULT,
            next_seq: 1,
            buf: vec![0u8; REPLY_BYTES_MAX],
        })
    }

    /// Uses 64-byte messages (44-byte values, 22 per datagram) instead of 32-byte ones.
    pub fn with_size(mut self, size: MessageSize) -> OcsmClient {
        self.size = size;
        self
    }

    pub fn with_timeout(mut self, timeout: Duration, tries: usize) -> OcsmClient {
        self.timeout = timeout;
        self.tries = tries.max(1);
        self
    }

    /// Value bytes one message holds.
    pub fn value_bytes(&self) -> usize {
        self.size.value_head_bytes()
    }

    pub fn insert(&mut self, key: &KeyId, value: &[u8]) -> Result<Status> {
        self.one(Opcode::Insert, key, value).map(|r| r.status)
    }

    pub fn modify(&mut self, key: &KeyId, value: &[u8]) -> Result<Status> {
        self.one(Opcode::Modify, key, value).map(|r| r.status)
    }

    pub fn delete(&mut self, key: &KeyId) -> Result<Status> {
        self.one(Opcode::Delete, key, &[]).map(|r| r.status)
    }

    /// The value of `key` (a whole slot), or None.
    pub fn search(&mut self, key: &KeyId) -> Result<Option<Vec<u8>>> {
        let r = self.one(Opcode::Search, key, &[])?;
        Ok((r.status == Status::Ok).then_some(r.value))
    }

    fn one(&mut self, op: Opcode, key: &KeyId, value: &[u8]) -> Result<Reply> {
        let mut r = self.pipeline(&[Request {
            op,
            key: *key,
            value,
        }])?;
        Ok(r.pop().expect("one reply per request"))
    }

    /// Sends every request, as few datagrams as the limits allow (updates and searches in
    /// separate datagrams, as the protocol requires), all before waiting; retransmits lost ones.
    /// Replies come back in request order.
    pub fn pipeline(&mut self, reqs: &[Request<'_>]) -> Result<Vec<Reply>> {
        let max = self.value_bytes();
        if let Some(r) = reqs.iter().find(|r| r.value.len() > max) {
            return Err(OcsmClientError::ValueTooLong {
                len: r.value.len(),
                max,
            });
        }
        let per = self.limits.messages_per_datagram_max(self.size);
        // Runs of one kind, cut at `per` messages: (first request, count).
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < reqs.len() {
            let kind = reqs[i].op.kind();
            let mut n = 1;
            while i + n < reqs.len() && n < per && reqs[i + n].op.kind() == kind {
                n += 1;
            }
            groups.push((i, n));
            i += n;
        }
        let mut datagrams = Vec::with_capacity(groups.len());
        for &(first, n) in &groups {
            let seq = self.take_seq();
            let mut d = Vec::new();
            encode_header(
                &Header {
                    sequence: seq,
                    response: false,
                    size: self.size,
                    kind: reqs[first].op.kind(),
                    count: n as u16,
                },
                &mut d,
            );
            for (j, r) in reqs[first..first + n].iter().enumerate() {
                encode_message(
                    self.size,
                    &MessageOut {
                        key: r.key,
                        value: r.value,
                        sequence: j as u32,
                        length: 1,
                        source: 0,
                        destination: 0,
                        opcode: r.op as u8,
                    },
                    &mut d,
                )
                .expect("one unit");
            }
            datagrams.push((seq, d));
        }
        let replies = self.exchange(&datagrams)?;
        let mut out = Vec::with_capacity(reqs.len());
        for (&(_, n), reply) in groups.iter().zip(&replies) {
            let d = match decode_response(reply, &self.limits) {
                Ok(Response::Messages(d)) => d,
                Ok(Response::Error { code, .. }) => return Err(OcsmClientError::Refused(code)),
                Err(e) => return Err(OcsmClientError::BadReply(e.to_string())),
            };
            if d.header.count as usize != n {
                return Err(OcsmClientError::BadReply(format!(
                    "{} replies to {n} messages",
                    d.header.count
                )));
            }
            for m in d.messages() {
                let mut value = Vec::new();
                m.value_into(&mut value);
                out.push(Reply {
                    status: m.status().expect("decode_response checked it"),
                    value,
                });
            }
        }
        Ok(out)
    }

    fn take_seq(&mut self) -> u32 {
        let s = self.next_seq;
        self.next_seq = if s >= HEADER_SEQUENCE_MAX { 1 } else { s + 1 };
        s
    }

    /// Sends every datagram, collects one reply per sequence number, resends the unanswered
    /// ones after each timeout.
    fn exchange(&mut self, datagrams: &[(u32, Vec<u8>)]) -> Result<Vec<Vec<u8>>> {
        let mut replies: Vec<Option<Vec<u8>>> = vec![None; datagrams.len()];
        let mut left = datagrams.len();
        for _ in 0..self.tries {
            for (i, (_, d)) in datagrams.iter().enumerate() {
                if replies[i].is_none() {
                    self.sock.send(d)?;
                }
            }
            let deadline = Instant::now() + self.timeout;
            while left > 0 {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                self.sock.set_read_timeout(Some(deadline - now))?;
                let n = match self.sock.recv(&mut self.buf) {
                    Ok(n) => n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        break
                    }
                    Err(e) => return Err(e.into()),
                };
                if n < 6 {
                    continue;
                }
                let seq = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], 0]);
                // Replies to earlier calls' retransmissions have other sequence numbers.
                if let Some(i) = datagrams.iter().position(|(s, _)| *s == seq) {
                    if replies[i].is_none() {
                        replies[i] = Some(self.buf[..n].to_vec());
                        left -= 1;
                    }
                }
            }
            if left == 0 {
                return Ok(replies
                    .into_iter()
                    .map(|r| r.expect("all answered"))
                    .collect());
            }
        }
        Err(OcsmClientError::Timeout { tries: self.tries })
    }

    /// Stores `value` under an application key of any length (see the module comment).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if value.len() > LONG_VALUE_BYTES_MAX {
            return Err(OcsmClientError::ValueTooLong {
                len: value.len(),
                max: LONG_VALUE_BYTES_MAX,
            });
        }
        let id = key_id(key);
        let c = self.value_bytes();
        let old_chunks = match self.search(&id)? {
            Some(h) => header_len(&h).div_ceil(c),
            None => 0,
        };
        let ids: Vec<KeyId> = (0..value.len().div_ceil(c))
            .map(|i| chunk_id(&id, i as u32))
            .collect();
        let entries: Vec<(KeyId, &[u8])> = ids.iter().copied().zip(value.chunks(c)).collect();
        self.upsert(&entries)?;
        let header = header_bytes(value.len() as u32, key_check(key));
        self.upsert(&[(id, &header[..])])?;
        let stale: Vec<Request<'_>> = (ids.len()..old_chunks)
            .map(|i| Request {
                op: Opcode::Delete,
                key: chunk_id(&id, i as u32),
                value: &[],
            })
            .collect();
        self.pipeline(&stale)?;
        Ok(())
    }

    /// Inserts every entry; those that exist are modified instead.
    fn upsert(&mut self, entries: &[(KeyId, &[u8])]) -> Result<()> {
        let reqs: Vec<Request<'_>> = entries
            .iter()
            .map(|&(key, value)| Request {
                op: Opcode::Insert,
                key,
                value,
            })
            .collect();
        let replies = self.pipeline(&reqs)?;
        let mut again = Vec::new();
        for (r, rep) in reqs.iter().zip(&replies) {
            match rep.status {
                Status::Ok => {}
                Status::Exists => again.push(Request {
                    op: Opcode::Modify,
                    ..*r
                }),
                s => return Err(OcsmClientError::Failed(s)),
            }
        }
        for rep in self.pipeline(&again)? {
            // NotFound: deleted between the insert and the modify by another client; the
            // value is then simply gone, as if that delete had come later.
            if !matches!(rep.status, Status::Ok | Status::NotFound) {
                return Err(OcsmClientError::Failed(rep.status));
            }
        }
        Ok(())
    }

    /// The value stored by `put` under `key`, or None.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let id = key_id(key);
        let Some(h) = self.search(&id)? else {
            return Ok(None);
        };
        if h.len() < 8 || u32::from_le_bytes([h[4], h[5], h[6], h[7]]) != key_check(key) {
            return Err(OcsmClientError::KeyCollision);
        }
        let len = header_len(&h);
        let c = self.value_bytes();
        let n = len.div_ceil(c);
        let reqs: Vec<Request<'_>> = (0..n)
            .map(|i| Request {
                op: Opcode::Search,
                key: chunk_id(&id, i as u32),
                value: &[],
            })
            .collect();
        let mut value = Vec::with_capacity(n * c);
        for (i, r) in self.pipeline(&reqs)?.into_iter().enumerate() {
            if r.status != Status::Ok {
                return Err(OcsmClientError::Inconsistent(format!(
                    "chunk {i} of {n}: {:?}",
                    r.status
                )));
            }
            value.extend_from_slice(&r.value[..c.min(r.value.len())]);
        }
        value.truncate(len);
        Ok(Some(value))
    }

    /// Deletes the value stored by `put` and all its chunks; false if there was none.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        let id = key_id(key);
        let Some(h) = self.search(&id)? else {
            return Ok(false);
        };
        let n = header_len(&h).div_ceil(self.value_bytes());
        let mut reqs = vec![Request {
            op: Opcode::Delete,
            key: id,
            value: &[],
        }];
        self.pipeline(&reqs)?;
        reqs = (0..n)
            .map(|i| Request {
                op: Opcode::Delete,
                key: chunk_id(&id, i as u32),
                value: &[],
            })
            .collect();
        self.pipeline(&reqs)?;
        Ok(true)
    }
}

fn header_bytes(len: u32, check: u32) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[..4].copy_from_slice(&len.to_le_bytes());
    h[4..8].copy_from_slice(&check.to_le_bytes());
    h
}

fn header_len(h: &[u8]) -> usize {
    if h.len() < 4 {
        return 0;
    }
    (u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize).min(LONG_VALUE_BYTES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_stable_and_distinct() {
        assert_eq!(key_id(b"exactly12byt"), *b"exactly12byt");
        let a = key_id(b"a key longer than ninety-six bits");
        assert_eq!(a, key_id(b"a key longer than ninety-six bits"));
        assert_ne!(a, key_id(b"a key longer than ninety-six bitz"));
        assert_ne!(key_id(b"ab"), key_id(b"ab\0"));
        assert_ne!(chunk_id(&a, 0), chunk_id(&a, 1));
        assert_ne!(chunk_id(&a, 0), a);
    }
}
