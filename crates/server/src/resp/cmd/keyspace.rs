//! Keyspace commands: TYPE TOUCH RENAME RENAMENX COPY MSETNX OBJECT MEMORY, with Redis 7.0's
//! replies and error texts.
//!
//! ```text
//!  TYPE TOUCH OBJECT          queued reads; `render` derives the reply (`Recipe::Key`)
//!  RENAME RENAMENX COPY       Planned::Atomic ─> shard/exclusive.rs: the key's shards held,
//!  MSETNX MEMORY USAGE        read, decide, write (all or nothing) with nothing in between
//! ```
//!
//! Deadlines: RENAME and COPY carry the source's deadline to the destination. The value moves
//! in one place, [`moved`]: the source's deadline is read in the same hold as its value and
//! its put sets it there. MEMORY USAGE counts a deadline's bytes (a key with one is a record),
//! and a memcached item's flags and CAS (read with the deadline, `Op::ttl_with_meta`).
//!
//! Inside MULTI the same commands run in EXEC's place for them ([`Exclusive`]): the
//! transaction holds every shard it touches and runs them between its other commands.

use directkv_engine::{cond, expire_args, Op, OpError, Status, NO_DEADLINE};
use directkv_proto::resp::{self, RespWriter, Version};

use super::{arity, error, help_lines, op_error_text, parse_int, Planned};
use crate::config::ServerConfig;
use crate::resp::reply::{Pending, Recipe};
use crate::shard::dispatch::{shard_of, Plan};
use crate::shard::{exclusive, ShardCtx};

/// Redis's reply to OBJECT FREQ when no LFU policy is selected: directkv has none.
const ERR_NO_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not \
    tracked. Please note that when switching between policies at runtime LRU and LFU data will \
    take some time to adjust.";
/// OBJECT IDLETIME: directkv keeps no access time per key (its approximated LRU is a reference
/// bit), so, as Redis does for a policy that does not track it, it refuses.
const ERR_NO_IDLETIME: &str = "ERR idle time not tracked: directkv keeps no access time per key";
const ERR_NO_SUCH_KEY: &str = "ERR no such key";
const ERR_SAME_OBJECT: &str = "ERR source and destination objects are the same";

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

/// What the reply of a keyspace read derives from its operation's result.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Key {
    Type,
    Encoding,
    Freq,
    IdleTime,
    RefCount,
}

pub fn plan(p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) -> Option<Planned> {
    let n = a.len();
    Some(match name {
        b"type" if n == 2 => read(p, a[1], Key::Type),
        b"touch" if n >= 2 => {
            let first = p.next_op();
            for k in &a[1..] {
                p.op(&Op::get(k).no_return());
            }
            p.recipes.push(Recipe::CountFound { first, n: n - 1 });
            Planned::Queued
        }
        b"rename" | b"renamenx" if n == 3 => Planned::Atomic,
        b"copy" if n >= 3 => Planned::Atomic,
        b"msetnx" if n >= 3 && n % 2 == 1 => Planned::Atomic,
        b"object" if n >= 2 => object(p, v, a),
        b"memory" if n >= 2 => memory(p, v, a),
        b"type" | b"touch" | b"rename" | b"renamenx" | b"copy" | b"msetnx" | b"object"
        | b"memory" => arity(p, v, name),
        _ => return None,
    })
}

/// Whether `name` is one of this family's atomic commands.
pub fn is_atomic(name: &[u8]) -> bool {
    matches!(
        name,
        b"rename" | b"renamenx" | b"copy" | b"msetnx" | b"memory"
    )
}

fn read(p: &mut Pending, key: &[u8], d: Key) -> Planned {
    let op = p.op(&Op::get(key));
    p.recipes.push(Recipe::Key { op, d });
    Planned::Queued
}

/// OBJECT ENCODING | FREQ | IDLETIME | REFCOUNT key, OBJECT HELP.
fn object(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let sub = a[1].to_ascii_lowercase();
    let d = match sub.as_slice() {
        b"help" if a.len() == 2 => {
            help_lines(p, v, OBJECT_HELP);
            return Planned::Queued;
        }
        b"encoding" => Key::Encoding,
        b"freq" => Key::Freq,
        b"idletime" => Key::IdleTime,
        b"refcount" => Key::RefCount,
        b"help" => return sub_arity(p, v, "object", &sub),
        _ => return error(p, v, &resp::err_unknown_subcommand("object", a[1])),
    };
    if a.len() != 3 {
        return sub_arity(p, v, "object", &sub);
    }
    read(p, a[2], d)
}

