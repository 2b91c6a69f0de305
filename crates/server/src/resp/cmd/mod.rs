//! RESP commands: each family turns a command's arguments into engine operations and a reply
//! recipe (`plan`), or answers at once. Commands that need every shard (DBSIZE, FLUSHALL, INFO)
//! are "barriers": the connection runs what is pending first, then them.

pub mod bits;
pub mod client;
pub mod command;
pub mod config_cmd;
pub mod dkv;
pub mod expiry;
pub mod glob;
pub mod keyspace;
pub mod memory;
pub mod save;
pub mod scan;
pub mod server;
pub mod strings;

use directkv_engine::OpError;
use directkv_proto::resp::{self, RespWriter, Version};

use crate::resp::reply::Pending;

/// Connection state the commands may read or change.
pub struct Session {
    pub version: Version,
    pub authenticated: bool,
    pub name: Option<Vec<u8>>,
    pub quit: bool,
    /// MULTI's queue and WATCH's keys (`resp/multi.rs`).
    pub(crate) multi: crate::resp::multi::Multi,
    /// The connection's registry entry and the server's shared state, for CLIENT, CONFIG,
    /// SHUTDOWN (`client.rs`).
    pub(crate) admin: client::Admin,
}

/// Every command the server accepts, as COMMAND LIST answers them: (name, Redis arity: N is
/// exactly N arguments counting the name, -N at least N). docs/commands.md lists the same names
/// (the test `commands_doc` holds them together); a new command is one row here and there.
pub const COMMANDS: &[(&str, i32)] = &[
    ("get", 2),
    ("set", -3),
    ("getset", 3),
    ("getdel", 2),
    ("del", -2),
    ("unlink", -2),
    ("exists", -2),
    ("mget", -2),
    ("mset", -3),
    ("incr", 2),
    ("decr", 2),
    ("incrby", 3),
    ("decrby", 3),
    ("incrbyfloat", 3),
    ("strlen", 2),
    ("append", 3),
    ("dkv.vset", -4),
    ("dkv.vget", 3),
    ("dkv.update", 5),
    ("dkv.updatev", 5),
    ("dkv.updatevv", -5),
    ("dkv.reduce", 5),
    ("dkv.filter", 5),
    ("dkv.cas", 4),
    ("dkv.help", 1),
    ("ping", -1),
    ("echo", 2),
    ("quit", -1),
    ("select", 2),
    ("auth", -2),
    ("hello", -1),
    ("command", -1),
    ("client", -2),
    ("config", -2),
    ("info", -1),
    ("dbsize", 1),
    ("flushall", -1),
    ("flushdb", -1),
    ("expire", -3),
    ("pexpire", -3),
    ("expireat", -3),
    ("pexpireat", -3),
    ("ttl", 2),
    ("pttl", 2),
    ("expiretime", 2),
    ("pexpiretime", 2),
    ("persist", 2),
    ("setex", 4),
    ("psetex", 4),
    ("getex", -2),
    ("getrange", 4),
    ("substr", 4),
    ("setrange", 4),
    ("getbit", 3),
    ("setbit", 4),
    ("bitcount", -2),
    ("bitpos", -3),
    ("type", 2),
    ("touch", -2),
    ("rename", 3),
    ("renamenx", 3),
    ("copy", -3),
    ("msetnx", -3),
    ("object", -2),
    ("memory", -2),
    ("multi", 1),
    ("exec", 1),
    ("discard", 1),
    ("watch", -2),
    ("unwatch", 1),
    ("time", 1),
    ("lastsave", 1),
    ("shutdown", -1),
    ("setnx", 3),
    ("scan", -2),
    ("keys", 2),
    ("randomkey", 1),
    ("save", 1),
    ("bgsave", -1),
];

/// What a command needs beyond the plan.
pub enum Planned {
    /// Added to the pending batch.
    Queued,
    /// Needs all shards: run pending commands first, then call `server::barrier`.
    Barrier,
    /// A multi-key command that runs all or nothing (`shard/atomic.rs`): run pending commands
    /// first, then it alone with [`atomic`].
    Atomic,
    /// EXEC or WATCH (`resp/multi.rs`): run pending commands first, then `multi::run`.
    Multi,
}

/// The longest command name looked up; a longer one is an unknown command (Redis's longest is
/// 20 bytes, directkv's `DKV.` commands are shorter).
const NAME_BYTES_MAX: usize = 32;

/// A command name in ASCII lower case, on the stack: `plan` runs for every command, and
/// lower-casing into a new `String` cost an allocation and a free per command.
#[derive(Clone, Copy)]
pub(crate) struct Name {
    bytes: [u8; NAME_BYTES_MAX],
    len: usize,
}

impl Name {
    /// An empty name, which matches no command, for one that is longer than `NAME_BYTES_MAX`
    /// or not ASCII (no command name is either); the unknown-command reply quotes the original.
    pub(crate) fn lower(raw: &[u8]) -> Name {
        let mut bytes = [0u8; NAME_BYTES_MAX];
        if raw.len() > NAME_BYTES_MAX {
            return Name { bytes, len: 0 };
        }
        // One pass: lower-case each byte and gather the high bits to check for ASCII.
        let mut high = 0u8;
        for (d, &b) in bytes.iter_mut().zip(raw) {
            high |= b;
            *d = b.to_ascii_lowercase();
        }
        let len = if high < 0x80 { raw.len() } else { 0 };
        Name { bytes, len }
    }

