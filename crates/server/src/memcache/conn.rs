//! One memcached connection on its shard: read; parse every complete request in the buffer
//! (the codec); plan them into one batch (`exec.rs`) and run it through the one door; write
//! the replies in order; read again.
//!
//! ```text
//!   input ─parse_request─┬─ Complete ──> exec::Planner::request (or a barrier: stats,
//!                        │               flush_all; quit closes after the replies before it)
//!                        ├─ Refused ───> its error line (unless noreply); swallow its data
//!                        │               block as it arrives, never buffered
//!                        ├─ Incomplete ─> read more
//!                        └─ Close ─────> hang up without a reply (a line over its limit)
//! ```
//!
//! Authentication (`requirepass`, read live as RESP reads it): memcached 1.6's ASCII
//! convention (`-Y`). Until a login, the only request served is a `set` whose data is
//! `<user> <password>`: user `default` and the password answer `STORED` (even with
//! noreply, as memcached); another pair answers `CLIENT_ERROR authentication failure`, data
//! without a space `CLIENT_ERROR bad authentication token format`. Any other request gets
//! `CLIENT_ERROR unauthenticated`. After a refused login or an unauthenticated request the
//! rest of the bytes read so far is dropped, as memcached drops the rest of its read buffer.
//!
//! Cross-protocol requests: a line that starts `POST `, `GET /` or `Host:` (an HTTP request a
//! web page made a browser send) closes the connection with no reply, as the RESP port does
//! (`is_http`), counted in `security_attacks`.
//!
//! Backpressure as RESP's (`resp/conn.rs`): replies are written before more input is read; a
//! batch stops at `commands_per_batch_max` requests or when its replies pass
//! `conn_output_bytes_max`; a client that does not read within `reply_write_timeout_secs` is
//! dropped; input, replies and the batch count towards `maxmemory_clients`.

use std::time::Instant;

use directkv_engine::OpError;
use directkv_proto::memcache::{parse_request, write_server_error, MemcacheLimits, Parse, Request};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::exec::{Batch, Planner};
use super::stats::C;
use crate::accept::{flush, shrink_idle, IDLE_BUFFER_BYTES_MAX, READ_CHUNK_BYTES};
use crate::clients::{ClientHandle, CMD_BYTES_MAX};
use crate::shard::ShardCtx;

/// Requests in a connection's first batch (see `conn_output_bytes_max`).
const FIRST_BATCH_REQUESTS: usize = 8;
/// `flush_all` refused because the persistence log failed: the text of the other refused
/// writes' `SERVER_ERROR` line (`exec::engine_error`).
const NOT_LOGGED: OpError = OpError::NotLogged("see the server log");

/// The user of memcached's ASCII login (Redis's default user).
const USER: &[u8] = b"default";

/// A connection's state between batches.
struct Session {
    authenticated: bool,
    /// Bytes of a refused request's data block still to be dropped as they arrive.
    swallow: usize,
    /// Drop the rest of the input read so far (after an authentication refusal).
    discard: bool,
    /// Close once the replies are written (quit, a line over its limit).
    close: bool,
    /// The last request's name, for CLIENT LIST.
    last: &'static [u8],
    /// A line was an HTTP request line or Host header (see `is_http`).
    attack: bool,
}

