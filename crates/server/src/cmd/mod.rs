//! RESP commands: each family turns a command's arguments into engine operations and a reply
//! recipe (`plan`), or answers at once. Commands that need every shard (DBSIZE, FLUSHALL, INFO)
//! are "barriers": the connection runs what is pending first, then them.

pub mod dkv;
pub mod server;
pub mod strings;

use directkv_engine::OpError;
use directkv_proto::resp::{self, RespWriter, Version};

use crate::plan::Pending;

/// Connection state the commands may read or change.
pub struct Session {
    pub version: Version,
    pub authenticated: bool,
    pub name: Option<Vec<u8>>,
    pub quit: bool,
}

/// What a command needs beyond the plan.
pub enum Planned {
    /// Added to the pending batch.
    Queued,
    /// Needs all shards: run pending commands first, then call `server::barrier`.
    Barrier,
}

fn lower(name: &[u8]) -> String {
    String::from_utf8_lossy(name).to_ascii_lowercase()
}

/// Plans one command (`args[0]` is its name).
pub fn plan(
    p: &mut Pending,
    s: &mut Session,
    args: &[&[u8]],
    requirepass: Option<&str>,
) -> Planned {
    let name = lower(args[0]);
    let v = s.version;
    if requirepass.is_some()
        && !s.authenticated
        && !matches!(name.as_str(), "auth" | "hello" | "quit")
    {
        p.immediate(|o| RespWriter::new(o, v).error(resp::err_noauth()));
        return Planned::Queued;
    }
    if let Some(r) = strings::plan(p, v, &name, args) {
        return r;
    }
    if let Some(r) = dkv::plan(p, v, &name, args) {
        return r;
    }
    if let Some(r) = server::plan(p, s, &name, args, requirepass) {
        return r;
    }
    let msg = resp::err_unknown_command(args[0], args[1..].iter().copied());
    p.immediate(|o| RespWriter::new(o, v).error(&msg));
    Planned::Queued
}

/// Writes an arity error and returns `Queued`.
pub fn arity(p: &mut Pending, v: Version, name: &str) -> Planned {
    let msg = resp::err_wrong_arity(name);
    p.immediate(|o| RespWriter::new(o, v).error(&msg));
    Planned::Queued
}

pub fn error(p: &mut Pending, v: Version, text: &str) -> Planned {
    p.immediate(|o| RespWriter::new(o, v).error(text));
    Planned::Queued
}

/// The Redis text for an engine error.
pub fn op_error_text(e: &OpError) -> String {
    match e {
        OpError::NotAnInteger => resp::err_not_integer().to_string(),
        OpError::NotAFloat => resp::err_not_float().to_string(),
        OpError::Overflow => resp::err_overflow().to_string(),
        OpError::NanOrInfinity => resp::err_nan_or_infinity().to_string(),
        OpError::OutOfMemory => {
            "OOM command not allowed when used memory > 'maxmemory'.".to_string()
        }
        e => format!("ERR {e}"),
    }
}

/// Parses a decimal integer argument as Redis does.
pub fn parse_int(a: &[u8]) -> Option<i64> {
    directkv_engine::strings::parse_i64(a)
}
