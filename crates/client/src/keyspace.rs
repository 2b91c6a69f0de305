//! Deadlines and the keyspace on the async client (issue 20 item 5): put with a deadline,
//! expire, persist, ttl, exists, type and scan, over the native operations of the same names
//! (docs/protocol.md, "Deadlines and the keyspace").
//!
//! ```text
//!   c.put_with_ttl(k, v, 10 s)        deadline = this machine's clock + 10 s (absolute ms)
//!   c.ttl(k)        -> Ttl::Expires { deadline_ms, left_ms } | Ttl::Persistent | Ttl::Missing
//!   let mut s = c.scan(b"user:", 100);
//!   while let Some(keys) = s.next_page(&mut c).await? { ... }     shard by shard, to the end
//! ```
//!
//! Deadlines are absolute milliseconds since the Unix epoch, as Redis's PXAT: the server
//! compares them with its own clock, so `put_with_ttl` is only as exact as the two clocks
//! agree (the same machine: exactly).
//!
//! Goals: Redis's semantics (a deadline already passed deletes the key; a plain put clears
//! the deadline, `put_keep_deadline` keeps it, as SET KEEPTTL) with typed results.
//! Non-goals: MATCH patterns (a scan filters by prefix), relative TTLs on the wire.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use directkv_proto::native::{
    cond, expire_args, parse_ttl_reply, scan_args, NativeOp, ScanReply, KEEP_DEADLINE,
};

use crate::client::{done as expect_ok, stored, unexpected, Client};
use crate::error::ClientError;
use crate::reply::OwnedReply;

/// What `Client::ttl` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// No such key.
    Missing,
    /// The key has no deadline.
    Persistent,
    /// The key expires at `deadline_ms` (ms since the Unix epoch), `left_ms` from the server's
    /// now.
    Expires { deadline_ms: u64, left_ms: u64 },
}

impl Ttl {
    /// Redis's PTTL answer: -2 missing, -1 no deadline, else the milliseconds left.
    pub fn as_redis_ms(&self) -> i64 {
        match *self {
            Ttl::Missing => -2,
            Ttl::Persistent => -1,
            Ttl::Expires { left_ms, .. } => i64::try_from(left_ms).unwrap_or(i64::MAX),
        }
    }

    /// The typed form of a ttl operation's reply (a batch's `Reply` made owned).
    pub fn from_reply(r: OwnedReply) -> Result<Ttl, ClientError> {
        match r {
            OwnedReply::NotFound => Ok(Ttl::Missing),
            OwnedReply::Ok(d) => match parse_ttl_reply(&d) {
                Some((0, _)) => Ok(Ttl::Persistent),
                Some((deadline_ms, left_ms)) => Ok(Ttl::Expires {
                    deadline_ms,
                    left_ms,
                }),
                None => Err(ClientError::Protocol(format!(
                    "a ttl reply of {} bytes, not 16",
                    d.len()
                ))),
            },
            other => unexpected(other),
        }
    }
}

/// Milliseconds since the Unix epoch on this machine's clock, `ttl` from now.
pub fn deadline_after(ttl: Duration) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    now.saturating_add(ttl.as_millis() as u64)
}

/// A scan of the keys starting with a prefix, page by page (see `Client::scan`). Every key
/// present for the whole scan is returned at least once; keys added or removed meanwhile may
/// or may not be; expired keys never are.
#[derive(Debug, Clone)]
pub struct Scan {
    prefix: Vec<u8>,
    count: u32,
    cursor: u64,
    done: bool,
}

impl Scan {
    /// A scan from the start. `count` is a hint of keys per page (the server caps it).
    pub fn new(prefix: &[u8], count: u32) -> Scan {
        Scan::resume(prefix, count, 0)
    }

    /// A scan that goes on from `cursor` (a page's `cursor()`, kept by the caller).
    pub fn resume(prefix: &[u8], count: u32, cursor: u64) -> Scan {
        Scan {
            prefix: prefix.to_vec(),
            count,
            cursor,
            done: false,
        }
    }

    /// Where the next page starts.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next page of keys (possibly empty), or None when the scan is over.
    pub async fn next_page(
        &mut self,
        client: &mut Client,
    ) -> Result<Option<Vec<Vec<u8>>>, ClientError> {
        if self.done {
            return Ok(None);
        }
        let (next, keys) = client
            .scan_step(self.cursor, &self.prefix, self.count)
            .await?;
        self.cursor = next;
        self.done = next == 0;
        Ok(Some(keys))
    }
}

