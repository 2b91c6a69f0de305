//! The native protocol on a TCP connection: length-prefixed frames of many operations, answered
//! in order (docs/protocol.md). The serve loop reads and decodes; each frame goes to its
//! handler: `hello`, PING, `attach` (the connection moves to another shard's thread), and
//! `ops`, where a REQUEST whose keys are all this shard's runs on the engine straight from the
//! frame (`Local`) and any other becomes one batch per shard, like a RESP read.
//!
//! With `requirepass`, the client must send HELLO with the password before anything else; a
//! connection that does not gets ERROR AuthRequired (a wrong password: AuthFailed), both
//! flagged CLOSING, and is closed.
//!
//! Malformed frames are answered with an error frame and counted (`native_protocol_errors`);
//! one that leaves the stream untrustworthy also closes the connection, counts in
//! `protocol_errors` and logs a WARN line through the server-wide rate limit (`log_limit.rs`).

use std::sync::atomic::Ordering;

use directkv_engine::{ElemType, Op, OpKind, Results, Status};
use directkv_proto::native::{
    self, encode_response_frame, encode_response_iter, encode_response_part_iter, EncodeError,
    ErrorCode, ErrorReply, Hello, HelloReply, NativeLimits, NativeOp, OpCode, Request,
    RequestFrame, Response, ResponseFrame, ResponseOp, ShardMap, HASH_XXH3_64, SHARD_PORT_ATTACH,
    TYPE_STRING,
};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::scan::Scans;
use crate::accept::{flush, shrink_idle, IDLE_BUFFER_BYTES_MAX, READ_CHUNK_BYTES};
use crate::clients::ClientHandle;
use crate::shard::dispatch::{self, shard_of, Plan};
use crate::shard::{Incoming, ShardCtx};

/// Where an operation's reply comes from: its index in the plan, the status code of why it
/// failed before reaching the engine, a type operation's read in the plan (the reply names
/// the type), or a scan's index in the frame's `Scans` (run after the plan).
pub(crate) enum Slot {
    Planned(usize),
    Failed(u8),
    Typed(usize),
    Scan(usize),
}

impl Slot {
    /// The reply of this operation.
    pub(crate) fn reply<'a>(&self, plan: &'a Plan, scans: &'a Scans) -> ResponseOp<'a> {
        match *self {
            Slot::Failed(status) => ResponseOp { status, data: &[] },
            Slot::Planned(i) => {
                let (status, data) = plan.result(i);
                ResponseOp {
                    status: status.code(),
                    data,
                }
            }
            Slot::Typed(i) => {
                let status = plan.result(i).0;
                let data = if status == Status::Ok {
                    TYPE_STRING
                } else {
                    &[]
                };
                ResponseOp {
                    status: status.code(),
                    data,
                }
            }
            Slot::Scan(k) => {
                let (status, data) = scans.result(k);
                ResponseOp { status, data }
            }
        }
    }
}

/// What the connection does after a frame.
enum Next {
    /// Serve the next frame.
    Frame,
    /// Write the replies so far and close (an error frame announced it).
    Close,
    /// Write the replies so far and move the connection to this shard (ATTACH).
    Handoff(usize),
}

/// A native connection's state between frames.
struct Conn<'c> {
    ctx: &'c ShardCtx,
    /// The limits in force: `full_limits`, or before HELLO on a server with a password their
    /// `unauthenticated` form (small frames only).
    limits: NativeLimits,
    full_limits: NativeLimits,
    authenticated: bool,
    plan: Plan,
    slots: Vec<Slot>,
    scans: Scans,
    local: Local,
    out: Vec<u8>,
    /// Reply data the request being answered in steps has produced so far.
    streamed: usize,
    /// Where the next step of that request begins (its id and first operation), if any.
    resume: Option<(u32, usize)>,
}

