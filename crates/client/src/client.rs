//! The async client: one connection per shard, batches split by shard and sent concurrently.
//!
//! ```text
//!   Client ── conns[0] ── TCP (ATTACH 0) ──> shard 0's thread ┐
//!          ── conns[1] ── TCP (ATTACH 1) ──> shard 1's thread │ no cross-thread hop
//!          ── conns[n] ── TCP (port n)   ──> shard n's thread ┘ on the server
//!
//!   run(batch): group by shard ─> encode frames ─> connect missing shards ─> poll every
//!               shard's round from this task (write + read) ─> results by index
//! ```
//!
//! Reconnect policy: a connection that fails (I/O error, close, time-out, malformed reply) is
//! dropped, and the next call that needs its shard opens a new one (HELLO and ATTACH again).
//! A request in flight on a connection that broke fails with `ClientError::ConnectionLost`,
//! because its writes may or may not have been applied, unless every operation it had on that
//! connection was read-only (get, reduce, filter): those are resent once on a new connection
//! (`ClientConfig::retry_read_only`). Time-outs are never retried. A call whose future is
//! dropped before it finishes (cancelled by the caller) leaves its connections in an unknown
//! state, so the next call replaces them.
//!
//! Goals: the hot path (`run`) allocates nothing once its buffers have grown, makes one write
//! and usually one read system call per shard, and checks every reply.
//! Non-goals: sharing one client between tasks (`&mut self`: open one client per task, as
//! each holds its own connections); cluster topologies beyond one server's shard map.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::task::Poll;

use directkv_proto::native::{
    func, parse_scan_args, scan_cursor_shard, ElemCode, NativeLimits, NativeOp, OpCode, ShardMap,
    SHARD_PORT_ATTACH,
};
use tokio::net::TcpStream;
use xxhash_rust::xxh3::xxh3_64;

use crate::batch::{Batch, Staging};
use crate::config::ClientConfig;
use crate::conn;
use crate::error::{ClientError, TimeoutKind};
use crate::reply::{OwnedReply, Replies};
use crate::round::{RoundError, ShardRound};

/// The outcome of a compare-and-swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasOutcome {
    /// The new value was written.
    pub swapped: bool,
    /// The value before the operation (when swapped, the expected value; empty if missing).
    pub previous: Vec<u8>,
}

/// An async directkv client (see the module comment for the connection and retry policy).
pub struct Client {
    addr: SocketAddr,
    config: ClientConfig,
    limits: NativeLimits,
    shard_map: ShardMap,
    server_name: String,
    conns: Vec<Option<TcpStream>>,
    rounds: Vec<ShardRound>,
    /// Shards with operations in the current batch.
    active: Vec<u16>,
    /// Shards whose round failed and will be retried.
    retry: Vec<u16>,
    staging: Staging,
    /// Replies of the single-operation methods.
    scratch: Replies,
    next_request_id: u32,
    /// A request was on the connections of `active` when its future was dropped (the caller
    /// cancelled it): those connections may still carry its frames and replies.
    interrupted: bool,
}

