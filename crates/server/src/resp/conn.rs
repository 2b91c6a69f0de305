//! One RESP connection on its shard: read, parse every complete command, run them as one
//! batch per shard (`shard::dispatch`), write the replies in order (`reply.rs`). The commands
//! themselves live in `cmd/`, one file per family.
//!
//! Backpressure: replies are written before more input is read, so a client that sends without
//! reading fills its socket buffers and is slowed; a client that does not read its replies
//! within `reply_write_timeout_secs` is disconnected. Input is bounded by
//! `conn_input_bytes_max`.
//!
//! Cross-protocol requests: a web page can make a browser send `POST / HTTP/1.1` with headers
//! and a text body to this port, and every line parses as an inline command. As Redis does, a
//! command named `POST` or `Host:` (any case) closes the connection before it or anything
//! after it runs, with no reply, a WARN log line and the `security_attacks` counter.

use std::sync::atomic::Ordering;

use directkv_proto::resp::{self, Args, Parse, RespLimits, RespWriter, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::cmd::{self, Planned, Session};
use super::multi::{self, Multi};
use super::reply::{self, Pending};
use crate::accept::{flush, shrink_idle, IDLE_BUFFER_BYTES_MAX, READ_CHUNK_BYTES};
use crate::clients::ClientHandle;
use crate::shard::{dispatch, ShardCtx};

/// Commands in a connection's first batch (see `conn_output_bytes_max`).
const FIRST_BATCH_CMDS: usize = 8;

/// Serves a RESP connection whose first bytes `input` holds (read by `accept::sniff`).
pub(crate) async fn serve(
    ctx: &ShardCtx,
    mut s: TcpStream,
    mut input: Vec<u8>,
    authenticated: bool,
    client: &ClientHandle,
) {
    let limits = RespLimits {
        args_max: ctx.cfg.args_max,
        ..RespLimits::default()
    };
    // The password is live (CONFIG SET requirepass): looked at once per read, copied when it
    // changed. A connection opened while there was none is in, as in Redis.
    let mut password_seen = 0;
    let mut requirepass = ctx
        .stats
        .live
        .requirepass_if_changed(&mut password_seen)
        .flatten();
    let mut session = Session {
        version: Version::Resp2,
        authenticated: authenticated || requirepass.is_none(),
        name: None,
        quit: false,
        multi: Multi::new(&ctx.cfg, ctx.shards(), ctx.watches.clone()),
        admin: cmd::client::Admin::new(client.entry().clone(), ctx.stats.clone(), ctx.cfg.clone()),
    };
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut args = Args::new();
    let mut pending = Pending::new(ctx.shards());
    let mut gate = crate::accept::ReplyGate::new(ctx);
    // A connection's first batch is small until its reply sizes are known, so one read of
    // commands on large values cannot buffer commands_per_batch_max large replies at once.
    let mut batch_cmds = FIRST_BATCH_CMDS.min(ctx.cfg.commands_per_batch_max);
    let mut reply_bytes_hint = 1usize;
    // Where the parse of an unfinished command resumes (`Args::resume_offset`) after the read.
    let mut resume_from = 0usize;
    loop {
        let mut used = 0;
        let mut close = false;
        if let Some(changed) = ctx.stats.live.requirepass_if_changed(&mut password_seen) {
            requirepass = changed;
        }
        loop {
            let before = out.len();
            let parsed = parse_commands(
                ctx,
                &input[used..],
                &limits,
                &mut args,
                &mut resume_from,
                &mut pending,
                &mut session,
                requirepass.as_deref(),
                &mut out,
                batch_cmds,
            )
            .await;
            used += parsed.consumed;
            let held = held_bytes(&input, &out, &pending, &session);
            client.account(held);
            if parsed.commands > 0 {
                // For CLIENT LIST: the last command, its time, the buffers (once per batch).
                let unread = input.len() - used;
                session.publish(unread, input.capacity() - input.len(), out.len(), held);
            }
            // Size the next batch so its replies stay near conn_output_bytes_max: from the
            // largest reply per command seen lately (it decays by half each batch).
            if let Some(per) = (out.len() - before).checked_div(parsed.commands) {
                reply_bytes_hint = per.max(1).max(reply_bytes_hint / 2);
                batch_cmds = (ctx.cfg.conn_output_bytes_max / reply_bytes_hint)
                    .clamp(1, ctx.cfg.commands_per_batch_max);
            }
            if out.len() >= ctx.cfg.conn_output_bytes_max
                && !flush(ctx, &mut s, &mut out, &mut gate).await
            {
                return;
            }
            if parsed.attack {
                ctx.stats.security_attacks.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(shard = ctx.id, peer = ?s.peer_addr().ok(), "possible SECURITY ATTACK: a RESP connection sent POST or Host: (a web page posting to this port?); closed");
                return;
            }
            if let Some(e) = parsed.error {
                ctx.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                crate::log_limit::protocol_error(&ctx.stats, || {
                    tracing::warn!(shard = ctx.id, error = %e, "closing a RESP connection after a protocol error");
                });
                RespWriter::new(&mut out, session.version).error(&resp::err_protocol(&e));
                close = true;
            }
            if !parsed.more || close || session.quit {
                break;
            }
        }
        input.drain(..used);
        if !flush(ctx, &mut s, &mut out, &mut gate).await {
            return;
        }
        if close || session.quit {
            return;
        }
        if input.len() >= ctx.cfg.conn_input_bytes_max {
            let _ = s
                .write_all(b"-ERR Protocol error: request larger than conn_input_bytes_max\r\n")
                .await;
            return;
        }
        // Waiting for input: what a large request grew is given back (issue 19 item 6).
        shrink_idle(&mut input);
        shrink_idle(&mut out);
        if pending.capacity_bytes() > IDLE_BUFFER_BYTES_MAX {
            pending.release(READ_CHUNK_BYTES);
        }
        // Into the spare capacity: no zeroing of a chunk per read.
        input.reserve(READ_CHUNK_BYTES);
        client.account(held_bytes(&input, &out, &pending, &session));
        match crate::accept::read_more(ctx, s.read_buf(&mut input)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                ctx.activity.touch();
                // For the idle sweeper (CONFIG SET timeout).
                client.entry().touch();
            }
        }
        client.account(held_bytes(&input, &out, &pending, &session));
    }
}