/// Serves a native connection whose first bytes `input` holds (read by `accept::sniff`);
/// `authenticated`: it already passed HELLO on the shard that handed it over (ATTACH keeps the
/// authentication, as a Redis user would expect).
pub(crate) async fn serve(
    ctx: &ShardCtx,
    mut s: TcpStream,
    mut input: Vec<u8>,
    authenticated: bool,
    client: &ClientHandle,
) {
    let full_limits = NativeLimits {
        key_len_max: ctx.cfg.key_len_max as u8,
        value_len_max: ctx.cfg.value_len_max as u32,
        ..NativeLimits::DEFAULT
    };
    let authenticated = authenticated || ctx.stats.live.requirepass().is_none();
    let mut c = Conn {
        ctx,
        limits: if authenticated {
            full_limits
        } else {
            full_limits.unauthenticated()
        },
        full_limits,
        authenticated,
        plan: Plan::new(ctx.shards()),
        slots: Vec::new(),
        scans: Scans::default(),
        local: Local::default(),
        out: Vec::with_capacity(READ_CHUNK_BYTES),
        streamed: 0,
        resume: None,
    };
    let mut gate = crate::accept::ReplyGate::new(ctx);
    // The operations of the frame being served, parsed once (by the validating pass); empty
    // between reads, so the allocation outlives the borrows of `input`.
    let mut parsed_store: Vec<NativeOp<'static>> = Vec::new();
    loop {
        let mut used = 0;
        let mut next = Next::Frame;
        let mut parsed = reuse(std::mem::take(&mut parsed_store));
        loop {
            parsed.clear();
            match native::decode_request_ops(&input[used..], &c.limits, &mut parsed) {
                Ok(None) => break,
                Err(e) => {
                    ctx.stats
                        .native_protocol_errors
                        .fetch_add(1, Ordering::Relaxed);
                    if e.skip.is_none() {
                        ctx.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                        crate::log_limit::protocol_error(&ctx.stats, || {
                            tracing::warn!(shard = ctx.id, error = ?e, "closing a native connection after a protocol error");
                        });
                    }
                    let frame = ResponseFrame {
                        request_id: e.request_id,
                        body: Response::Error(e.reply()),
                    };
                    let _ = encode_response_frame(&frame, &c.limits, &mut c.out);
                    match e.skip {
                        Some(n) => used += n,
                        None => {
                            next = Next::Close;
                            break;
                        }
                    }
                }
                Ok(Some((frame, n))) => {
                    used += n;
                    next = c.frame(frame, &parsed).await;
                    client.account(input.capacity() + c.capacity_bytes());
                    // A large read-only request goes on in steps: the replies so far are
                    // written (a client that does not take them is disconnected, as below)
                    // and the shard's other clients get their turn before the next step.
                    while let Some((id, from)) = c.resume.take() {
                        if !flush(ctx, &mut s, &mut c.out, &mut gate).await {
                            return;
                        }
                        tokio::task::yield_now().await;
                        next = c.ops_from(id, &parsed, from).await;
                        client.account(input.capacity() + c.capacity_bytes());
                    }
                    // The RESP bound on a client that does not read its replies: they are
                    // written before more frames are served, and one that does not take
                    // them within `reply_write_timeout_secs` is disconnected.
                    if c.out.len() >= ctx.cfg.conn_output_bytes_max
                        && !flush(ctx, &mut s, &mut c.out, &mut gate).await
                    {
                        return;
                    }
                    match next {
                        Next::Frame => {}
                        Next::Close => break,
                        Next::Handoff(_) => {
                            used = input.len();
                            break;
                        }
                    }
                }
            }
        }
        parsed_store = reuse(parsed);
        input.drain(..used);
        if !flush(ctx, &mut s, &mut c.out, &mut gate).await {
            return;
        }
        match next {
            Next::Handoff(target) => {
                if let Ok(std) = s.into_std() {
                    let _ = ctx.handoff[target].send(Incoming {
                        stream: std,
                        authenticated: c.authenticated,
                        protocol: crate::accept::Protocol::Sniff,
                    });
                }
                return;
            }
            Next::Close => return,
            Next::Frame => {}
        }
        if input.len() > c.limits.frame_len_max as usize {
            return;
        }
        // Waiting for input: what a large request grew is given back (issue 19 item 6).
        shrink_idle(&mut input);
        c.shrink_idle();
        // Into the spare capacity: no zeroing of a chunk per read.
        input.reserve(READ_CHUNK_BYTES);
        client.account(input.capacity() + c.capacity_bytes());
        match crate::accept::read_more(ctx, s.read_buf(&mut input)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                ctx.activity.touch();
                // For the idle sweeper (CONFIG SET timeout).
                client.entry().touch();
            }
        }
        client.account(input.capacity() + c.capacity_bytes());
    }
}

