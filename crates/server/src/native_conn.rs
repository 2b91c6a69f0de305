//! The native protocol on a TCP connection: length-prefixed frames of many operations, answered
//! in order (docs/protocol.md). Each REQUEST frame becomes one batch per shard, like a RESP read.
//!
//! With `requirepass`, the client must send HELLO with the password before anything else; a
//! connection that does not gets ERROR AuthRequired (a wrong password: AuthFailed), both
//! flagged CLOSING, and is closed.

use std::time::Duration;

use directkv_engine::{ElemType, Op, OpKind, Results, Status};
use directkv_proto::native::{
    self, encode_response, encode_response_frame, encode_response_iter, EncodeError, ErrorCode,
    ErrorReply, HelloReply, NativeLimits, NativeOp, Request, Response, ResponseFrame, ResponseOp,
    ShardMap, HASH_XXH3_64, SHARD_PORT_ATTACH,
};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::batch::shard_of;
use crate::plan::Pending;
use crate::shard::ShardCtx;

const READ_CHUNK_BYTES: usize = 64 << 10;

/// An operation that failed before reaching the engine (its status code), or its index in the
/// plan.
pub(crate) enum Slot {
    Planned(usize),
    Failed(u8),
}

/// Serves a native connection; `authenticated`: it already passed HELLO on the shard that
/// handed it over (ATTACH keeps the authentication, as a Redis user would expect).
pub async fn serve(ctx: &ShardCtx, mut s: TcpStream, mut input: Vec<u8>, authenticated: bool) {
    let limits = NativeLimits {
        key_len_max: ctx.cfg.key_len_max as u8,
        value_len_max: ctx.cfg.value_len_max as u32,
        ..NativeLimits::DEFAULT
    };
    let mut authenticated = authenticated || ctx.cfg.requirepass.is_none();
    let mut pending = Pending::new(ctx.shards());
    let mut slots: Vec<Slot> = Vec::new();
    let mut local = Local::default();
    let mut out = Vec::with_capacity(READ_CHUNK_BYTES);
    let write_timeout = Duration::from_secs(ctx.cfg.reply_write_timeout_secs);
    let mut handoff: Option<usize> = None;
    // The operations of the frame being served, parsed once (by the validating pass); empty
    // between reads, so the allocation outlives the borrows of `input`.
    let mut parsed_store: Vec<NativeOp<'static>> = Vec::new();
    loop {
        let mut used = 0;
        let mut close = false;
        let mut parsed = reuse(std::mem::take(&mut parsed_store));
        loop {
            parsed.clear();
            match native::decode_request_ops(&input[used..], &limits, &mut parsed) {
                Ok(None) => break,
                Err(e) => {
                    let frame = ResponseFrame {
                        request_id: e.request_id,
                        body: Response::Error(e.reply()),
                    };
                    let _ = encode_response_frame(&frame, &limits, &mut out);
                    match e.skip {
                        Some(n) => used += n,
                        None => {
                            close = true;
                            break;
                        }
                    }
                }
                Ok(Some((frame, n))) => {
                    used += n;
                    let id = frame.request_id;
                    match frame.body {
                        Request::Hello(h) => {
                            if let Some(want) = &ctx.cfg.requirepass {
                                authenticated = want.as_bytes() == h.password;
                            }
                            if !authenticated {
                                error_frame(&mut out, id, ErrorCode::AuthFailed, &limits);
                                close = true;
                                break;
                            }
                            let reply = HelloReply {
                                limits,
                                shard_map: ShardMap {
                                    hash: HASH_XXH3_64,
                                    ports: vec![SHARD_PORT_ATTACH; ctx.shards()],
                                },
                                server_name: format!("directkv {}", env!("CARGO_PKG_VERSION")),
                            };
                            let _ = encode_response_frame(
                                &ResponseFrame {
                                    request_id: id,
                                    body: Response::Hello(reply),
                                },
                                &limits,
                                &mut out,
                            );
                        }
                        _ if !authenticated => {
                            error_frame(&mut out, id, ErrorCode::AuthRequired, &limits);
                            close = true;
                            break;
                        }
                        Request::Ping(p) => {
                            let _ = encode_response_frame(
                                &ResponseFrame {
                                    request_id: id,
                                    body: Response::Pong(p),
                                },
                                &limits,
                                &mut out,
                            );
                        }
                        Request::Attach(shard) => {
                            // The connection moves to the named shard's thread once this reply
                            // is written; the client waits for the reply before sending more.
                            let target = if (shard as usize) < ctx.shards() {
                                shard as usize
                            } else {
                                ctx.id
                            };
                            let reply = ResponseFrame {
                                request_id: id,
                                body: Response::Attach(target as u16),
                            };
                            let _ = encode_response_frame(&reply, &limits, &mut out);
                            if target != ctx.id {
                                handoff = Some(target);
                                used = input.len();
                                break;
                            }
                        }
                        Request::Ops(_) if owns_all(ctx, &parsed) => {
                            if local.run(ctx, id, &parsed, &limits, &mut out).is_err() {
                                close = true;
                                break;
                            }
                        }
                        Request::Ops(_) => {
                            pending.clear();
                            slots.clear();
                            for op in &parsed {
                                slots.push(plan_op(&mut pending, op));
                            }
                            crate::conn::execute(ctx, &mut pending).await;
                            let results: Vec<ResponseOp> = slots
                                .iter()
                                .map(|slot| match *slot {
                                    Slot::Failed(status) => ResponseOp { status, data: &[] },
                                    Slot::Planned(i) => {
                                        let (st, data) = pending.result(i);
                                        ResponseOp {
                                            status: st.code(),
                                            data,
                                        }
                                    }
                                })
                                .collect();
                            if encode_response(id, &results, &limits, &mut out).is_err() {
                                close = true;
                                break;
                            }
                        }
                    }
                }
            }
        }
        parsed_store = reuse(parsed);
        input.drain(..used);
        if !crate::conn::flush(&mut s, &mut out, write_timeout).await {
            return;
        }
        if let Some(target) = handoff {
            if let Ok(std) = s.into_std() {
                let _ = ctx.handoff[target].send(crate::shard::Incoming {
                    stream: std,
                    authenticated,
                });
            }
            return;
        }
        if close || input.len() > limits.frame_len_max as usize {
            return;
        }
        // Into the spare capacity: no zeroing of a chunk per read.
        input.reserve(READ_CHUNK_BYTES);
        match s.read_buf(&mut input).await {
            Ok(0) | Err(_) => return,
            Ok(_) => ctx.activity.touch(),
        }
    }
}