/// MEMORY USAGE key [SAMPLES count], MEMORY DOCTOR, MEMORY STATS (every shard's report:
/// `server::barrier`, `cmd/memory.rs`), MEMORY PURGE, MEMORY MALLOC-STATS, MEMORY HELP.
fn memory(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let sub = a[1].to_ascii_lowercase();
    match sub.as_slice() {
        b"help" if a.len() == 2 => {
            help_lines(p, v, MEMORY_HELP);
            Planned::Queued
        }
        b"usage" if a.len() >= 3 => {
            // SAMPLES is checked as Redis does and has no effect: a string has no elements.
            let mut rest = a[3..].iter();
            while let Some(opt) = rest.next() {
                let Some(count) = rest.next().filter(|_| opt.eq_ignore_ascii_case(b"samples"))
                else {
                    return error(p, v, resp::err_syntax());
                };
                match parse_int(count) {
                    Some(c) if c >= 0 => {}
                    Some(_) => return error(p, v, resp::err_syntax()),
                    None => return error(p, v, resp::err_not_integer()),
                }
            }
            Planned::Atomic
        }
        b"doctor" | b"stats" if a.len() == 2 => Planned::Barrier,
        // The arenas are mapped once and keep no allocator's dirty pages: nothing to purge,
        // and no allocator statistics (Redis's answer when not built with jemalloc).
        b"purge" if a.len() == 2 => {
            p.immediate(|o| RespWriter::new(o, v).simple("OK"));
            Planned::Queued
        }
        b"malloc-stats" if a.len() == 2 => {
            p.immediate(|o| {
                super::server::info_reply(o, v, "Stats not supported for the current allocator")
            });
            Planned::Queued
        }
        b"help" | b"usage" | b"doctor" | b"stats" | b"purge" | b"malloc-stats" => {
            sub_arity(p, v, "memory", &sub)
        }
        _ => error(p, v, &resp::err_unknown_subcommand("memory", a[1])),
    }
}

/// Redis's arity error for a subcommand: `'object|encoding'`.
fn sub_arity(p: &mut Pending, v: Version, cmd: &str, sub: &[u8]) -> Planned {
    let name = format!("{cmd}|{}", String::from_utf8_lossy(sub));
    error(p, v, &resp::err_wrong_arity(&name))
}

/// The encoding Redis reports for a string value it stored from SET: "int" for the decimal
/// text of an i64 (at most 20 bytes, no leading zero), "embstr" up to 44 bytes, else "raw".
/// (Redis reports "raw" for any value APPEND, SETRANGE or SETBIT changed; directkv keeps no
/// such history per key and answers by the value: docs/commands.md.)
pub(crate) fn encoding(value: &[u8]) -> &'static str {
    if parse_int(value).is_some() {
        "int"
    } else if value.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// Redis shares one object among every key whose value is an integer in 0..10000
/// (`OBJ_SHARED_INTEGERS`) and reports its reference count as `OBJ_SHARED_REFCOUNT`
/// (`i32::MAX`); every other string value has one reference. (Redis stops sharing integers
/// under an LRU or LFU policy with maxmemory set; directkv's approximated LRU keeps no
/// per-key state, so the answer does not depend on the policy: docs/commands.md.)
fn refcount(value: &[u8]) -> i64 {
    const SHARED_INTEGERS: i64 = 10_000;
    match parse_int(value) {
        Some(n) if (0..SHARED_INTEGERS).contains(&n) => i64::from(i32::MAX),
        _ => 1,
    }
}

/// Writes the reply of a `Key` recipe.
pub(crate) fn render(w: &mut RespWriter<'_>, d: Key, s: Status, data: &[u8]) {
    match (s, d) {
        (Status::Error(e), _) => w.error(&op_error_text(&e)),
        (Status::Ok, Key::Type) => w.simple("string"),
        (_, Key::Type) => w.simple("none"),
        (Status::Ok, Key::Encoding) => w.bulk(encoding(data).as_bytes()),
        (Status::Ok, Key::Freq) => w.error(ERR_NO_LFU),
        (Status::Ok, Key::IdleTime) => w.error(ERR_NO_IDLETIME),
        (Status::Ok, Key::RefCount) => w.integer(refcount(data)),
        _ => w.null(),
    }
}

