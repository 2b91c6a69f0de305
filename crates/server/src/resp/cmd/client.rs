//! CLIENT and its subcommands (ID INFO LIST KILL GETNAME SETNAME SETINFO NO-EVICT HELP) over
//! the client registry (`clients.rs`), with Redis 7's reply shapes and error texts, and the
//! per-connection handle (`Admin`) the server commands use: the connection's registry entry,
//! the server's shared state and configuration, and the name of the command being run.
//!
//! ```text
//!  plan() records each command's name in Admin (a copy on the stack, no allocation)
//!  conn.rs, once per batch ──Session::publish──> Entry (name, cmd, idle, qbuf, omem, resp)
//!  CLIENT LIST / INFO ──────── read ───────────> every Entry (clients.rs registry)
//!  CLIENT KILL ─────────────── Entry::close ───> that connection's select! ends: the socket
//!                                                 is closed and its slot released
//! ```
//!
//! Killing one's own connection closes it after the reply, as Redis does.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use directkv_proto::resp::{self, RespWriter, Version};

use super::{arity, error, Name, Planned, Session};
use crate::clients::{Entry, Published, CMD_BYTES_MAX};
use crate::config::ServerConfig;
use crate::resp::reply::Pending;
use crate::stats::ServerStats;

/// A connection's handle on the server for the admin commands.
pub(crate) struct Admin {
    pub(crate) me: Arc<Entry>,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) cfg: Arc<ServerConfig>,
    /// The command being run and, for CLIENT, CONFIG and COMMAND, its subcommand.
    pub(crate) cmd: Name,
    pub(crate) sub: Name,
}

impl Admin {
    pub(crate) fn new(me: Arc<Entry>, stats: Arc<ServerStats>, cfg: Arc<ServerConfig>) -> Admin {
        Admin {
            me,
            stats,
            cfg,
            cmd: Name::lower(b""),
            sub: Name::lower(b""),
        }
    }

    /// The command's name as CLIENT LIST shows it: `name` or `container|sub`.
    fn cmd_name(&self) -> ([u8; CMD_BYTES_MAX], usize) {
        let mut buf = [0u8; CMD_BYTES_MAX];
        let mut len = 0;
        let sub = self.sub.as_bytes();
        let parts: [&[u8]; 3] = if sub.is_empty() {
            [self.cmd.as_bytes(), b"", b""]
        } else {
            [self.cmd.as_bytes(), b"|", sub]
        };
        for part in parts {
            for &b in part {
                if len < CMD_BYTES_MAX {
                    buf[len] = b;
                    len += 1;
                }
            }
        }
        (buf, len)
    }
}

impl Session {
    /// Tells the registry what this connection last did (once per batch of commands, from
    /// `resp/conn.rs`): the command, now, its buffers and protocol.
    pub(crate) fn publish(&self, qbuf: usize, qbuf_free: usize, omem: usize, tot_mem: usize) {
        let (cmd, cmd_len) = self.admin.cmd_name();
        let resp = if self.version == Version::Resp3 { 3 } else { 2 };
        self.admin.me.touch();
        self.admin.me.publish(|p| {
            p.last_at = Instant::now();
            p.cmd = cmd;
            p.cmd_len = cmd_len;
            p.qbuf = qbuf;
            p.qbuf_free = qbuf_free;
            p.omem = omem;
            p.tot_mem = tot_mem;
            p.resp = resp;
        });
    }
}

/// Sets the connection's name if Redis would take it (printable ASCII without spaces); ""
/// removes the name.
pub(crate) fn set_name(s: &mut Session, name: &[u8]) -> Result<(), &'static str> {
    if name.iter().any(|b| !(b'!'..=b'~').contains(b)) {
        return Err("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    s.name = (!name.is_empty()).then(|| name.to_vec());
    let published = s.name.clone();
    s.admin.me.publish(|p| p.name = published);
    Ok(())
}

/// The longest library name or version CLIENT SETINFO accepts. (Names are not limited, as in
/// Redis 7.0 and checked by the differential test: a name is bounded by the largest argument
/// the parser takes.)
const CLIENT_TEXT_BYTES_MAX: usize = 1024;

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "    * ID <client-id> [<client-id> ...]",
    "      Return clients of the given ids.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "HELP",
    "    Print this help.",
];

/// Client types as Redis names them; every directkv client is `normal`.
fn client_type(t: &[u8]) -> Option<bool> {
    let t = String::from_utf8_lossy(t).to_ascii_lowercase();
    match t.as_str() {
        "normal" => Some(true),
        "master" | "replica" | "slave" | "pubsub" => Some(false),
        _ => None,
    }
}

fn unknown_type(t: &[u8]) -> String {
    format!("ERR Unknown client type '{}'", String::from_utf8_lossy(t))
}

