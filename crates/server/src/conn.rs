//! One client connection on its shard: read, parse every complete command, run them as one
//! batch per shard, write the replies in order. The protocol is told from the first byte: the
//! native protocol's frames start with a non-ASCII magic byte; anything else is RESP.
//!
//! Backpressure: replies are written before more input is read, so a client that sends without
//! reading fills its socket buffers and is slowed; a client that does not read its replies
//! within `reply_write_timeout_secs` is disconnected. Input is bounded by
//! `conn_input_bytes_max`.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use directkv_engine::Status;
use directkv_proto::resp::{self, Args, Parse, RespLimits, RespWriter, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

use crate::cmd::{self, Planned, Session};
use crate::plan::{Pending, Recipe};
use crate::shard::{count_connection, Incoming, Job, ShardCtx};

const READ_CHUNK_BYTES: usize = 64 << 10;
/// Commands in a connection's first batch (see `conn_output_bytes_max`).
const FIRST_BATCH_CMDS: usize = 8;

pub async fn serve(ctx: Rc<ShardCtx>, incoming: Incoming, mut stop: watch::Receiver<bool>) {
    let Incoming {
        stream,
        authenticated,
    } = incoming;
    let stats = ctx.stats.clone();
    if stats.connections.load(Ordering::Relaxed) >= ctx.cfg.connections_max {
        stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        let mut s = stream;
        let _ = std::io::Write::write_all(&mut s, b"-ERR max number of clients reached\r\n");
        return;
    }
    count_connection(&stats, 1);
    tracing::debug!(shard = ctx.id, peer = ?stream.peer_addr().ok(), "connection opened");
    if stream.set_nonblocking(true).is_ok() {
        if let Ok(s) = TcpStream::from_std(stream) {
            let _ = s.set_nodelay(true);
            tokio::select! {
                _ = serve_resp(&ctx, s, authenticated) => {}
                _ = stop.changed() => {}
            }
        }
    }
    count_connection(&stats, -1);
}

async fn serve_resp(ctx: &ShardCtx, mut s: TcpStream, authenticated: bool) {
    let limits = RespLimits {
        args_max: ctx.cfg.args_max,
        ..RespLimits::default()
    };
    let requirepass = ctx.cfg.requirepass.clone();
    let mut session = Session {
        version: Version::Resp2,
        authenticated,
        name: None,
        quit: false,
    };
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut args = Args::new();
    let mut pending = Pending::new(ctx.shards());
    let write_timeout = Duration::from_secs(ctx.cfg.reply_write_timeout_secs);
    // A connection's first batch is small until its reply sizes are known, so one read of
    // commands on large values cannot buffer commands_per_batch_max large replies at once.
    let mut batch_cmds = FIRST_BATCH_CMDS.min(ctx.cfg.commands_per_batch_max);
    let mut reply_bytes_hint = 1usize;
    loop {
        if input.len() >= ctx.cfg.conn_input_bytes_max {
            let _ = s
                .write_all(b"-ERR Protocol error: request larger than conn_input_bytes_max\r\n")
                .await;
            return;
        }
        let start = input.len();
        // Into the spare capacity: no zeroing of a chunk per read.
        input.reserve(READ_CHUNK_BYTES);
        match s.read_buf(&mut input).await {
            Ok(0) | Err(_) => return,
            Ok(_) => ctx.activity.touch(),
        }
        if start == 0 && directkv_proto::native::is_native(input[0]) {
            crate::native_conn::serve(ctx, s, input, authenticated).await;
            return;
        }
        let mut used = 0;
        let mut close = false;
        loop {
            let before = out.len();
            let parsed = parse_commands(
                ctx,
                &input[used..],
                &limits,
                &mut args,
                &mut pending,
                &mut session,
                requirepass.as_deref(),
                &mut out,
                batch_cmds,
            )
            .await;
            used += parsed.consumed;
            // Size the next batch so its replies stay near conn_output_bytes_max: from the
            // largest reply per command seen lately (it decays by half each batch).
            if let Some(per) = (out.len() - before).checked_div(parsed.commands) {
                reply_bytes_hint = per.max(1).max(reply_bytes_hint / 2);
                batch_cmds = (ctx.cfg.conn_output_bytes_max / reply_bytes_hint)
                    .clamp(1, ctx.cfg.commands_per_batch_max);
            }
            if out.len() >= ctx.cfg.conn_output_bytes_max
                && !flush(&mut s, &mut out, write_timeout).await
            {
                return;
            }
            if let Some(e) = parsed.error {
                ctx.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(shard = ctx.id, error = %e, "closing a RESP connection after a protocol error");
                RespWriter::new(&mut out, session.version).error(&resp::err_protocol(&e));
                close = true;
            }
            if !parsed.more || close || session.quit {
                break;
            }
        }
        input.drain(..used);
        if !flush(&mut s, &mut out, write_timeout).await {
            return;
        }
        if close || session.quit {
            return;
        }
    }
}

/// Writes and clears the buffered replies; false when the client did not take them within
/// `timeout` (or the connection broke), and the connection should be dropped.
pub(crate) async fn flush(s: &mut TcpStream, out: &mut Vec<u8>, timeout: Duration) -> bool {
    if out.is_empty() {
        return true;
    }
    let ok = matches!(
        tokio::time::timeout(timeout, s.write_all(out)).await,
        Ok(Ok(()))
    );
    out.clear();
    ok
}

/// Arguments of one command held on the stack while it is planned (GET, SET with options,
/// MGET/MSET of a few keys); longer commands collect theirs into a vector.
const ARGS_INLINE: usize = 8;

struct Parsed {
    consumed: usize,
    commands: usize,
    /// More complete commands may follow (the batch limit was reached).
    more: bool,
    error: Option<resp::ProtocolError>,
}

/// Parses up to `batch_cmds` commands, runs them, appends the replies.
#[allow(clippy::too_many_arguments)]
async fn parse_commands(
    ctx: &ShardCtx,
    buf: &[u8],
    limits: &RespLimits,
    args: &mut Args,
    pending: &mut Pending,
    session: &mut Session,
    requirepass: Option<&str>,
    out: &mut Vec<u8>,
    batch_cmds: usize,
) -> Parsed {
    let mut used = 0;
    let mut count = 0;
    // Commands already added to the shard's counter.
    let mut counted = 0;
    let mut error = None;
    pending.clear();
    while count < batch_cmds {
        match resp::parse_command(&buf[used..], limits, args) {
            Parse::Incomplete => break,
            Parse::Invalid(e) => {
                error = Some(e);
                break;
            }
            Parse::Complete { consumed } => {
                let cmd_bytes = &buf[used..used + consumed];
                used += consumed;
                let command = args.command(cmd_bytes);
                if command.is_empty() {
                    continue;
                }
                count += 1;
                // Arguments as slices: on the stack for the usual few, else in a vector.
                let mut inline: [&[u8]; ARGS_INLINE] = [&[]; ARGS_INLINE];
                let many: Vec<&[u8]>;
                let a: &[&[u8]] = if command.len() <= ARGS_INLINE {
                    for (slot, arg) in inline.iter_mut().zip(command.iter()) {
                        *slot = arg;
                    }
                    &inline[..command.len()]
                } else {
                    many = command.iter().collect();
                    &many
                };
                let version = session.version;
                match cmd::plan(pending, session, a, requirepass) {
                    // HELLO switched the protocol: the replies planned before it (its own is
                    // already encoded) are rendered in the protocol they were asked in.
                    Planned::Queued if session.version != version => {
                        run(ctx, pending, version, out).await;
                        pending.clear();
                    }
                    Planned::Queued => {}
                    Planned::Barrier => {
                        run(ctx, pending, session.version, out).await;
                        pending.clear();
                        // INFO and the other barriers see every command before them (and
                        // themselves), as when each was counted on arrival.
                        counted = count_commands(ctx, count, counted);
                        cmd::server::barrier(ctx, session.version, a, out).await;
                    }
                }
                if session.quit {
                    break;
                }
            }
        }
    }
    run(ctx, pending, session.version, out).await;
    count_commands(ctx, count, counted);
    Parsed {
        consumed: used,
        commands: count,
        more: count == batch_cmds,
        error,
    }
}

/// Adds the commands parsed since the last call (`count - counted`) to the shard's counter and
/// returns the new `counted`: once per read and barrier instead of an atomic add per command.
fn count_commands(ctx: &ShardCtx, count: usize, counted: usize) -> usize {
    if count > counted {
        ctx.stats
            .commands
            .fetch_add((count - counted) as u64, Ordering::Relaxed);
    }
    count
}

/// Executes the pending operations (local shard directly, others over their queues) and
/// renders every reply in order.
async fn run(ctx: &ShardCtx, p: &mut Pending, v: Version, out: &mut Vec<u8>) {
    if p.is_empty() {
        return;
    }
    execute(ctx, p).await;
    render(p, v, out);
}

/// Executes the pending operations: the local shard's directly, the others' over their queues
/// (sent first, so they run while the local one does). Results land in `p.results`.
pub(crate) async fn execute(ctx: &ShardCtx, p: &mut Pending) {
    let mut waits = Vec::new();
    for s in 0..ctx.shards() {
        if p.batches[s].is_empty() || s == ctx.id {
            continue;
        }
        let (tx, rx) = oneshot::channel();
        let (batch, results) = p.take_for_execution(s);
        ctx.stats.forwarded_batches.fetch_add(1, Ordering::Relaxed);
        ctx.stats
            .forwarded_ops
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let job = Job::Execute {
            batch,
            results,
            reply: tx,
        };
        if ctx.peers[s].send(job).await.is_ok() {
            waits.push((s, rx));
        }
    }
    if !p.batches[ctx.id].is_empty() {
        p.execute_local(ctx.id, &mut ctx.engine.borrow_mut());
    }
    for (s, rx) in waits {
        if let Ok((batch, r)) = rx.await {
            p.executed(s, batch, r);
        }
    }
}

fn render(p: &Pending, v: Version, out: &mut Vec<u8>) {
    for r in &p.recipes {
        if let Recipe::Immediate { start, end } = *r {
            out.extend_from_slice(&p.immediate[start..end]);
            continue;
        }
        let mut w = RespWriter::new(out, v);
        match *r {
            Recipe::Immediate { .. } => unreachable!("written above"),
            Recipe::Ok { op } => match p.result(op).0 {
                Status::Error(e) => w.error(&cmd::op_error_text(&e)),
                _ => w.simple("OK"),
            },
            Recipe::Bulk { op } | Recipe::Data { op } => match p.result(op) {
                (Status::Ok, d) => w.bulk(d),
                (Status::Error(e), _) => w.error(&cmd::op_error_text(&e)),
                _ => w.null(),
            },
            Recipe::OkOrNull { op } => match p.result(op).0 {
                Status::Ok => w.simple("OK"),
                Status::Error(e) => w.error(&cmd::op_error_text(&e)),
                _ => w.null(),
            },
            Recipe::CountFound { first, n } => {
                let found = (first..first + n)
                    .filter(|&i| p.result(i).0 == Status::Ok)
                    .count();
                w.integer(found as i64)
            }
            Recipe::Values { first, n } => {
                w.array_len(n);
                for i in first..first + n {
                    match p.result(i) {
                        (Status::Ok, d) => w.bulk(d),
                        _ => w.null(),
                    }
                }
            }
            Recipe::AllOk { first, n } => match (first..first + n)
                .map(|i| p.result(i).0)
                .find(|s| matches!(s, Status::Error(_)))
            {
                Some(Status::Error(e)) => w.error(&cmd::op_error_text(&e)),
                _ => w.simple("OK"),
            },
            Recipe::DecimalInt { op } => match p.result(op) {
                (Status::Ok, d) => w.integer(cmd::parse_int(d).unwrap_or(0)),
                (Status::Error(e), _) => w.error(&cmd::op_error_text(&e)),
                _ => w.null(),
            },
            Recipe::U64 { op } => match p.result(op) {
                (Status::Ok, d) if d.len() == 8 => {
                    w.integer(u64::from_le_bytes(d.try_into().expect("8 bytes")) as i64)
                }
                (Status::Error(e), _) => w.error(&cmd::op_error_text(&e)),
                _ => w.integer(0),
            },
            Recipe::Len { op } => match p.result(op) {
                (Status::Ok, d) => w.integer(d.len() as i64),
                _ => w.integer(0),
            },
            Recipe::Number { op, elem } => match p.result(op) {
                (Status::Ok, d) if d.len() == elem.width() => {
                    w.bulk(cmd::dkv::decode_number(elem, d).as_bytes())
                }
                (Status::Error(e), _) => w.error(&cmd::op_error_text(&e)),
                _ => w.null(),
            },
            Recipe::Numbers { op, elem } => match p.result(op) {
                (Status::Ok, d) if d.len() % elem.width() == 0 => {
                    w.array_len(d.len() / elem.width());
                    for e in d.chunks_exact(elem.width()) {
                        w.bulk(cmd::dkv::decode_number(elem, e).as_bytes());
                    }
                }
                (Status::Error(e), _) => w.error(&cmd::op_error_text(&e)),
                (Status::Ok, _) => w.error("ERR value is not a vector of that element type"),
                _ => w.null_array(),
            },
            Recipe::Cas { op } => {
                let (st, d) = p.result(op);
                if let Status::Error(e) = st {
                    w.error(&cmd::op_error_text(&e));
                } else {
                    w.array_len(2);
                    w.integer(i64::from(st == Status::Ok));
                    w.bulk(d);
                }
            }
        }
    }
}