/// A reply decided inside an exclusive section.
pub(crate) enum Answer {
    Ok,
    Null,
    Int(i64),
    Error(String),
}

impl Answer {
    pub(crate) fn write(&self, out: &mut Vec<u8>, v: Version) {
        let mut w = RespWriter::new(out, v);
        match self {
            Answer::Ok => w.simple("OK"),
            Answer::Null => w.null(),
            Answer::Int(i) => w.integer(*i),
            Answer::Error(e) => w.error(e),
        }
    }
}

/// A command that reads before it writes (RENAME, RENAMENX, COPY, MSETNX) or reads what no
/// operation's result carries alone (MEMORY USAGE: value and deadline), parsed: it runs with
/// its keys' shards held (`shard/exclusive.rs`), alone (`atomic`) or inside a transaction
/// (`resp/multi.rs`, which holds every shard of the transaction and runs it in its place).
pub(crate) enum Exclusive<'a> {
    Rename {
        src: &'a [u8],
        dst: &'a [u8],
        nx: bool,
    },
    Copy {
        src: &'a [u8],
        dst: &'a [u8],
        replace: bool,
    },
    Msetnx(Vec<(&'a [u8], &'a [u8])>),
    Usage(&'a [u8]),
}

impl<'a> Exclusive<'a> {
    /// Parses a command `plan` answered `Planned::Atomic` for and `is_atomic` names (arity
    /// and MEMORY's options checked); `Err` is the reply for bad arguments, found before any
    /// key is read, as Redis does.
    pub(crate) fn parse(cfg: &ServerConfig, name: &[u8], a: &[&'a [u8]]) -> Result<Self, Answer> {
        Ok(match name {
            b"rename" | b"renamenx" => Exclusive::Rename {
                src: a[1],
                dst: a[2],
                nx: name == b"renamenx",
            },
            b"copy" => copy_options(a)?,
            b"msetnx" => {
                let pairs: Vec<(&[u8], &[u8])> =
                    a[1..].chunks_exact(2).map(|kv| (kv[0], kv[1])).collect();
                if let Some(e) = pairs
                    .iter()
                    .find_map(|(k, v)| super::strings::limit_error(cfg, k, v))
                {
                    return Err(Answer::Error(op_error_text(&e)));
                }
                Exclusive::Msetnx(pairs)
            }
            b"memory" => Exclusive::Usage(a[2]),
            _ => unreachable!("{} is not an atomic command", String::from_utf8_lossy(name)),
        })
    }

    /// The keys whose shards must be held.
    pub(crate) fn keys(&self) -> Vec<&'a [u8]> {
        match *self {
            Exclusive::Rename { src, dst, .. } | Exclusive::Copy { src, dst, .. } => {
                vec![src, dst]
            }
            Exclusive::Msetnx(ref pairs) => pairs.iter().map(|(k, _)| *k).collect(),
            Exclusive::Usage(key) => vec![key],
        }
    }

    /// Runs it on the held shards (`plan`: scratch, emptied first).
    pub(crate) fn run(
        &self,
        ctx: &ShardCtx,
        h: &mut exclusive::Held<'_>,
        plan: &mut Plan,
    ) -> Answer {
        match *self {
            Exclusive::Rename { src, dst, nx } => rename(h, plan, src, dst, nx),
            Exclusive::Copy { src, dst, replace } => copy(ctx, h, plan, src, dst, replace),
            Exclusive::Msetnx(ref pairs) => msetnx(h, plan, pairs),
            Exclusive::Usage(key) => usage(ctx, h, plan, key),
        }
    }
}

/// Runs RENAME, RENAMENX, COPY, MSETNX or MEMORY USAGE (`plan` answered `Planned::Atomic`)
/// into the empty `p`, with its keys' shards held.
pub(crate) async fn atomic(ctx: &ShardCtx, p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) {
    let answer = match Exclusive::parse(&ctx.cfg, name, a) {
        // A read of one key: one batch on its shard sees value and deadline together.
        Ok(Exclusive::Usage(key)) => {
            let mut plan = Plan::new(ctx.shards());
            usage_plan(&mut plan, key);
            crate::shard::dispatch::execute(ctx, &mut plan).await;
            usage_answer(ctx, &plan, key)
        }
        Ok(e) => {
            let n = ctx.shards();
            let shards: Vec<usize> = e.keys().iter().map(|k| shard_of(k, n)).collect();
            let mut plan = Plan::new(n);
            match exclusive::run(ctx, &shards, |h| e.run(ctx, h, &mut plan)).await {
                Ok(a) => a,
                Err(e) => Answer::Error(op_error_text(&e)),
            }
        }
        Err(a) => a,
    };
    p.immediate(|o| answer.write(o, v));
}

