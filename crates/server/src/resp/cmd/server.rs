//! Connection and server commands: PING ECHO HELLO AUTH SELECT QUIT COMMAND CLIENT CONFIG, and
//! the barriers that need every shard: INFO DBSIZE FLUSHALL FLUSHDB.

use directkv_proto::resp::{self, RespWriter, Version};

use super::{arity, error, Planned, Session};
use crate::resp::reply::Pending;
use crate::shard::{ask_all, Job, ShardCtx};

const SERVER_NAME: &str = "directkv";
const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

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
        b"command" => command(p, v, a),
        b"client" if n >= 2 => client(p, s, a),
        b"config" if n >= 2 => config(p, v, a),
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
        b"ping" | b"echo" | b"select" | b"auth" | b"client" | b"config" => arity(p, v, name),
        _ => return None,
    })
}

/// HELP replies, worded as Redis 7's for the subcommands directkv has.
const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all commands (directkv: an empty array).",
    "COUNT",
    "    Return the total number of commands in this server.",
    "LIST",
    "    Return a list of all commands in this server.",
    "INFO [<command-name> ...]",
    "    Return details about commands (directkv: an empty array).",
    "DOCS [<command-name> ...]",
    "    Return documentation details about commands (directkv: an empty map; see docs/commands.md).",
    "HELP",
    "    Print this help.",
];

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "SETINFO <option> <value>",
    "    Accepted and ignored (LIB-NAME, LIB-VER).",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "HELP",
    "    Print this help.",
];

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values",
    "    (directkv: save, appendonly, databases, maxmemory-policy; only exact names and *).",
    "SET <directive> <value>",
    "    Not supported: directkv is configured by its configuration file.",
    "RESETSTAT",
    "    Accepted; does nothing.",
    "HELP",
    "    Print this help.",
];

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

/// Sets the connection's name if Redis would take it (printable ASCII without spaces); ""
/// removes the name.
fn set_name(s: &mut Session, name: &[u8]) -> Result<(), &'static str> {
    if name.iter().any(|b| !(b'!'..=b'~').contains(b)) {
        return Err("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    s.name = (!name.is_empty()).then(|| name.to_vec());
    Ok(())
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
                if let Err(e) = set_name(s, a[i + 1]) {
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
        w.integer(1);
        w.bulk(b"mode");
        w.bulk(b"standalone");
        w.bulk(b"role");
        w.bulk(b"master");
        w.bulk(b"modules");
        w.array_len(0);
    });
    Planned::Queued
}

fn command(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let sub = a
        .get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    match sub.as_deref() {
        // Redis' arities of COMMAND COUNT and COMMAND HELP: no argument.
        Some(name @ ("count" | "help")) if a.len() != 2 => {
            return arity(p, v, format!("command|{name}").as_bytes());
        }
        None | Some("info") => p.immediate(|o| RespWriter::new(o, v).array_len(0)),
        Some("list") => p.immediate(|o| {
            let mut w = RespWriter::new(o, v);
            w.array_len(super::COMMANDS.len());
            for (name, _) in super::COMMANDS {
                w.bulk(name.as_bytes());
            }
        }),
        Some("docs") => p.immediate(|o| RespWriter::new(o, v).map_len(0)),
        Some("count") => {
            let n = super::COMMANDS.len() as i64;
            p.immediate(|o| RespWriter::new(o, v).integer(n))
        }
        Some("help") => super::help_lines(p, v, COMMAND_HELP),
        Some(_) => {
            let msg = resp::err_unknown_subcommand("COMMAND", a[1]);
            p.immediate(|o| RespWriter::new(o, v).error(&msg))
        }
    }
    Planned::Queued
}

fn client(p: &mut Pending, s: &mut Session, a: &[&[u8]]) -> Planned {
    let v = s.version;
    let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    match sub.as_str() {
        "setname" if a.len() == 3 => match set_name(s, a[2]) {
            Ok(()) => ok_text(p, v, "OK"),
            Err(e) => error(p, v, e),
        },
        "setinfo" if a.len() == 4 => ok_text(p, v, "OK"),
        "getname" if a.len() == 2 => {
            let name = s.name.clone();
            p.immediate(|o| match &name {
                Some(n) => RespWriter::new(o, v).bulk(n),
                None => RespWriter::new(o, v).null(),
            });
            Planned::Queued
        }
        "id" if a.len() == 2 => {
            p.immediate(|o| RespWriter::new(o, v).integer(1));
            Planned::Queued
        }
        "help" if a.len() == 2 => {
            super::help_lines(p, v, CLIENT_HELP);
            Planned::Queued
        }
        "setname" | "setinfo" | "getname" | "id" | "help" => {
            arity(p, v, format!("client|{sub}").as_bytes())
        }
        _ => {
            let msg = resp::err_unknown_subcommand("CLIENT", a[1]);
            error(p, v, &msg)
        }
    }
}

/// CONFIG GET with the settings clients probe for (redis-benchmark asks for `save` and
/// `appendonly`); CONFIG SET is accepted for nothing.
fn config(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    const KNOWN: [(&str, &str); 4] = [
        ("save", ""),
        ("appendonly", "no"),
        ("databases", "1"),
        ("maxmemory-policy", "noeviction"),
    ];
    match String::from_utf8_lossy(a[1]).to_ascii_lowercase().as_str() {
        "get" if a.len() >= 3 => {
            // An exact name is answered as it was asked (Redis 7 echoes its case), `*` with
            // every name.
            let mut hits: Vec<(&[u8], &str, &str)> = Vec::new();
            for &pat in &a[2..] {
                let lower = String::from_utf8_lossy(pat).to_ascii_lowercase();
                for (k, val) in KNOWN {
                    if (lower == "*" || lower == k) && !hits.iter().any(|h| h.1 == k) {
                        let shown = if lower == "*" { k.as_bytes() } else { pat };
                        hits.push((shown, k, val));
                    }
                }
            }
            p.immediate(|o| {
                let mut w = RespWriter::new(o, v);
                w.map_len(hits.len());
                for (shown, _, val) in hits {
                    w.bulk(shown);
                    w.bulk(val.as_bytes());
                }
            });
            Planned::Queued
        }
        // Redis' arities: CONFIG GET takes a pattern, RESETSTAT and HELP nothing.
        "get" => arity(p, v, b"config|get"),
        "resetstat" | "help" if a.len() != 2 => {
            let name = format!(
                "config|{}",
                String::from_utf8_lossy(a[1]).to_ascii_lowercase()
            );
            arity(p, v, name.as_bytes())
        }
        "set" => error(
            p,
            v,
            "ERR CONFIG SET is not supported by directkv; use the configuration file",
        ),
        "resetstat" => ok_text(p, v, "OK"),
        "help" => {
            super::help_lines(p, v, CONFIG_HELP);
            Planned::Queued
        }
        _ => {
            let msg = resp::err_unknown_subcommand("CONFIG", a[1]);
            error(p, v, &msg)
        }
    }
}

/// INFO's text as Redis 7 sends it: in RESP3 a verbatim string of format `txt`
/// (`=len\r\ntxt:text\r\n`, found by the differential test), in RESP2 a bulk string.
fn info_reply(out: &mut Vec<u8>, v: Version, text: &str) {
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
            ask_all(ctx, |reply| Job::Flush { reply }).await;
            RespWriter::new(out, v).simple("OK");
        }
        "info" => {
            let text = crate::resp::info::info(ctx, &a[1..]).await;
            info_reply(out, v, &text);
        }
        _ => RespWriter::new(out, v).error(&resp::err_wrong_arity(&name)),
    }
}