/// CLIENT subcommand ...
pub(crate) fn client(p: &mut Pending, s: &mut Session, a: &[&[u8]]) -> Planned {
    let v = s.version;
    let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    s.admin.sub = Name::lower(a[1]);
    let n = a.len();
    match sub.as_str() {
        "id" | "info" | "getname" | "help" if n != 2 => {
            arity(p, v, format!("client|{sub}").as_bytes())
        }
        "setname" | "no-evict" if n != 3 => arity(p, v, format!("client|{sub}").as_bytes()),
        "setinfo" if n != 4 => arity(p, v, b"client|setinfo"),
        "kill" if n < 3 => arity(p, v, b"client|kill"),
        "id" => {
            let id = s.admin.me.id as i64;
            p.immediate(|o| RespWriter::new(o, v).integer(id));
            Planned::Queued
        }
        "getname" => {
            let name = s.name.clone();
            p.immediate(|o| match &name {
                Some(n) => RespWriter::new(o, v).bulk(n),
                None => RespWriter::new(o, v).null(),
            });
            Planned::Queued
        }
        "setname" => match set_name(s, a[2]) {
            Ok(()) => ok(p, v),
            Err(e) => error(p, v, e),
        },
        "setinfo" => setinfo(p, s, a[2], a[3]),
        "no-evict" => {
            let on = if a[2].eq_ignore_ascii_case(b"on") {
                true
            } else if a[2].eq_ignore_ascii_case(b"off") {
                false
            } else {
                return error(p, v, resp::err_syntax());
            };
            s.admin.me.no_evict.store(on, Ordering::Relaxed);
            ok(p, v)
        }
        "info" => {
            s.publish_now();
            let mut text = String::new();
            line(&mut text, &s.admin.me, Instant::now());
            verbatim(p, v, text);
            Planned::Queued
        }
        "list" => list(p, s, a),
        "kill" => kill(p, s, a),
        "help" => {
            super::help_lines(p, v, CLIENT_HELP);
            Planned::Queued
        }
        _ => {
            let msg = resp::err_unknown_subcommand("CLIENT", a[1]);
            error(p, v, &msg)
        }
    }
}

impl Session {
    /// Publishes the command being run, now, so that CLIENT LIST and INFO show this
    /// connection's own line as Redis does (its current command, idle 0).
    fn publish_now(&self) {
        let (cmd, cmd_len) = self.admin.cmd_name();
        let resp = if self.version == Version::Resp3 { 3 } else { 2 };
        self.admin.me.publish(|p| {
            p.last_at = Instant::now();
            p.cmd = cmd;
            p.cmd_len = cmd_len;
            p.resp = resp;
        });
    }
}