/// Serves a memcached connection whose first bytes `input` holds.
pub(crate) async fn serve(
    ctx: &ShardCtx,
    mut s: TcpStream,
    mut input: Vec<u8>,
    client: &ClientHandle,
) {
    let limits = ctx.cfg.memcache_limits();
    let mut password_seen = 0;
    let mut requirepass = ctx
        .stats
        .live
        .requirepass_if_changed(&mut password_seen)
        .flatten();
    let mut session = Session {
        authenticated: requirepass.is_none(),
        swallow: 0,
        discard: false,
        close: false,
        last: b"NULL",
        attack: false,
    };
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut batch = Batch::new(ctx.shards());
    let mut gate = crate::accept::ReplyGate::new(ctx);
    // As RESP: the first batch is small until reply sizes are known, and later ones are sized
    // so that their replies stay near conn_output_bytes_max (the largest reply per request
    // seen lately, halved each batch).
    let mut batch_max = FIRST_BATCH_REQUESTS.min(ctx.cfg.commands_per_batch_max);
    let mut reply_bytes_hint = 1usize;
    loop {
        if let Some(changed) = ctx.stats.live.requirepass_if_changed(&mut password_seen) {
            requirepass = changed;
        }
        // A connection opened while there was a password is in once there is none.
        session.authenticated |= requirepass.is_none();
        skip_swallowed(&mut input, &mut session);
        let mut used = 0;
        loop {
            let before = out.len();
            let parsed = parse_batch(
                ctx,
                &input[used..],
                &limits,
                &mut batch,
                &mut session,
                requirepass.as_deref(),
                &mut out,
                batch_max,
            )
            .await;
            used += parsed.consumed;
            if let Some(per) = (out.len() - before).checked_div(parsed.requests) {
                reply_bytes_hint = per.max(1).max(reply_bytes_hint / 2);
                batch_max = (ctx.cfg.conn_output_bytes_max / reply_bytes_hint)
                    .clamp(1, ctx.cfg.commands_per_batch_max);
            }
            ctx.stats.memcache.add_tally(&mut batch.tally);
            let held = input.capacity() + out.capacity() + batch.capacity_bytes();
            client.account(held);
            if parsed.requests > 0 {
                publish(client, &session, input.len() - used, out.len(), held);
            }
            if out.len() >= ctx.cfg.conn_output_bytes_max
                && !flush(ctx, &mut s, &mut out, &mut gate).await
            {
                return;
            }
            if !parsed.more || session.close || session.discard || session.swallow > 0 {
                break;
            }
        }
        input.drain(..used);
        if session.discard {
            input.clear();
            session.discard = false;
        }
        skip_swallowed(&mut input, &mut session);
        if session.attack {
            ctx.stats
                .security_attacks
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(shard = ctx.id, peer = ?s.peer_addr().ok(), "possible SECURITY ATTACK: a memcached connection sent POST or Host: (a web page posting to this port?); closed");
            return;
        }
        if !flush(ctx, &mut s, &mut out, &mut gate).await || session.close {
            return;
        }
        if input.len() >= ctx.cfg.conn_input_bytes_max {
            // The codec's limits keep a request far below this; a guard all the same.
            let _ = tokio::io::AsyncWriteExt::write_all(
                &mut s,
                b"SERVER_ERROR request larger than conn_input_bytes_max\r\n",
            )
            .await;
            return;
        }
        shrink_idle(&mut input);
        shrink_idle(&mut out);
        if batch.capacity_bytes() > IDLE_BUFFER_BYTES_MAX {
            batch.release(READ_CHUNK_BYTES);
        }
        input.reserve(READ_CHUNK_BYTES);
        client.account(input.capacity() + out.capacity() + batch.capacity_bytes());
        match crate::accept::read_more(ctx, s.read_buf(&mut input)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                ctx.activity.touch();
                client.entry().touch();
            }
        }
    }
}

/// Drops the part of a refused data block that has arrived.
fn skip_swallowed(input: &mut Vec<u8>, session: &mut Session) {
    if session.swallow > 0 {
        let n = session.swallow.min(input.len());
        input.drain(..n);
        session.swallow -= n;
    }
}

/// For CLIENT LIST: the last command, its time and the buffers (once per batch).
fn publish(client: &ClientHandle, session: &Session, qbuf: usize, omem: usize, held: usize) {
    let mut cmd = [0u8; CMD_BYTES_MAX];
    let n = session.last.len().min(CMD_BYTES_MAX);
    cmd[..n].copy_from_slice(&session.last[..n]);
    client.entry().publish(|p| {
        p.last_at = Instant::now();
        p.cmd = cmd;
        p.cmd_len = n;
        p.qbuf = qbuf;
        p.omem = omem;
        p.tot_mem = held;
        p.resp = 0;
    });
}

struct Parsed {
    consumed: usize,
    requests: usize,
    /// More complete requests may follow (the batch limit was reached).
    more: bool,
}