/// Bytes a connection's buffers hold, for `maxmemory_clients`: input, replies, the batch, and
/// a transaction's queue and watched keys.
fn held_bytes(input: &Vec<u8>, out: &Vec<u8>, pending: &Pending, session: &Session) -> usize {
    // The client's name counts too: CLIENT SETNAME takes any length, as in Redis.
    input.capacity()
        + out.capacity()
        + pending.capacity_bytes()
        + session.multi.capacity_bytes()
        + session.name.as_ref().map_or(0, Vec::len)
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
    /// A command was `POST` or `Host:`: close without a reply (see the module comment).
    attack: bool,
}

/// An HTTP request line or header read as a RESP command.
fn is_http(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
}

/// Parses up to `batch_cmds` commands, runs them, appends the replies.
#[allow(clippy::too_many_arguments)]
async fn parse_commands(
    ctx: &ShardCtx,
    buf: &[u8],
    limits: &RespLimits,
    args: &mut Args,
    resume_from: &mut usize,
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
    let mut attack = false;
    pending.clear();
    while count < batch_cmds {
        // Before AUTH (with a password set) only small commands are accepted, as Redis does.
        let parse = if session.authenticated || requirepass.is_none() {
            resp::parse_command_resume(&buf[used..], limits, args)
        } else {
            resp::parse_command_unauthenticated(&buf[used..], limits, args)
        };
        match parse {
            Parse::Incomplete => {
                // The first parse of this call resumed at `resume_from`; a later one started
                // at its command's first byte.
                let start = if used == 0 { *resume_from } else { 0 };
                ctx.stats
                    .resp_incomplete_bytes_scanned
                    .fetch_add((buf.len() - used - start) as u64, Ordering::Relaxed);
                *resume_from = args.resume_offset();
                break;
            }
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
                if command.iter().next().is_some_and(is_http) {
                    attack = true;
                    break;
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
                    Planned::Atomic => {
                        run(ctx, pending, session.version, out).await;
                        pending.clear();
                        cmd::atomic(ctx, pending, session.version, a, out).await;
                    }
                    Planned::Multi => {
                        run(ctx, pending, session.version, out).await;
                        pending.clear();
                        multi::run(ctx, pending, session, a, requirepass, out).await;
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
        attack,
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
    dispatch::execute(ctx, &mut p.plan).await;
    reply::render(p, v, out, &ctx.stats);
}