impl Client {
    /// Connects to the server at `addr`: HELLO on the main port (limits, shard map), then one
    /// connection per shard bound to that shard's thread.
    pub async fn connect(
        addr: impl tokio::net::ToSocketAddrs,
        config: ClientConfig,
    ) -> Result<Client, ClientError> {
        let addr = tokio::net::lookup_host(addr).await?.next().ok_or_else(|| {
            ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the address resolved to nothing",
            ))
        })?;
        let after = config.connect_timeout;
        let timed_out = ClientError::Timeout {
            kind: TimeoutKind::Connect,
            after,
        };
        let (main, reply) = tokio::time::timeout(after, async {
            let mut s = conn::open(addr).await?;
            let reply = conn::hello(&mut s, &config).await?;
            Ok::<_, ClientError>((s, reply))
        })
        .await
        .map_err(|_| timed_out)??;
        let shards = reply.shard_map.ports.len();
        let mut client = Client {
            addr,
            config,
            limits: reply.limits,
            shard_map: reply.shard_map,
            server_name: reply.server_name,
            conns: (0..shards).map(|_| None).collect(),
            rounds: (0..shards).map(|_| ShardRound::default()).collect(),
            active: Vec::with_capacity(shards),
            retry: Vec::with_capacity(shards),
            staging: Staging::default(),
            scratch: Replies::new(),
            next_request_id: 1,
            interrupted: false,
        };
        // The main connection becomes shard 0's when shard 0 has no port of its own.
        if client.shard_map.ports[0] == SHARD_PORT_ATTACH {
            let mut main = main;
            let timed_out = ClientError::Timeout {
                kind: TimeoutKind::Connect,
                after,
            };
            tokio::time::timeout(after, client.bind(&mut main, 0))
                .await
                .map_err(|_| timed_out)??;
            client.conns[0] = Some(main);
        }
        for shard in 0..shards as u16 {
            client.ensure_connected(shard).await?;
        }
        Ok(client)
    }

    /// The server's limits, from its HELLO reply.
    pub fn limits(&self) -> &NativeLimits {
        &self.limits
    }

    /// The server's shard map, from its HELLO reply.
    pub fn shard_map(&self) -> &ShardMap {
        &self.shard_map
    }

    /// The server's name and version, e.g. "directkv 0.1.0".
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// The shard that owns `key`.
    pub fn shard_of(&self, key: &[u8]) -> u16 {
        // One shard owns every key: skip hashing, which is a few percent of a batch's cost.
        if self.shard_map.ports.len() == 1 {
            return 0;
        }
        self.shard_map.shard_of_hash(xxh3_64(key))
    }

    /// Shards with an open connection right now (a broken one is reopened on its next use).
    pub fn connected_shards(&self) -> usize {
        self.conns.iter().filter(|c| c.is_some()).count()
    }

    /// Starts a batch.
    pub fn batch(&mut self) -> Batch<'_> {
        Batch::new(self)
    }

    pub(crate) fn staging_mut(&mut self) -> &mut Staging {
        &mut self.staging
    }

    pub(crate) fn staged_len(&self) -> usize {
        self.staging.ops.len()
    }

    pub(crate) fn stage(&mut self, op: &NativeOp<'_>) -> usize {
        let shard = if op.kind == OpCode::Scan {
            // A scan goes to the shard in its cursor (one the server has no answers it).
            parse_scan_args(op.arg)
                .map(|(cursor, _)| scan_cursor_shard(cursor))
                .filter(|&s| usize::from(s) < self.shard_map.ports.len())
                .unwrap_or(0)
        } else {
            self.shard_of(op.key)
        };
        self.staging.push(op, shard)
    }

    /// After HELLO on `s`: binds it to `shard` with ATTACH (the connection keeps its
    /// authentication on the shard's thread).
    async fn bind(&self, s: &mut TcpStream, shard: u16) -> Result<(), ClientError> {
        conn::attach(s, shard).await
    }

    /// Opens the connection of `shard` unless it is open.
    async fn ensure_connected(&mut self, shard: u16) -> Result<(), ClientError> {
        if self.conns[usize::from(shard)].is_some() {
            return Ok(());
        }
        let after = self.config.connect_timeout;
        let s = tokio::time::timeout(after, self.open_shard(shard))
            .await
            .map_err(|_| ClientError::Timeout {
                kind: TimeoutKind::Connect,
                after,
            })??;
        self.conns[usize::from(shard)] = Some(s);
        Ok(())
    }

    async fn open_shard(&self, shard: u16) -> Result<TcpStream, ClientError> {
        let port = self.shard_map.ports[usize::from(shard)];
        let addr = if port == SHARD_PORT_ATTACH {
            self.addr
        } else {
            SocketAddr::new(self.addr.ip(), port)
        };
        let mut s = conn::open(addr).await?;
        let reply = conn::hello(&mut s, &self.config).await?;
        if reply.shard_map != self.shard_map {
            return Err(ClientError::Protocol(format!(
                "the server's shard map changed from {} to {} shards; connect a new client",
                self.shard_map.ports.len(),
                reply.shard_map.ports.len()
            )));
        }
        if port == SHARD_PORT_ATTACH {
            self.bind(&mut s, shard).await?;
        }
        Ok(s)
    }

    /// Executes the staged batch into `replies` and empties the staging area.
    pub(crate) async fn run(&mut self, replies: &mut Replies) -> Result<(), ClientError> {
        let result = self.run_staged(replies).await;
        self.staging.clear();
        result
    }

    async fn run_staged(&mut self, replies: &mut Replies) -> Result<(), ClientError> {
        if self.interrupted {
            // Replies of the abandoned request would be taken for this one's.
            for &s in &self.active {
                self.conns[usize::from(s)] = None;
            }
            self.interrupted = false;
        }
        let n = self.staging.ops.len();
        if n > self.config.batch_ops_max {
            return Err(ClientError::BatchTooLarge {
                ops: n,
                max: self.config.batch_ops_max,
            });
        }
        replies.reset(n);
        for r in &mut self.rounds {
            r.order.clear();
        }
        for (i, op) in self.staging.ops.iter().enumerate() {
            self.rounds[usize::from(op.shard)].order.push(i as u32);
        }
        self.active.clear();
        for (shard, r) in self.rounds.iter_mut().enumerate() {
            if !r.order.is_empty() {
                r.encode(&self.staging, &self.limits, &mut self.next_request_id)?;
                self.active.push(shard as u16);
            }
        }
        for i in 0..self.active.len() {
            self.ensure_connected(self.active[i]).await?;
        }
        self.io_round(replies, self.config.retry_read_only).await?;
        if self.retry.is_empty() {
            return Ok(());
        }
        // Read-only work on broken connections: once more, on fresh connections.
        std::mem::swap(&mut self.active, &mut self.retry);
        for i in 0..self.active.len() {
            self.ensure_connected(self.active[i]).await?;
        }
        self.io_round(replies, false).await
    }

    /// Sends the active shards' frames and collects their results, all shards at once.
    /// With `allow_retry`, leaves in `self.retry` the shards whose read-only round failed on
    /// its connection instead of failing.
    async fn io_round(
        &mut self,
        replies: &mut Replies,
        allow_retry: bool,
    ) -> Result<(), ClientError> {
        self.retry.clear();
        for &s in &self.active {
            self.rounds[usize::from(s)].start(self.config.read_buffer_bytes);
        }
        let (rounds, conns, active, limits) = (
            &mut self.rounds,
            &mut self.conns,
            &self.active,
            &self.limits,
        );
        let all = poll_fn(|cx| {
            let mut pending = false;
            for &s in active {
                let s = usize::from(s);
                let round = &mut rounds[s];
                if round.outcome.is_some() {
                    continue;
                }
                let Some(stream) = conns[s].as_mut() else {
                    round.outcome = Some(Err(RoundError::Other(ClientError::Protocol(
                        "no connection for an active shard".into(),
                    ))));
                    continue;
                };
                match round.poll_io(cx, stream, limits, replies) {
                    Poll::Ready(r) => round.outcome = Some(r),
                    Poll::Pending => pending = true,
                }
            }
            if pending {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        });
        self.interrupted = true;
        let timed_out = match self.config.request_timeout {
            Some(after) => tokio::time::timeout(after, all).await.err().map(|_| after),
            None => {
                all.await;
                None
            }
        };
        self.interrupted = false;
        let mut error = None;
        for &s in &self.active {
            let i = usize::from(s);
            let round = &mut self.rounds[i];
            match round.outcome.take() {
                Some(Ok(())) => {}
                None => self.conns[i] = None,
                Some(Err(RoundError::Io(source))) => {
                    self.conns[i] = None;
                    if allow_retry && round.read_only {
                        self.retry.push(s);
                    } else {
                        error.get_or_insert(ClientError::ConnectionLost { shard: s, source });
                    }
                }
                Some(Err(RoundError::Other(e))) => {
                    // The stream may hold more replies that would be taken for the next
                    // request's: start over on a new connection.
                    self.conns[i] = None;
                    error.get_or_insert(e);
                }
            }
        }
        if let Some(after) = timed_out {
            self.retry.clear();
            return Err(ClientError::Timeout {
                kind: TimeoutKind::Request,
                after,
            });
        }
        error.map_or(Ok(()), Err)
    }

    /// Runs one operation and returns its owned reply.
    pub(crate) async fn single(&mut self, op: NativeOp<'_>) -> Result<OwnedReply, ClientError> {
        self.staging.clear();
        self.stage(&op);
        let mut replies = std::mem::take(&mut self.scratch);
        let result = self.run(&mut replies).await;
        let reply = result.map(|()| replies.get(0).to_owned());
        self.scratch = replies;
        reply
    }

    /// The value of `key`, `None` if it does not exist.
    pub async fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        maybe_value(self.single(NativeOp::get(key)).await?)
    }

    /// Inserts or replaces.
    pub async fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), ClientError> {
        done(self.single(NativeOp::put(key, value)).await?)
    }

    /// Inserts only if `key` is missing; true if stored.
    pub async fn put_nx(&mut self, key: &[u8], value: &[u8]) -> Result<bool, ClientError> {
        stored(self.single(NativeOp::put_nx(key, value)).await?)
    }

    /// Replaces only if `key` exists; true if stored.
    pub async fn put_xx(&mut self, key: &[u8], value: &[u8]) -> Result<bool, ClientError> {
        stored(self.single(NativeOp::put_xx(key, value)).await?)
    }

    /// Deletes `key`; true if it existed.
    pub async fn delete(&mut self, key: &[u8]) -> Result<bool, ClientError> {
        found(self.single(NativeOp::delete(key)).await?)
    }

    /// Writes `new` if the whole value equals `expected`.
    pub async fn cas(
        &mut self,
        key: &[u8],
        expected: &[u8],
        new: &[u8],
    ) -> Result<CasOutcome, ClientError> {
        match self.single(NativeOp::cas(key, expected, new)).await? {
            OwnedReply::Ok(previous) => Ok(CasOutcome {
                swapped: true,
                previous,
            }),
            OwnedReply::CasMismatch(previous) => Ok(CasOutcome {
                swapped: false,
                previous,
            }),
            other => unexpected(other),
        }
    }

    /// `cas` answered with its status only; true if swapped.
    pub async fn cas_no_return(
        &mut self,
        key: &[u8],
        expected: &[u8],
        new: &[u8],
    ) -> Result<bool, ClientError> {
        match self
            .single(NativeOp::cas(key, expected, new).no_return())
            .await?
        {
            OwnedReply::Ok(_) => Ok(true),
            OwnedReply::CasMismatch(_) => Ok(false),
            other => unexpected(other),
        }
    }

    /// `v = func(v, delta)` on a scalar (a missing key starts at zero); the original value.
    pub async fn update_s2s(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        delta: &[u8],
    ) -> Result<Vec<u8>, ClientError> {
        value_of(
            self.single(NativeOp::update_s2s(key, func, elem, delta))
                .await?,
        )
    }

    pub async fn update_s2s_no_return(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        delta: &[u8],
    ) -> Result<(), ClientError> {
        done(
            self.single(NativeOp::update_s2s(key, func, elem, delta).no_return())
                .await?,
        )
    }

    /// `e = func(e, delta)` for every element; the original vector, `None` if missing.
    pub async fn update_s2v(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        delta: &[u8],
    ) -> Result<Option<Vec<u8>>, ClientError> {
        maybe_value(
            self.single(NativeOp::update_s2v(key, func, elem, delta))
                .await?,
        )
    }

    /// `update_s2v` answered with its status only; false if the key is missing.
    pub async fn update_s2v_no_return(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        delta: &[u8],
    ) -> Result<bool, ClientError> {
        found(
            self.single(NativeOp::update_s2v(key, func, elem, delta).no_return())
                .await?,
        )
    }

    /// `e[i] = func(e[i], deltas[i])`; the original vector, `None` if missing.
    pub async fn update_v2v(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        deltas: &[u8],
    ) -> Result<Option<Vec<u8>>, ClientError> {
        maybe_value(
            self.single(NativeOp::update_v2v(key, func, elem, deltas))
                .await?,
        )
    }

    /// `update_v2v` answered with its status only; false if the key is missing.
    pub async fn update_v2v_no_return(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        deltas: &[u8],
    ) -> Result<bool, ClientError> {
        found(
            self.single(NativeOp::update_v2v(key, func, elem, deltas).no_return())
                .await?,
        )
    }

    /// Folds the vector into a scalar from `sigma`; `None` if missing.
    pub async fn reduce(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        sigma: &[u8],
    ) -> Result<Option<Vec<u8>>, ClientError> {
        maybe_value(
            self.single(NativeOp::reduce(key, func, elem, sigma))
                .await?,
        )
    }

    /// The elements `e` with `func(e, param)`; `None` if missing.
    pub async fn filter(
        &mut self,
        key: &[u8],
        func: u16,
        elem: ElemCode,
        param: &[u8],
    ) -> Result<Option<Vec<u8>>, ClientError> {
        maybe_value(
            self.single(NativeOp::filter(key, func, elem, param))
                .await?,
        )
    }

    /// Adds `delta` to a u64 counter (a missing key starts at 0); the value before.
    pub async fn add_u64(&mut self, key: &[u8], delta: u64) -> Result<u64, ClientError> {
        let d = delta.to_le_bytes();
        let v = self.update_s2s(key, func::ADD, ElemCode::U64, &d).await?;
        let bytes: [u8; 8] = v.as_slice().try_into().map_err(|_| {
            ClientError::Protocol(format!("a u64 update returned {} bytes", v.len()))
        })?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Appends `value` to the value of `key` (a missing key starts empty); the new length.
    pub async fn append(&mut self, key: &[u8], value: &[u8]) -> Result<u64, ClientError> {
        let v = value_of(self.single(NativeOp::append(key, value)).await?)?;
        let bytes: [u8; 8] = v.as_slice().try_into().map_err(|_| {
            ClientError::Protocol(format!("append returned {} bytes, not a u64", v.len()))
        })?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Adds `delta` to a decimal integer string (Redis INCRBY; a missing key is 0); the new
    /// value.
    pub async fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, ClientError> {
        let d = delta.to_le_bytes();
        parse_text(&value_of(self.single(NativeOp::incr_by(key, &d)).await?)?)
    }

    /// Adds `delta` to a decimal float string (Redis INCRBYFLOAT); the new value.
    pub async fn incr_by_float(&mut self, key: &[u8], delta: f64) -> Result<f64, ClientError> {
        let d = delta.to_le_bytes();
        parse_text(&value_of(
            self.single(NativeOp::incr_by_float(key, &d)).await?,
        )?)
    }

    /// `add_u64` answered with its status only.
    pub async fn add_u64_no_return(&mut self, key: &[u8], delta: u64) -> Result<(), ClientError> {
        let d = delta.to_le_bytes();
        self.update_s2s_no_return(key, func::ADD, ElemCode::U64, &d)
            .await
    }
}

/// The decimal text a string operation returned, parsed.
fn parse_text<T: std::str::FromStr>(data: &[u8]) -> Result<T, ClientError> {
    std::str::from_utf8(data)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| ClientError::Protocol(format!("not a decimal number: {data:?}")))
}

