//! Connection and server commands: PING ECHO HELLO AUTH SELECT QUIT TIME SHUTDOWN (SAVE,
//! BGSAVE, LASTSAVE and SHUTDOWN SAVE in `save.rs`),
//! the routes to COMMAND (`command.rs`), CLIENT (`client.rs`) and CONFIG (`config_cmd.rs`), and
//! the barriers that need every shard: INFO DBSIZE FLUSHALL FLUSHDB. Outside a transaction a
//! barrier runs after the commands before it, asking each shard in turn; inside one it runs in
//! the transaction's exclusive section with every shard held (`in_transaction`), so the
//! transaction stays atomic as a whole.

use directkv_proto::resp::{self, RespWriter, Version};

use super::{arity, error, Planned, Session};
use crate::resp::reply::Pending;
use crate::shard::exclusive::Held;
use crate::shard::{ask_all, Job, ShardCtx};

const SERVER_NAME: &str = "directkv";
const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
/// A shard did not answer inside a transaction (it stopped or panicked).
const ERR_UNAVAILABLE: &str = "ERR shard unavailable";
/// FLUSHALL refused because a shard's log failed.
const NOT_LOGGED: directkv_engine::OpError =
    directkv_engine::OpError::NotLogged("see the server log");

pub fn plan(
    p: &mut Pending,
    s: &mut Session,
    name: &[u8],
    a: &[&[u8]],
    requirepass: Option<&str>,
) -> Option<Planned> {
    let v = s.version;
    let n = a.len();
    Some(match name {
        b"ping" if n == 1 => ok_text(p, v, "PONG"),
        b"ping" if n == 2 => bulk(p, v, a[1]),
        b"echo" if n == 2 => bulk(p, v, a[1]),
        b"quit" => {
            s.quit = true;
            ok_text(p, v, "OK")
        }
        b"select" if n == 2 => match super::parse_int(a[1]) {
            Some(0) => ok_text(p, v, "OK"),
            Some(_) => error(p, v, resp::err_db_index()),
            None => error(p, v, resp::err_not_integer()),
        },
        b"auth" if n == 2 => auth(p, s, None, a[1], requirepass),
        b"auth" if n == 3 => auth(p, s, Some(a[1]), a[2], requirepass),
        b"auth" if n > 3 => error(p, v, resp::err_syntax()),
        b"hello" => hello(p, s, a, requirepass),
        b"command" => {
            if n >= 2 {
                s.admin.sub = super::Name::lower(a[1]);
            }
            super::command::command(p, v, a)
        }
        b"client" if n >= 2 => super::client::client(p, s, a),
        b"config" if n >= 2 => super::config_cmd::config(p, s, a),
        b"time" if n == 1 => time(p, v),
        b"lastsave" | b"save" | b"bgsave" => return super::save::plan(p, v, name, a),
        b"shutdown" => shutdown(p, s, a),
        // FLUSHALL/FLUSHDB [ASYNC | SYNC]: anything else is a syntax error, as in Redis.
        b"flushall" | b"flushdb"
            if n > 2
                || (n == 2
                    && !a[1].eq_ignore_ascii_case(b"async")
                    && !a[1].eq_ignore_ascii_case(b"sync")) =>
        {
            error(p, v, resp::err_syntax())
        }
        b"info" | b"dbsize" | b"flushall" | b"flushdb" => Planned::Barrier,
        b"ping" | b"echo" | b"select" | b"auth" | b"client" | b"config" | b"time" => {
            arity(p, v, name)
        }
        _ => return None,
    })
}

fn ok_text(p: &mut Pending, v: Version, t: &str) -> Planned {
    p.immediate(|o| RespWriter::new(o, v).simple(t));
    Planned::Queued
}

fn bulk(p: &mut Pending, v: Version, b: &[u8]) -> Planned {
    p.immediate(|o| RespWriter::new(o, v).bulk(b));
    Planned::Queued
}

/// Redis' one user, "default", takes any password when there is no `requirepass` (it is
/// "nopass") and that password otherwise; other user names are unknown.
fn password_ok(user: Option<&[u8]>, pass: &[u8], requirepass: Option<&str>) -> bool {
    user.is_none_or(|u| u == b"default") && requirepass.is_none_or(|want| want.as_bytes() == pass)
}