/// MEMORY USAGE key (its options checked by `memory`) on held shards (inside MULTI).
fn usage(ctx: &ShardCtx, h: &mut exclusive::Held<'_>, plan: &mut Plan, key: &[u8]) -> Answer {
    usage_plan(plan, key);
    match h.run(plan) {
        Ok(()) => usage_answer(ctx, plan, key),
        Err(e) => Answer::Error(op_error_text(&e)),
    }
}

/// MEMORY USAGE's reads: the value, the deadline and whether the key has memcached's item
/// meta (flags and CAS), in one batch of the key's shard; both are reads.
fn usage_plan(plan: &mut Plan, key: &[u8]) {
    plan.clear();
    plan.op(&Op::get(key));
    plan.op(&Op::ttl_with_meta(key));
}

/// The arena bytes the key-value takes, computed by the engine from the key's and value's
/// lengths, whether it has a deadline and whether it has item meta (`usage_plan`'s results);
/// null for a missing key.
fn usage_answer(ctx: &ShardCtx, plan: &Plan, key: &[u8]) -> Answer {
    let deadline = ttl_deadline(plan.result(1));
    let meta = matches!(plan.result(1), (Status::Ok, d) if d.get(16) == Some(&1));
    match plan.result(0) {
        (Status::Ok, d) => {
            let bytes = ctx.footprint_bytes(key.len(), d.len(), deadline != NO_DEADLINE, meta);
            Answer::Int(bytes as i64)
        }
        (Status::Error(e), _) => Answer::Error(op_error_text(&e)),
        _ => Answer::Null,
    }
}

/// Reads `keys` (values of the first `with_value`, presence of the rest) under the held shards:
/// `Ok(values)` (None: missing) or the reply for an error.
fn read_keys(
    h: &mut exclusive::Held<'_>,
    plan: &mut Plan,
    keys: &[&[u8]],
    with_value: usize,
) -> Result<Vec<Option<Vec<u8>>>, Answer> {
    plan.clear();
    for (i, k) in keys.iter().enumerate() {
        let op = Op::get(k);
        plan.op(&if i < with_value { op } else { op.no_return() });
    }
    h.run(plan).map_err(|e| Answer::Error(op_error_text(&e)))?;
    (0..keys.len())
        .map(|i| match plan.result(i) {
            (Status::Ok, d) => Ok(Some(d.to_vec())),
            (Status::Error(e), _) => Err(Answer::Error(op_error_text(&e))),
            _ => Ok(None),
        })
        .collect()
}

/// The deadline of `key` (`NO_DEADLINE`: none, or no key), read inside the same hold as its
/// value.
fn deadline_of(h: &mut exclusive::Held<'_>, plan: &mut Plan, key: &[u8]) -> Result<u64, Answer> {
    plan.clear();
    plan.op(&Op::ttl(key));
    h.run(plan).map_err(|e| Answer::Error(op_error_text(&e)))?;
    match plan.result(0) {
        (Status::Error(e), _) => Err(Answer::Error(op_error_text(&e))),
        r => Ok(ttl_deadline(r)),
    }
}

/// The deadline a `Ttl` operation's result carries (`NO_DEADLINE`: none, or no key).
fn ttl_deadline(r: (Status, &[u8])) -> u64 {
    match r {
        (Status::Ok, d) if d.len() >= 16 => u64::from_le_bytes(d[..8].try_into().expect("8 bytes")),
        _ => NO_DEADLINE,
    }
}