impl Conn<'_> {
    /// Bytes the connection's buffers hold allocated besides its input, for the accounting of
    /// client memory.
    fn capacity_bytes(&self) -> usize {
        self.out.capacity()
            + self.plan.capacity_bytes()
            + self.local.results.capacity_bytes()
            + self.slots.capacity() * size_of::<Slot>()
            + self.scans.capacity_bytes()
    }

    /// Gives back what a large request grew, once its replies are written.
    fn shrink_idle(&mut self) {
        shrink_idle(&mut self.out);
        if self.plan.capacity_bytes() > IDLE_BUFFER_BYTES_MAX {
            self.plan.release(READ_CHUNK_BYTES);
        }
        if self.local.results.capacity_bytes() > IDLE_BUFFER_BYTES_MAX {
            self.local.results.release(READ_CHUNK_BYTES);
        }
        if self.scans.capacity_bytes() > IDLE_BUFFER_BYTES_MAX {
            self.scans.shrink(READ_CHUNK_BYTES);
        }
    }

    /// Answers one request frame (`parsed`: its operations, if it is a REQUEST).
    #[inline]
    async fn frame(&mut self, frame: RequestFrame<'_>, parsed: &[NativeOp<'_>]) -> Next {
        let id = frame.request_id;
        match frame.body {
            Request::Hello(h) => self.hello(id, h),
            _ if !self.authenticated => {
                error_frame(&mut self.out, id, ErrorCode::AuthRequired, &self.limits);
                Next::Close
            }
            Request::Ping(p) => {
                let pong = ResponseFrame {
                    request_id: id,
                    body: Response::Pong(p),
                };
                let _ = encode_response_frame(&pong, &self.limits, &mut self.out);
                Next::Frame
            }
            Request::Attach(shard) => self.attach(id, shard),
            Request::Ops(_) => self.ops(id, parsed).await,
        }
    }

    /// HELLO: checks the password (with `requirepass`) and answers with the limits and the
    /// shard map.
    fn hello(&mut self, id: u32, h: Hello<'_>) -> Next {
        // Live: CONFIG SET requirepass applies to the next HELLO.
        if let Some(want) = &self.ctx.stats.live.requirepass() {
            self.authenticated = want.as_bytes() == h.password;
        }
        if !self.authenticated {
            error_frame(&mut self.out, id, ErrorCode::AuthFailed, &self.limits);
            return Next::Close;
        }
        self.limits = self.full_limits;
        let reply = HelloReply {
            limits: self.limits,
            shard_map: ShardMap {
                hash: HASH_XXH3_64,
                ports: vec![SHARD_PORT_ATTACH; self.ctx.shards()],
            },
            server_name: format!("directkv {}", env!("CARGO_PKG_VERSION")),
        };
        let frame = ResponseFrame {
            request_id: id,
            body: Response::Hello(reply),
        };
        let _ = encode_response_frame(&frame, &self.limits, &mut self.out);
        Next::Frame
    }

    /// ATTACH: the connection moves to the named shard's thread once this reply is written;
    /// the client waits for the reply before sending more. An unknown shard keeps it here.
    fn attach(&mut self, id: u32, shard: u16) -> Next {
        let ctx = self.ctx;
        let target = if (shard as usize) < ctx.shards() {
            shard as usize
        } else {
            ctx.id
        };
        let reply = ResponseFrame {
            request_id: id,
            body: Response::Attach(target as u16),
        };
        let _ = encode_response_frame(&reply, &self.limits, &mut self.out);
        if target != ctx.id {
            Next::Handoff(target)
        } else {
            Next::Frame
        }
    }

    /// REQUEST: runs the operations on this shard's engine straight from the frame when it
    /// owns every key (`Local`), else through the dispatch plan, one batch per shard.
    #[inline]
    async fn ops(&mut self, id: u32, parsed: &[NativeOp<'_>]) -> Next {
        self.streamed = 0;
        self.ops_from(id, parsed, 0).await
    }

    /// Runs the operations of the frame from position `from` on: all of them, or, for a request
    /// that only reads, one step of its response (see `Step`). When a step ends early,
    /// `self.resume` says where the next begins; the serve loop writes the replies so far out
    /// and yields before it calls this again, so one request never holds the shard, or memory,
    /// for more than a step.
    async fn ops_from(&mut self, id: u32, parsed: &[NativeOp<'_>], from: usize) -> Next {
        let ctx = self.ctx;
        let ops = &parsed[from..];
        let step = Step::new(ctx, ops, self.streamed);
        let done = if owns_all(ctx, ops) && ops.iter().all(|op| answered_by_engine(op.kind)) {
            self.local.execute(ctx, ops, step.cap);
            let data = self.local.results.data_bytes();
            step.encode(
                id,
                self.local.replies(ops.len()),
                data,
                &self.limits,
                &mut self.out,
            )
        } else {
            self.plan.clear();
            self.slots.clear();
            self.scans.clear();
            for op in ops {
                self.slots.push(plan_op(&mut self.plan, op));
            }
            self.plan.set_results_cap(step.cap);
            dispatch::execute(ctx, &mut self.plan).await;
            // Scans run after the frame's other operations (they see its writes), within
            // what is left of the request's reply budget.
            let budget = match step.cap {
                0 => ctx.cfg.results_bytes_max,
                cap => cap,
            };
            let planned = planned_bytes(&self.slots, &self.plan);
            for (slot, op) in self.slots.iter_mut().zip(ops) {
                if let Slot::Scan(k) = slot {
                    let used = planned + self.scans.data_bytes();
                    let left = budget.saturating_sub(used);
                    *k = self
                        .scans
                        .run(ctx, op.key, op.arg, left, op.is_no_return())
                        .await;
                }
            }
            let (plan, scans) = (&self.plan, &self.scans);
            let replies = self.slots.iter().map(|slot| slot.reply(plan, scans));
            step.encode(
                id,
                replies,
                planned + scans.data_bytes(),
                &self.limits,
                &mut self.out,
            )
        };
        match done {
            Ok(StepEnd::Done) => Next::Frame,
            Ok(StepEnd::Continue { ops: n, bytes }) => {
                self.streamed += bytes;
                self.resume = Some((id, from + n));
                Next::Frame
            }
            Err(_) => Next::Close,
        }
    }
}

/// Reply data of one step of a large read-only response (or `value_len_max` if larger): about
/// a millisecond of the shard's time to copy, encode and write, which bounds how long the
/// shard's other clients wait behind a large request.
const RESPONSE_STEP_BYTES: usize = 1 << 20;

/// One step of a response. A REQUEST that only reads (GETs, reductions, filters) and could
/// produce more reply data than `RESPONSE_STEP_BYTES` is answered in steps of about that much
/// (issue 19 item 6): the step's batch runs with its reply data capped there, the results
/// before the first operation the cap refused are sent (frames flagged MORE) and the rest run
/// again in the next step. Re-running is safe because nothing in the request writes; so a
/// frame of 1024 GETs of a 1 MiB value costs the shard a few milliseconds at a time instead
/// of copying and encoding 64 MiB at once while its other clients wait, and the connection
/// holds one step of results, not the whole response. The request's total stays bounded by
/// `results_bytes_max` (the last step runs with what is left of it, and its refusals are
/// final). A request that writes runs in one step, as before: its replies are small.
struct Step {
    /// Cap on the step's reply data (0: none, the engine's `results_bytes_max`).
    cap: usize,
    /// Whether the step may end early (a read-only request with budget left after it).
    streams: bool,
    /// Reply data below which no operation can have been refused for the cap.
    refusal_possible_above: usize,
}

/// How a step ended.
enum StepEnd {
    Done,
    /// The first `ops` operations were answered (`bytes` of data); the rest follow.
    Continue {
        ops: usize,
        bytes: usize,
    },
}

impl Step {
    fn new(ctx: &ShardCtx, ops: &[NativeOp<'_>], streamed: usize) -> Step {
        let read_only = ops
            .iter()
            .all(|op| OpKind::from_code(op.kind.code()).is_none_or(|kind| !kind.writes()));
        if !read_only {
            return Step {
                cap: 0,
                streams: false,
                refusal_possible_above: usize::MAX,
            };
        }
        let step = RESPONSE_STEP_BYTES.max(ctx.cfg.value_len_max);
        let left = ctx.cfg.results_bytes_max.saturating_sub(streamed);
        // A cap of at least `value_len_max` lets the first operation of every step through,
        // so each step answers at least one.
        let (cap, streams) = if left > step && ops.len() > 1 {
            (step, true)
        } else {
            (left.max(1), false)
        };
        Step {
            cap,
            streams,
            refusal_possible_above: cap.saturating_sub(ctx.cfg.value_len_max),
        }
    }

    /// Encodes the step's replies into `out`: all of them, or those before the first refused
    /// for the step's cap, flagged MORE.
    fn encode<'d>(
        &self,
        id: u32,
        replies: impl Iterator<Item = ResponseOp<'d>> + Clone,
        data_bytes: usize,
        limits: &NativeLimits,
        out: &mut Vec<u8>,
    ) -> Result<StepEnd, EncodeError> {
        if self.streams && data_bytes > self.refusal_possible_above {
            let refused = reply_too_large_code();
            if let Some(n) = replies.clone().position(|r| r.status == refused) {
                if n > 0 {
                    let bytes = replies.clone().take(n).map(|r| r.data.len()).sum();
                    encode_response_part_iter(id, replies.take(n), limits, out)?;
                    return Ok(StepEnd::Continue { ops: n, bytes });
                }
            }
        }
        encode_response_iter(id, replies, limits, out)?;
        Ok(StepEnd::Done)
    }
}

/// The status code of `OpError::ReplyTooLarge`.
fn reply_too_large_code() -> u8 {
    Status::Error(directkv_engine::OpError::ReplyTooLarge { max: 0 }).code()
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
/// `protocol_mirrors` test keeps them so; exists and type are a get answered with its status
/// only), or the status code of why it cannot be one.
fn engine_op<'a>(op: &NativeOp<'a>) -> Result<Op<'a>, u8> {
    let (code, no_return) = match op.kind {
        OpCode::Exists | OpCode::Type => (OpCode::Get.code(), true),
        kind => (kind.code(), op.is_no_return()),
    };
    let Some(kind) = OpKind::from_code(code) else {
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
        no_return,
    })
}