/// AUTH [username] password
fn auth(
    p: &mut Pending,
    s: &mut Session,
    user: Option<&[u8]>,
    pass: &[u8],
    requirepass: Option<&str>,
) -> Planned {
    let v = s.version;
    if user.is_none() && requirepass.is_none() {
        return error(p, v, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
    }
    if password_ok(user, pass, requirepass) {
        s.authenticated = true;
        ok_text(p, v, "OK")
    } else {
        error(p, v, resp::err_wrongpass())
    }
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
fn hello(p: &mut Pending, s: &mut Session, a: &[&[u8]], requirepass: Option<&str>) -> Planned {
    let mut version = s.version;
    if a.len() >= 2 {
        version = match super::parse_int(a[1]) {
            Some(2) => Version::Resp2,
            Some(3) => Version::Resp3,
            Some(_) => return error(p, s.version, resp::err_noproto()),
            None => {
                let msg = "ERR Protocol version is not an integer or out of range";
                return error(p, s.version, msg);
            }
        };
    }
    // As Redis 7.0 does, options take effect one by one: an error keeps what came before it
    // (a name set, a login) and leaves the protocol as it was.
    let mut i = 2;
    while i < a.len() {
        match String::from_utf8_lossy(a[i]).to_ascii_lowercase().as_str() {
            "auth" if i + 2 < a.len() => {
                if !password_ok(Some(a[i + 1]), a[i + 2], requirepass) {
                    return error(p, s.version, resp::err_wrongpass());
                }
                s.authenticated = true;
                i += 3;
            }
            "setname" if i + 1 < a.len() => {
                if let Err(e) = super::client::set_name(s, a[i + 1]) {
                    return error(p, s.version, e);
                }
                i += 2;
            }
            _ => {
                // Redis prints the option as a C string (it ends at a NUL byte), byte for byte,
                // with CR and LF as spaces so the line stays one line.
                let opt = a[i].split(|&b| b == 0).next().unwrap_or_default();
                p.immediate(|o| {
                    o.extend_from_slice(b"-ERR Syntax error in HELLO option '");
                    o.extend(opt.iter().map(|&b| match b {
                        b'\r' | b'\n' => b' ',
                        b => b,
                    }));
                    o.extend_from_slice(b"'\r\n");
                });
                return Planned::Queued;
            }
        }
    }
    if requirepass.is_some() && !s.authenticated {
        return error(p, s.version, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    s.version = version;
    let id = s.admin.me.id as i64;
    p.immediate(|o| {
        let mut w = RespWriter::new(o, version);
        w.map_len(7);
        w.bulk(b"server");
        w.bulk(SERVER_NAME.as_bytes());
        w.bulk(b"version");
        w.bulk(SERVER_VERSION.as_bytes());
        w.bulk(b"proto");
        w.integer(if version == Version::Resp3 { 3 } else { 2 });
        w.bulk(b"id");
        w.integer(id);
        w.bulk(b"mode");
        w.bulk(b"standalone");
        w.bulk(b"role");
        w.bulk(b"master");
        w.bulk(b"modules");
        w.array_len(0);
    });
    Planned::Queued
}

/// TIME: seconds and microseconds since the Unix epoch, as two bulk strings.
fn time(p: &mut Pending, v: Version) -> Planned {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, micros) = (now.as_secs().to_string(), now.subsec_micros().to_string());
    p.immediate(|o| {
        let mut w = RespWriter::new(o, v);
        w.array_len(2);
        w.bulk(secs.as_bytes());
        w.bulk(micros.as_bytes());
    });
    Planned::Queued
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]: stops the server (`live.rs` wakes
/// `Server::run_until_signal`) and closes this connection without a reply, as Redis does.
/// SAVE snapshots every shard first (`save.rs`, a barrier; FORCE stops even if that fails);
/// without it nothing is snapshotted: the log holds every write and the stop syncs it. NOW
/// changes nothing; ABORT has no shutdown in progress to abort. With `requirepass`
/// an unauthenticated client gets NOAUTH before it reaches here (`cmd::plan`).
fn shutdown(p: &mut Pending, s: &mut Session, a: &[&[u8]]) -> Planned {
    let v = s.version;
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for opt in &a[1..] {
        match String::from_utf8_lossy(opt).to_ascii_lowercase().as_str() {
            "save" => save = true,
            "nosave" => nosave = true,
            "abort" => abort = true,
            "now" | "force" => {}
            _ => return error(p, v, resp::err_syntax()),
        }
    }
    if (save && nosave) || (abort && a.len() > 2) {
        return error(p, v, resp::err_syntax());
    }
    if abort {
        return error(p, v, "ERR No shutdown in progress.");
    }
    if save {
        // The save runs as a barrier (`save.rs`); the connection closes after it either way
        // (after its error when the save failed: unlike Redis, which keeps it open).
        s.quit = true;
        return Planned::Barrier;
    }
    tracing::warn!(client = s.admin.me.id, peer = ?s.admin.me.peer, "SHUTDOWN asked by a client: stopping");
    s.admin.stats.live.request_shutdown();
    s.quit = true;
    Planned::Queued
}

/// INFO's text as Redis 7 sends it: in RESP3 a verbatim string of format `txt`
/// (`=len\r\ntxt:text\r\n`, found by the differential test), in RESP2 a bulk string.
pub(super) fn info_reply(out: &mut Vec<u8>, v: Version, text: &str) {
    if v == Version::Resp3 {
        out.extend_from_slice(format!("={}\r\ntxt:", text.len() + 4).as_bytes());
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
    } else {
        RespWriter::new(out, v).bulk(text.as_bytes());
    }
}

/// Runs a barrier command; appends its reply to `out`.
pub async fn barrier(ctx: &ShardCtx, v: Version, a: &[&[u8]], out: &mut Vec<u8>) {
    let name = String::from_utf8_lossy(a[0]).to_ascii_lowercase();
    match name.as_str() {
        "dbsize" if a.len() == 1 => {
            let n: u64 = ask_all(ctx, |reply| Job::Count { reply })
                .await
                .iter()
                .sum();
            RespWriter::new(out, v).integer(n as i64);
        }
        "flushall" | "flushdb" => {
            let done = ask_all(ctx, |reply| Job::Flush { reply }).await;
            if done.iter().all(|ok| *ok) {
                RespWriter::new(out, v).simple("OK");
            } else {
                RespWriter::new(out, v).error(&super::op_error_text(&NOT_LOGGED));
            }
        }
        "info" => {
            let text = crate::resp::info::info(ctx, &a[1..]).await;
            info_reply(out, v, &text);
        }
        "memory" => {
            let reports = ask_all(ctx, |reply| Job::Report { reply }).await;
            memory_reply(ctx, v, a, &reports, out);
        }
        n if super::scan::is_walk(n.as_bytes()) => super::scan::barrier(ctx, v, a, out).await,
        "save" | "bgsave" | "lastsave" | "shutdown" => super::save::barrier(ctx, v, a, out).await,
        _ => RespWriter::new(out, v).error(&resp::err_wrong_arity(&name)),
    }
}

/// [`barrier`] for DBSIZE, FLUSHALL, FLUSHDB and INFO inside a transaction (`resp/multi.rs`),
/// with every shard held: it counts, empties or reports them with no other command between.
/// FLUSHALL still empties each engine through `ShardCtx::flush` (the parked shards' too), so
/// WATCH and a persistence log see it as they do outside a transaction.
pub(crate) fn in_transaction(
    ctx: &ShardCtx,
    held: &mut Held<'_>,
    v: Version,
    a: &[&[u8]],
    out: &mut Vec<u8>,
) {
    let name = String::from_utf8_lossy(a[0]).to_ascii_lowercase();
    let mut w = RespWriter::new(out, v);
    match name.as_str() {
        "dbsize" if a.len() == 1 => match held.count() {
            Some(n) => w.integer(n as i64),
            None => w.error(ERR_UNAVAILABLE),
        },
        "flushall" | "flushdb" => match held.flush() {
            Some(true) => w.simple("OK"),
            Some(false) => w.error(&super::op_error_text(&NOT_LOGGED)),
            None => w.error(ERR_UNAVAILABLE),
        },
        "info" => match held.reports() {
            Some(reports) => {
                let text = crate::resp::info::render(ctx, &a[1..], &reports);
                info_reply(out, v, &text);
            }
            None => w.error(ERR_UNAVAILABLE),
        },
        "memory" => match held.reports() {
            Some(reports) => memory_reply(ctx, v, a, &reports, out),
            None => w.error(ERR_UNAVAILABLE),
        },
        "bgsave" | "lastsave" => super::save::in_transaction(ctx, v, a, out),
        _ => w.error(&resp::err_wrong_arity(&name)),
    }
}

/// MEMORY DOCTOR (a text, as INFO's) or MEMORY STATS (`keyspace::memory` let only these two
/// through as barriers) from every shard's report.
fn memory_reply(
    ctx: &ShardCtx,
    v: Version,
    a: &[&[u8]],
    reports: &[directkv_engine::Report],
    out: &mut Vec<u8>,
) {
    if a[1].eq_ignore_ascii_case(b"doctor") {
        let text = super::memory::doctor(reports, ctx.stats.live.maxmemory_policy());
        info_reply(out, v, &text);
    } else {
        let clients = ctx.stats.clients.bytes() as u64;
        super::memory::stats(&mut RespWriter::new(out, v), reports, clients);
    }
}