/// Appends an ERROR frame with `code`'s fixed message that announces the close which follows.
fn error_frame(out: &mut Vec<u8>, request_id: u32, code: ErrorCode, limits: &NativeLimits) {
    let frame = ResponseFrame {
        request_id,
        body: Response::Error(ErrorReply {
            code: code.code(),
            closing: true,
            op_index: None,
            message: code.message(),
        }),
    };
    let _ = encode_response_frame(&frame, limits, out);
}

/// Translates a wire operation into an engine operation (the numbers are the same; the
/// `protocol_mirrors` test keeps them so), or the status code of why it cannot be one.
fn engine_op<'a>(op: &NativeOp<'a>) -> Result<Op<'a>, u8> {
    let Some(kind) = OpKind::from_code(op.kind.code()) else {
        return Err(Status::Error(directkv_engine::OpError::UnknownFunction(0)).code());
    };
    let elem = ElemType::from_code(op.elem).map_err(|e| Status::Error(e).code())?;
    Ok(Op {
        kind,
        key: op.key,
        arg: op.arg,
        arg2: op.arg2,
        func: op.func,
        elem,
        no_return: op.is_no_return(),
    })
}

/// Adds a wire operation to the plan.
pub(crate) fn plan_op(p: &mut Pending, op: &NativeOp) -> Slot {
    match engine_op(op) {
        Ok(o) => Slot::Planned(p.op(&o)),
        Err(status) => Slot::Failed(status),
    }
}

/// The path of a REQUEST frame whose keys all belong to this connection's shard (every frame
/// with one shard, and a shard-aware client's frames with several): its operations run on the
/// engine borrowing the frame's bytes, and the response is encoded straight from the engine's
/// results, with no copy of keys and values into a plan on the way in or out.
#[derive(Default)]
struct Local {
    /// Engine operations of the frame; empty between frames (the borrow ends with the frame,
    /// the allocation is reused).
    ops: Vec<Op<'static>>,
    /// Frame positions of operations that failed translation, and their status codes.
    failed: Vec<(usize, u8)>,
    results: Results,
}

/// Whether every key of `ops` belongs to this connection's shard.
fn owns_all(ctx: &ShardCtx, ops: &[NativeOp<'_>]) -> bool {
    let shards = ctx.shards();
    shards == 1 || ops.iter().all(|op| shard_of(op.key, shards) == ctx.id)
}

impl Local {
    fn run(
        &mut self,
        ctx: &ShardCtx,
        id: u32,
        batch: &[NativeOp<'_>],
        limits: &NativeLimits,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let mut ops = reuse(std::mem::take(&mut self.ops));
        self.failed.clear();
        for (i, op) in batch.iter().enumerate() {
            match engine_op(op) {
                Ok(o) => ops.push(o),
                Err(status) => self.failed.push((i, status)),
            }
        }
        ctx.engine.borrow_mut().execute(&ops, &mut self.results);
        self.ops = reuse(ops);
        let (r, failed) = (&self.results, &self.failed);
        let mut next_failed = failed.iter().peekable();
        let mut done = 0usize;
        let replies = (0..batch.len()).map(|i| match next_failed.next_if(|f| f.0 == i) {
            Some(&(_, status)) => ResponseOp { status, data: &[] },
            None => {
                done += 1;
                ResponseOp {
                    status: r.status(done - 1).code(),
                    data: r.data(done - 1),
                }
            }
        });
        encode_response_iter(id, replies, limits, out)
    }
}

/// An empty vector with `v`'s allocation, for borrows of another lifetime (`T` and `U` are
/// one type but for a lifetime).
fn reuse<T, U>(mut v: Vec<T>) -> Vec<U> {
    debug_assert!(size_of::<T>() == size_of::<U>() && align_of::<T>() == align_of::<U>());
    v.clear();
    // Collecting from an emptied vector into one of the same layout reuses its allocation.
    v.into_iter()
        .map(|_| unreachable!("the vector is empty"))
        .collect()
}