/// The command word of a request, for CLIENT LIST.
fn name(r: &Request<'_>) -> &'static [u8] {
    match r {
        Request::Get { cas: false, .. } => b"get",
        Request::Get { cas: true, .. } => b"gets",
        Request::GetAndTouch { cas: false, .. } => b"gat",
        Request::GetAndTouch { cas: true, .. } => b"gats",
        Request::Store { mode, .. } => mode.name().as_bytes(),
        Request::Arithmetic {
            increment: true, ..
        } => b"incr",
        Request::Arithmetic { .. } => b"decr",
        Request::Delete { .. } => b"delete",
        Request::Touch { .. } => b"touch",
        Request::FlushAll { .. } => b"flush_all",
        Request::Version => b"version",
        Request::Verbosity { .. } => b"verbosity",
        Request::Stats { .. } => b"stats",
        Request::Quit => b"quit",
        Request::MetaGet { .. } => b"mg",
        Request::MetaSet { .. } => b"ms",
        Request::MetaDelete { .. } => b"md",
        Request::MetaArithmetic { .. } => b"ma",
        Request::MetaNoop => b"mn",
        Request::MetaDebug { .. } => b"me",
    }
}

/// Parses and plans up to `batch_max` requests of `buf`, runs them, appends the
/// replies.
#[allow(clippy::too_many_arguments)]
async fn parse_batch(
    ctx: &ShardCtx,
    buf: &[u8],
    limits: &MemcacheLimits,
    batch: &mut Batch,
    session: &mut Session,
    requirepass: Option<&str>,
    out: &mut Vec<u8>,
    batch_max: usize,
) -> Parsed {
    let mut used = 0;
    let mut count = 0;
    let mut planner = batch.planner();
    while count < batch_max && planner.len() < batch_max {
        match parse_request(&buf[used..], limits) {
            Parse::Incomplete => break,
            Parse::Close => {
                planner.tally().add(C::LineTooLong, 1);
                tracing::debug!(shard = ctx.id, "memcached line over its limit: closed");
                session.close = true;
                break;
            }
            Parse::Refused(r) => {
                if is_http(&buf[used..]) {
                    session.attack = true;
                    session.close = true;
                    break;
                }
                count += 1;
                used += r.consumed;
                if !session.authenticated {
                    unauthenticated(&mut planner, session);
                    break;
                }
                planner.tally().add(C::Refused, 1);
                if !r.quiet {
                    planner.error(r.error);
                }
                if r.swallow > 0 {
                    let here = r.swallow.min(buf.len() - used);
                    used += here;
                    session.swallow = r.swallow - here;
                    if session.swallow > 0 {
                        break;
                    }
                }
            }
            Parse::Complete { request, consumed } => {
                count += 1;
                used += consumed;
                session.last = name(&request);
                if !session.authenticated {
                    if !login(&mut planner, session, request, requirepass) {
                        break;
                    }
                    continue;
                }
                match request {
                    Request::Quit => {
                        session.close = true;
                        break;
                    }
                    Request::Stats { args } => {
                        planner.run(ctx, out).await;
                        super::stats::stats(ctx, args, out).await;
                    }
                    Request::FlushAll { delay, noreply } => {
                        planner.run(ctx, out).await;
                        planner.tally().add(C::CmdFlush, 1);
                        if !super::flush::flush_all(ctx, delay).await {
                            // A refused write: SERVER_ERROR whatever noreply says, as the
                            // other refused writes (`exec::engine_error`).
                            write_server_error(out, &NOT_LOGGED.to_string());
                        } else if !noreply {
                            out.extend_from_slice(b"OK\r\n");
                        }
                    }
                    other => planner.request(other),
                }
                if out.len() >= ctx.cfg.conn_output_bytes_max {
                    break;
                }
            }
        }
    }
    planner.run(ctx, out).await;
    planner.finish();
    Parsed {
        consumed: used,
        requests: count,
        more: count == batch_max,
    }
}

/// An HTTP request line or header read as a memcached command: a web page can make a
/// browser POST a text body to this port, and every line of the body would run. As the RESP
/// port does (and memcached does not), such a connection is closed before the line or
/// anything after it runs, without a reply; the replies to the requests before it are dropped.
fn is_http(line: &[u8]) -> bool {
    let host = b"Host:";
    line.starts_with(b"POST ")
        || line.starts_with(b"GET /")
        || (line.len() >= host.len() && line[..host.len()].eq_ignore_ascii_case(host))
}

/// A request before the login: refused, and the rest of the input dropped.
fn unauthenticated(planner: &mut Planner<'_, '_>, session: &mut Session) {
    planner.tally().add(C::AuthErrors, 1);
    planner.client_error("unauthenticated");
    session.discard = true;
}

/// The request of a connection not logged in; false when the rest of the input is dropped.
fn login(
    planner: &mut Planner<'_, '_>,
    session: &mut Session,
    request: Request<'_>,
    requirepass: Option<&str>,
) -> bool {
    let Request::Store {
        mode: directkv_proto::memcache::StoreMode::Set,
        value,
        ..
    } = request
    else {
        unauthenticated(planner, session);
        return false;
    };
    planner.tally().add(C::AuthCmds, 1);
    let Some(space) = value.iter().position(|&b| b == b' ') else {
        planner.client_error("bad authentication token format");
        return true;
    };
    let (user, password) = (&value[..space], &value[space + 1..]);
    if user == USER && requirepass.is_some_and(|p| p.as_bytes() == password) {
        session.authenticated = true;
        planner.line(b"STORED\r\n");
        return true;
    }
    planner.tally().add(C::AuthErrors, 1);
    planner.client_error("authentication failure");
    session.discard = true;
    false
}