/// Stores `value` at `dst` (and deletes `src` when moving), all or nothing. The one place a
/// value moves from key to key: its deadline (`deadline_of` the source; Redis's RENAME and
/// COPY keep the TTL) goes with it.
fn moved(
    h: &mut exclusive::Held<'_>,
    plan: &mut Plan,
    src: Option<&[u8]>,
    dst: &[u8],
    value: &[u8],
    deadline: u64,
) -> Result<(), OpError> {
    plan.clear();
    if let Some(src) = src {
        plan.op(&Op::delete(src));
    }
    let args = expire_args(deadline, cond::ANY);
    plan.op(&if deadline == NO_DEADLINE {
        Op::put(dst, value)
    } else {
        Op::put_expire(dst, value, &args)
    });
    h.run_atomic(plan)
}

/// RENAME / RENAMENX src dst.
fn rename(
    h: &mut exclusive::Held<'_>,
    plan: &mut Plan,
    src: &[u8],
    dst: &[u8],
    nx: bool,
) -> Answer {
    let found = match read_keys(h, plan, &[src, dst], 1) {
        Ok(found) => found,
        Err(a) => return a,
    };
    let Some(value) = &found[0] else {
        return Answer::Error(ERR_NO_SUCH_KEY.into());
    };
    if src == dst || (nx && found[1].is_some()) {
        return if nx { Answer::Int(0) } else { Answer::Ok };
    }
    let deadline = match deadline_of(h, plan, src) {
        Ok(d) => d,
        Err(a) => return a,
    };
    match moved(h, plan, Some(src), dst, value, deadline) {
        Ok(()) if nx => Answer::Int(1),
        Ok(()) => Answer::Ok,
        Err(e) => Answer::Error(op_error_text(&e)),
    }
}

/// COPY src dst [DB 0] [REPLACE]: its arguments.
fn copy_options<'a>(a: &[&'a [u8]]) -> Result<Exclusive<'a>, Answer> {
    let mut replace = false;
    let mut j = 3;
    while j < a.len() {
        if a[j].eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a[j].eq_ignore_ascii_case(b"db") && j + 1 < a.len() {
            match parse_int(a[j + 1]).filter(|d| i32::try_from(*d).is_ok()) {
                Some(0) => {}
                Some(_) => return Err(Answer::Error(resp::err_db_index().into())),
                None => return Err(Answer::Error(resp::err_not_integer().into())),
            }
            j += 1;
        } else {
            return Err(Answer::Error(resp::err_syntax().into()));
        }
        j += 1;
    }
    let (src, dst) = (a[1], a[2]);
    if src == dst {
        return Err(Answer::Error(ERR_SAME_OBJECT.into()));
    }
    Ok(Exclusive::Copy { src, dst, replace })
}

/// COPY src dst: the copy itself.
fn copy(
    ctx: &ShardCtx,
    h: &mut exclusive::Held<'_>,
    plan: &mut Plan,
    src: &[u8],
    dst: &[u8],
    replace: bool,
) -> Answer {
    let found = match read_keys(h, plan, &[src, dst], 1) {
        Ok(found) => found,
        Err(a) => return a,
    };
    // Redis reads COPY's source as a lookup (a keyspace hit or miss), its destination not.
    let counter = match found[0] {
        Some(_) => &ctx.stats.keyspace_hits,
        None => &ctx.stats.keyspace_misses,
    };
    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some(value) = &found[0] else {
        return Answer::Int(0);
    };
    if found[1].is_some() && !replace {
        return Answer::Int(0);
    }
    let deadline = match deadline_of(h, plan, src) {
        Ok(d) => d,
        Err(a) => return a,
    };
    match moved(h, plan, None, dst, value, deadline) {
        Ok(()) => Answer::Int(1),
        Err(e) => Answer::Error(op_error_text(&e)),
    }
}

/// MSETNX key value [key value ...]: all set, or none when any key exists.
fn msetnx(h: &mut exclusive::Held<'_>, plan: &mut Plan, pairs: &[(&[u8], &[u8])]) -> Answer {
    let keys: Vec<&[u8]> = pairs.iter().map(|(k, _)| *k).collect();
    match read_keys(h, plan, &keys, 0) {
        Ok(found) if found.iter().any(Option::is_some) => return Answer::Int(0),
        Ok(_) => {}
        Err(a) => return a,
    }
    plan.clear();
    for (k, v) in pairs {
        plan.op(&Op::put(k, v));
    }
    match h.run_atomic(plan) {
        Ok(()) => Answer::Int(1),
        Err(e) => Answer::Error(op_error_text(&e)),
    }
}