pub(crate) fn unexpected<T>(r: OwnedReply) -> Result<T, ClientError> {
    match r {
        OwnedReply::Error(e) => Err(ClientError::Op(e)),
        other => Err(ClientError::Protocol(format!(
            "unexpected result for this operation: {other:?}"
        ))),
    }
}

fn maybe_value(r: OwnedReply) -> Result<Option<Vec<u8>>, ClientError> {
    match r {
        OwnedReply::Ok(v) => Ok(Some(v)),
        OwnedReply::NotFound => Ok(None),
        other => unexpected(other),
    }
}

fn value_of(r: OwnedReply) -> Result<Vec<u8>, ClientError> {
    match r {
        OwnedReply::Ok(v) => Ok(v),
        other => unexpected(other),
    }
}

pub(crate) fn done(r: OwnedReply) -> Result<(), ClientError> {
    value_of(r).map(|_| ())
}

fn found(r: OwnedReply) -> Result<bool, ClientError> {
    match r {
        OwnedReply::Ok(_) => Ok(true),
        OwnedReply::NotFound => Ok(false),
        other => unexpected(other),
    }
}

pub(crate) fn stored(r: OwnedReply) -> Result<bool, ClientError> {
    match r {
        OwnedReply::Ok(_) => Ok(true),
        OwnedReply::NotStored => Ok(false),
        other => unexpected(other),
    }
}