/// Reply data of the planned operations of `slots` (scans not yet run count nothing). Not
/// `Plan::data_bytes`, which also counts what a shard with no operation in this plan returned
/// for the previous one.
pub(crate) fn planned_bytes(slots: &[Slot], plan: &Plan) -> usize {
    slots
        .iter()
        .map(|slot| match *slot {
            Slot::Planned(i) | Slot::Typed(i) => plan.result(i).1.len(),
            Slot::Failed(_) | Slot::Scan(_) => 0,
        })
        .sum()
}

/// Adds a wire operation to the plan (a scan: a place for its result, run after the plan).
pub(crate) fn plan_op(p: &mut Plan, op: &NativeOp) -> Slot {
    if op.kind == OpCode::Scan {
        return Slot::Scan(0);
    }
    match engine_op(op) {
        Ok(o) if op.kind == OpCode::Type && !op.is_no_return() => Slot::Typed(p.op(&o)),
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

/// Whether the engine's result is the operation's reply as it is: every engine operation, and
/// exists (a get answered with its status). Type words its reply and scan is no engine
/// operation: a frame with either takes the plan's path.
fn answered_by_engine(kind: OpCode) -> bool {
    kind.is_engine() || kind == OpCode::Exists
}

/// Whether every key of `ops` belongs to this connection's shard.
fn owns_all(ctx: &ShardCtx, ops: &[NativeOp<'_>]) -> bool {
    let shards = ctx.shards();
    shards == 1 || ops.iter().all(|op| shard_of(op.key, shards) == ctx.id)
}

impl Local {
    /// Runs `batch` on this shard's engine, with its reply data capped at `cap` (0: none).
    fn execute(&mut self, ctx: &ShardCtx, batch: &[NativeOp<'_>], cap: usize) {
        let mut ops = reuse(std::mem::take(&mut self.ops));
        self.failed.clear();
        for (i, op) in batch.iter().enumerate() {
            match engine_op(op) {
                Ok(o) => ops.push(o),
                Err(status) => self.failed.push((i, status)),
            }
        }
        self.results.set_bytes_cap(cap);
        ctx.execute(&ops, &mut self.results);
        self.ops = reuse(ops);
    }

    /// The replies to the `n` operations of the batch `execute` ran, in frame order.
    fn replies(&self, n: usize) -> impl Iterator<Item = ResponseOp<'_>> + Clone {
        let (r, failed) = (&self.results, &self.failed);
        (0..n).scan(0usize, move |failed_before, i| {
            if let Some(&(at, status)) = failed.get(*failed_before) {
                if at == i {
                    *failed_before += 1;
                    return Some(ResponseOp { status, data: &[] });
                }
            }
            let k = i - *failed_before;
            Some(ResponseOp {
                status: r.status(k).code(),
                data: r.data(k),
            })
        })
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