fn ok(p: &mut Pending, v: Version) -> Planned {
    p.immediate(|o| RespWriter::new(o, v).simple("OK"));
    Planned::Queued
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value (Redis 7.2's; redis-py sends it on connect).
fn setinfo(p: &mut Pending, s: &mut Session, attr: &[u8], value: &[u8]) -> Planned {
    let v = s.version;
    let attr = String::from_utf8_lossy(attr).to_ascii_lowercase();
    if attr != "lib-name" && attr != "lib-ver" {
        let msg = format!("ERR Unrecognized option '{attr}'");
        return error(p, v, &msg);
    }
    if value.len() > CLIENT_TEXT_BYTES_MAX || value.iter().any(|b| !(b'!'..=b'~').contains(b)) {
        let msg = format!("ERR {attr} cannot contain spaces, newlines or special characters.");
        return error(p, v, &msg);
    }
    let value = value.to_vec();
    s.admin.me.publish(|p| {
        if attr == "lib-name" {
            p.lib_name = value;
        } else {
            p.lib_ver = value;
        }
    });
    ok(p, v)
}

/// Writes CLIENT LIST and INFO's text in RESP3 as a verbatim string, in RESP2 as a bulk one.
fn verbatim(p: &mut Pending, v: Version, text: String) {
    p.immediate(|o| super::server::info_reply(o, v, &text));
}

fn addr(a: Option<std::net::SocketAddr>) -> String {
    a.map(|a| a.to_string()).unwrap_or_default()
}

/// One CLIENT LIST line (with its newline), Redis 7.0's fields in its order; the ones that do
/// not apply to directkv (pub/sub, MULTI, reply lists) are 0 or -1 as Redis shows them unused,
/// then 7.2's `lib-name` and `lib-ver`.
fn line(out: &mut String, e: &Entry, now: Instant) {
    let p: Published = e.published();
    let no_evict = e.no_evict.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db=0 sub=0 psub=0 \
         ssub=0 multi=-1 qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 \
         omem={} tot-mem={} events=r cmd={} user=default redir=-1 resp={} lib-name={} \
         lib-ver={}",
        e.id,
        addr(e.peer),
        addr(e.local),
        e.fd,
        String::from_utf8_lossy(p.name.as_deref().unwrap_or_default()),
        now.saturating_duration_since(e.created).as_secs(),
        now.saturating_duration_since(p.last_at).as_secs(),
        if no_evict { "e" } else { "N" },
        p.qbuf,
        p.qbuf_free,
        p.omem,
        p.tot_mem,
        String::from_utf8_lossy(p.cmd()),
        p.resp,
        String::from_utf8_lossy(&p.lib_name),
        String::from_utf8_lossy(&p.lib_ver),
    );
}

/// A strictly positive client id, as Redis parses one.
fn client_id(a: &[u8]) -> Option<u64> {
    super::parse_int(a).filter(|&n| n > 0).map(|n| n as u64)
}

/// CLIENT LIST [TYPE type] [ID id ...]
fn list(p: &mut Pending, s: &mut Session, a: &[&[u8]]) -> Planned {
    let v = s.version;
    let mut ids: Option<Vec<u64>> = None;
    let mut any_type = true;
    if a.len() == 4 && a[2].eq_ignore_ascii_case(b"type") {
        match client_type(a[3]) {
            Some(normal) => any_type = normal,
            None => return error(p, v, &unknown_type(a[3])),
        }
    } else if a.len() > 3 && a[2].eq_ignore_ascii_case(b"id") {
        let mut want = Vec::with_capacity(a.len() - 3);
        for id in &a[3..] {
            match client_id(id) {
                Some(id) => want.push(id),
                None => return error(p, v, "ERR Invalid client ID"),
            }
        }
        ids = Some(want);
    } else if a.len() != 2 {
        return error(p, v, resp::err_syntax());
    }
    s.publish_now();
    let now = Instant::now();
    let mut text = String::new();
    if any_type {
        for e in s.admin.stats.clients.snapshot() {
            // A killed client is gone, though its task may not have run yet.
            if !e.is_closing() && ids.as_ref().is_none_or(|ids| ids.contains(&e.id)) {
                line(&mut text, &e, now);
            }
        }
    }
    verbatim(p, v, text);
    Planned::Queued
}

/// What CLIENT KILL's new form selects.
#[derive(Default)]
struct Filter {
    id: Option<u64>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    /// TYPE other than normal, or USER other than default: nothing matches.
    none: bool,
    skip_me: bool,
}

/// CLIENT KILL ip:port | CLIENT KILL option value [option value ...]
fn kill(p: &mut Pending, s: &mut Session, a: &[&[u8]]) -> Planned {
    let v = s.version;
    if a.len() == 3 {
        // The old form: one address, +OK or an error.
        let hit = s
            .admin
            .stats
            .clients
            .snapshot()
            .into_iter()
            .find(|e| addr(e.peer).as_bytes() == a[2]);
        return match hit {
            Some(e) => {
                close(s, &e);
                ok(p, v)
            }
            None => error(p, v, "ERR No such client"),
        };
    }
    if !a.len().is_multiple_of(2) {
        return error(p, v, resp::err_syntax());
    }
    let mut f = Filter {
        skip_me: true,
        ..Filter::default()
    };
    for pair in a[2..].chunks(2) {
        let (opt, val) = (pair[0], pair[1]);
        match String::from_utf8_lossy(opt).to_ascii_lowercase().as_str() {
            "id" => match client_id(val) {
                Some(id) => f.id = Some(id),
                None => return error(p, v, "ERR client-id should be greater than 0"),
            },
            "type" => match client_type(val) {
                Some(normal) => f.none |= !normal,
                None => return error(p, v, &unknown_type(val)),
            },
            "addr" => f.addr = Some(val.to_vec()),
            "laddr" => f.laddr = Some(val.to_vec()),
            "user" if val == b"default" => {}
            "user" => {
                let msg = format!("ERR No such user '{}'", String::from_utf8_lossy(val));
                return error(p, v, &msg);
            }
            "skipme" if val.eq_ignore_ascii_case(b"yes") => f.skip_me = true,
            "skipme" if val.eq_ignore_ascii_case(b"no") => f.skip_me = false,
            _ => return error(p, v, resp::err_syntax()),
        }
    }
    let mut killed = 0i64;
    if !f.none {
        for e in s.admin.stats.clients.snapshot() {
            let me = e.id == s.admin.me.id;
            if (me && f.skip_me)
                || f.id.is_some_and(|id| id != e.id)
                || f.addr
                    .as_ref()
                    .is_some_and(|x| x != addr(e.peer).as_bytes())
                || f.laddr
                    .as_ref()
                    .is_some_and(|x| x != addr(e.local).as_bytes())
            {
                continue;
            }
            close(s, &e);
            killed += 1;
        }
    }
    p.immediate(|o| RespWriter::new(o, v).integer(killed));
    Planned::Queued
}

/// Closes a connection: another at once (its task ends at its next await point, which
/// closes the socket and releases its slot), this one after its reply.
fn close(s: &mut Session, e: &Arc<Entry>) {
    if e.id == s.admin.me.id {
        s.quit = true;
    } else {
        tracing::info!(client = e.id, peer = ?e.peer, by = s.admin.me.id, "CLIENT KILL");
        e.close();
    }
}