    /// The lower-cased name's bytes (ASCII; empty for none). Commands match on bytes, so no
    /// UTF-8 check (or `unsafe` to skip one) is made per command.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Plans one command (`args[0]` is its name).
pub fn plan(
    p: &mut Pending,
    s: &mut Session,
    args: &[&[u8]],
    requirepass: Option<&str>,
) -> Planned {
    let lowered = Name::lower(args[0]);
    let name = lowered.as_bytes();
    let v = s.version;
    // For CLIENT LIST's `cmd` (published once per batch): a copy, no allocation.
    s.admin.cmd = lowered;
    s.admin.sub.len = 0;
    if requirepass.is_some() && !s.authenticated && !matches!(name, b"auth" | b"hello" | b"quit") {
        p.immediate(|o| RespWriter::new(o, v).error(resp::err_noauth()));
        return Planned::Queued;
    }
    if let Some(r) = crate::resp::multi::intercept(p, s, name, args) {
        return r;
    }
    if let Some(r) = strings::plan(p, v, name, args) {
        return r;
    }
    if let Some(r) = bits::plan(p, v, name, args) {
        return r;
    }
    if let Some(r) = keyspace::plan(p, v, name, args) {
        return r;
    }
    if let Some(r) = dkv::plan(p, v, name, args) {
        return r;
    }
    if let Some(r) = expiry::plan(p, v, name, args) {
        return r;
    }
    if let Some(r) = server::plan(p, s, name, args, requirepass) {
        return r;
    }
    if let Some(r) = scan::plan(p, v, name, args) {
        return r;
    }
    let msg = resp::err_unknown_command(args[0], args[1..].iter().copied());
    p.immediate(|o| RespWriter::new(o, v).error_bytes(&msg));
    Planned::Queued
}

/// Runs a command that `plan` answered [`Planned::Atomic`] for, into the emptied `p`, and
/// appends its reply.
pub(crate) async fn atomic(
    ctx: &crate::shard::ShardCtx,
    p: &mut Pending,
    v: Version,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) {
    let lowered = Name::lower(args[0]);
    if keyspace::is_atomic(lowered.as_bytes()) {
        keyspace::atomic(ctx, p, v, lowered.as_bytes(), args).await;
    } else {
        strings::atomic(ctx, p, v, lowered.as_bytes(), args).await;
    }
    crate::resp::reply::render(p, v, out, &ctx.stats);
    p.clear();
}

/// Writes an arity error and returns `Queued` (`name`: a command name, ASCII).
pub fn arity(p: &mut Pending, v: Version, name: &[u8]) -> Planned {
    let msg = resp::err_wrong_arity(&String::from_utf8_lossy(name));
    p.immediate(|o| RespWriter::new(o, v).error(&msg));
    Planned::Queued
}

pub fn error(p: &mut Pending, v: Version, text: &str) -> Planned {
    p.immediate(|o| RespWriter::new(o, v).error(text));
    Planned::Queued
}

/// Writes a HELP reply as Redis 7 does: an array of status lines.
pub fn help_lines(p: &mut Pending, v: Version, lines: &'static [&'static str]) {
    p.immediate(|o| {
        let mut w = RespWriter::new(o, v);
        w.array_len(lines.len());
        for l in lines {
            w.simple(l);
        }
    });
}

/// The Redis text for an engine error.
pub fn op_error_text(e: &OpError) -> String {
    match e {
        // A whole number of elements that is not one: a scalar operation met a vector.
        OpError::WrongWidth { len, width } if *len > *width && len.is_multiple_of(*width) => {
            format!(
                "ERR value of {len} bytes holds {} elements of {width} bytes, not one scalar: \
                 DKV.UPDATE changes a scalar, DKV.UPDATEV every element of a vector",
                len / width
            )
        }
        OpError::NotAnInteger => resp::err_not_integer().to_string(),
        OpError::NotAFloat => resp::err_not_float().to_string(),
        OpError::Overflow => resp::err_overflow().to_string(),
        OpError::NanOrInfinity => resp::err_nan_or_infinity().to_string(),
        OpError::OutOfMemory => {
            "OOM command not allowed when used memory > 'maxmemory'.".to_string()
        }
        // Redis's word for "writes are refused because persistence failed".
        OpError::NotLogged(why) => format!(
            "MISCONF Errors writing to the persistence log ({why}): commands that may modify the data set are disabled, reads are served. Writes are accepted again once every shard has written a new snapshot of its data (tried each second or more, and on BGSAVE): free the disk."
        ),
        e => format!("ERR {e}"),
    }
}

/// Parses a decimal integer argument as Redis does.
pub fn parse_int(a: &[u8]) -> Option<i64> {
    directkv_engine::strings::parse_i64(a)
}