impl Client {
    /// Puts `value` with a deadline in ms since the Unix epoch (Redis SET PXAT); a deadline
    /// already passed deletes the key.
    pub async fn put_with_deadline(
        &mut self,
        key: &[u8],
        value: &[u8],
        deadline_ms: u64,
    ) -> Result<(), ClientError> {
        let args = expire_args(deadline_ms, cond::ANY);
        expect_ok(self.single(NativeOp::put_expire(key, value, &args)).await?)
    }

    /// Puts `value` to expire `ttl` from now on this machine's clock (Redis SET PX).
    pub async fn put_with_ttl(
        &mut self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
    ) -> Result<(), ClientError> {
        self.put_with_deadline(key, value, deadline_after(ttl))
            .await
    }

    /// `put_with_deadline` under a condition: `cond::NX` (only a missing key), `cond::XX`
    /// (only an existing one) or `cond::ANY`; true if stored.
    pub async fn put_with_deadline_if(
        &mut self,
        key: &[u8],
        value: &[u8],
        deadline_ms: u64,
        condition: u8,
    ) -> Result<bool, ClientError> {
        let args = expire_args(deadline_ms, condition);
        stored(self.single(NativeOp::put_expire(key, value, &args)).await?)
    }

    /// Replaces the value and keeps the key's deadline, if it has one (Redis SET KEEPTTL).
    pub async fn put_keep_deadline(&mut self, key: &[u8], value: &[u8]) -> Result<(), ClientError> {
        let args = expire_args(KEEP_DEADLINE, cond::ANY);
        expect_ok(self.single(NativeOp::put_expire(key, value, &args)).await?)
    }

    /// Sets the deadline of an existing key (Redis PEXPIREAT; `condition` any of `cond::NX`,
    /// `XX`, `GT`, `LT`, or `ANY`); a deadline already passed deletes it. True if set; false
    /// when the key is missing or the condition failed.
    pub async fn expire(
        &mut self,
        key: &[u8],
        deadline_ms: u64,
        condition: u8,
    ) -> Result<bool, ClientError> {
        let args = expire_args(deadline_ms, condition);
        match self.single(NativeOp::expire(key, &args)).await? {
            OwnedReply::Ok(_) => Ok(true),
            OwnedReply::NotFound | OwnedReply::NotStored => Ok(false),
            other => unexpected(other),
        }
    }

    /// Removes the deadline of `key`; true if it had one (Redis PERSIST).
    pub async fn persist(&mut self, key: &[u8]) -> Result<bool, ClientError> {
        match self.single(NativeOp::persist(key)).await? {
            OwnedReply::Ok(_) => Ok(true),
            OwnedReply::NotFound | OwnedReply::NotStored => Ok(false),
            other => unexpected(other),
        }
    }

    /// The deadline of `key` and the time left (Redis PTTL and PEXPIRETIME in one).
    pub async fn ttl(&mut self, key: &[u8]) -> Result<Ttl, ClientError> {
        Ttl::from_reply(self.single(NativeOp::ttl(key)).await?)
    }

    /// True if `key` exists (an expired key does not).
    pub async fn exists(&mut self, key: &[u8]) -> Result<bool, ClientError> {
        match self.single(NativeOp::exists(key)).await? {
            OwnedReply::Ok(_) => Ok(true),
            OwnedReply::NotFound => Ok(false),
            other => unexpected(other),
        }
    }

    /// The type of `key`'s value ("string": the only type), `None` if it does not exist.
    pub async fn type_of(&mut self, key: &[u8]) -> Result<Option<String>, ClientError> {
        match self.single(NativeOp::type_of(key)).await? {
            OwnedReply::Ok(name) => Ok(Some(String::from_utf8_lossy(&name).into_owned())),
            OwnedReply::NotFound => Ok(None),
            other => unexpected(other),
        }
    }

    /// A scan of the keys starting with `prefix` (empty: every key), about `count` keys a
    /// page; call `next_page` on it until it returns None.
    pub fn scan(&self, prefix: &[u8], count: u32) -> Scan {
        Scan::new(prefix, count)
    }

    /// One page of a scan: the cursor to go on from (0: done) and the keys. Sent to the shard
    /// in the cursor, so the step costs the server no hop.
    pub async fn scan_step(
        &mut self,
        cursor: u64,
        prefix: &[u8],
        count: u32,
    ) -> Result<(u64, Vec<Vec<u8>>), ClientError> {
        let args = scan_args(cursor, count);
        match self.single(NativeOp::scan(prefix, &args)).await? {
            OwnedReply::Ok(data) => {
                let page = ScanReply::parse(&data).ok_or_else(|| {
                    ClientError::Protocol(format!("a malformed scan reply of {} bytes", data.len()))
                })?;
                Ok((page.next_cursor, page.keys().map(<[u8]>::to_vec).collect()))
            }
            other => unexpected(other),
        }
    }
}
