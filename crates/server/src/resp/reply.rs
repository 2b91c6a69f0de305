//! A RESP read's worth of commands planned, and their replies rendered in order: each
//! command's operations go into the protocol-neutral `dispatch::Plan`, and its reply is a
//! [`Recipe`] that says how to make it from those operations' results (or bytes encoded at
//! once, for PING and argument errors).
//!
//! ```text
//!  commands ──cmd::plan──> Pending { dispatch::Plan, recipes, immediate bytes }
//!           ──dispatch::execute──> per-shard Results ──render (recipes)──> RESP bytes
//! ```
//!
//! Rendering also counts INFO's `keyspace_hits` and `keyspace_misses` as Redis does: each key
//! a read command looked up (GET, GETSET, GETDEL, SET ... GET, MGET, EXISTS, STRLEN) is a hit
//! when found and a miss when not; writes (SET, DEL, INCR, APPEND, ...) count neither. The
//! sums go to the server's counters once per rendered batch, not once per command.

use std::sync::atomic::Ordering;

use directkv_engine::{ElemType, Op, OpError, OpKind, Status};
use directkv_proto::resp::{RespWriter, Version};

use super::cmd;
use crate::shard::dispatch::Plan;
use crate::stats::ServerStats;

/// How a command's reply is made from the results of its operations (`first`, `n`: indices in
/// the pending operation list).
#[derive(Debug, Clone)]
pub(crate) enum Recipe {
    /// Bytes already encoded (PING, errors found while parsing arguments, ...).
    Immediate { start: usize, end: usize },
    /// `+OK` (or the operation's error).
    Ok { op: usize },
    /// The value, or null.
    Bulk { op: usize },
    /// `+OK`, or null when a conditional put did not apply.
    OkOrNull { op: usize },
    /// The number of operations that found their key (DEL, EXISTS).
    CountFound { first: usize, n: usize },
    /// An array of values or nulls (MGET).
    Values { first: usize, n: usize },
    /// `+OK` after several puts (MSET).
    AllOk { first: usize, n: usize },
    /// A decimal-string result as an integer (INCR family).
    DecimalInt { op: usize },
    /// The data as a bulk string (INCRBYFLOAT).
    Data { op: usize },
    /// A u64 LE result as an integer (APPEND).
    U64 { op: usize },
    /// The length of the value, 0 if missing (STRLEN).
    Len { op: usize },
    /// One element decoded as a number (DKV.UPDATE, DKV.REDUCE).
    Number { op: usize, elem: ElemType },
    /// Elements decoded as numbers (DKV.VGET, DKV.UPDATEV, DKV.FILTER).
    Numbers { op: usize, elem: ElemType },
    /// `[1|0, current value]` (DKV.CAS).
    Cas { op: usize },
    /// `:1` when the operation applied, `:0` when its condition failed or the key is missing
    /// (EXPIRE family, PERSIST).
    Flag { op: usize },
    /// A `Ttl` result as Redis's TTL family replies: -2 no key, -1 no deadline, else the time
    /// left (`absolute`: the deadline) in seconds, rounded, or in milliseconds (`ms`).
    Deadline { op: usize, absolute: bool, ms: bool },
    /// Null when the key is missing, else the immediate bytes `start..end` (GETEX with a bad
    /// time: Redis looks the key up before it checks the time).
    /// (`start`/`end` are u32 so that a recipe stays 24 bytes: an immediate buffer is far
    /// below 4 GiB, bounded by the batch's replies.)
    NullOrImmediate { op: usize, start: u32, end: u32 },
    /// A reply derived from the operation's result by `cmd::bits::render` (GETRANGE, SETBIT,
    /// BITCOUNT, ...), its arguments stashed at `at` (`Pending::stash`).
    Bits { op: usize, at: usize },
    /// A reply derived by `cmd::keyspace::render` (TYPE, OBJECT, MEMORY USAGE).
    Key { op: usize, d: cmd::keyspace::Key },
}

/// The commands of one batch: their operations, grouped by shard, and their reply recipes.
#[derive(Default)]
pub(crate) struct Pending {
    pub(crate) plan: Plan,
    pub(crate) recipes: Vec<Recipe>,
    immediate: Vec<u8>,
    /// Indices of the delete operations, in order: a `CountFound` over deletes is DEL, which
    /// counts no keyspace hits; over reads it is EXISTS, which does.
    deletes: Vec<usize>,
}

impl Pending {
    pub(crate) fn new(shards: usize) -> Pending {
        Pending {
            plan: Plan::new(shards),
            ..Default::default()
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.recipes.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.plan.clear();
        self.recipes.clear();
        self.immediate.clear();
        self.deletes.clear();
    }

    /// Bytes held allocated (plan, recipes, immediate replies), for the accounting of client
    /// memory.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.plan.capacity_bytes()
            + self.recipes.capacity() * size_of::<Recipe>()
            + self.immediate.capacity()
    }

    /// Empties it and gives back all but `bytes` of each buffer (see `Plan::release`).
    pub(crate) fn release(&mut self, bytes: usize) {
        self.clear();
        self.plan.release(bytes);
        let recipes = bytes / size_of::<Recipe>();
        if self.recipes.capacity() > recipes {
            self.recipes.shrink_to(recipes);
        }
        if self.immediate.capacity() > bytes {
            self.immediate.shrink_to(bytes);
        }
    }

    /// Adds an operation; returns its index in the plan.
    #[inline]
    pub(crate) fn op(&mut self, op: &Op) -> usize {
        let i = self.plan.op(op);
        if op.kind == OpKind::Delete {
            self.deletes.push(i);
        }
        i
    }

    /// The index the next operation will get.
    pub(crate) fn next_op(&self) -> usize {
        self.plan.len()
    }

    /// Adds a reply encoded now; `write` appends its bytes.
    pub(crate) fn immediate(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.immediate.len();
        write(&mut self.immediate);
        self.recipes.push(Recipe::Immediate {
            start,
            end: self.immediate.len(),
        });
    }

    /// Adds a reply that is null if operation `op` did not find its key, else the error `text`.
    pub(crate) fn null_or_error(&mut self, op: usize, v: Version, text: &str) {
        let start = self.immediate.len();
        RespWriter::new(&mut self.immediate, v).error(text);
        self.recipes.push(Recipe::NullOrImmediate {
            op,
            start: start as u32,
            end: self.immediate.len() as u32,
        });
    }

    /// Keeps `bytes` with the batch (in the immediate buffer, outside any reply) for a recipe
    /// to read back when it renders; returns where they are.
    pub(crate) fn stash(&mut self, bytes: &[u8]) -> usize {
        let at = self.immediate.len();
        self.immediate.extend_from_slice(bytes);
        at
    }

    /// Status and data of planned operation `op`, once its shard's batch ran.
    #[inline]
    fn result(&self, op: usize) -> (Status, &[u8]) {
        self.plan.result(op)
    }
}

/// Keyspace hits and misses of one rendered batch.
#[derive(Default)]
struct Lookups {
    hits: u64,
    misses: u64,
}

impl Lookups {
    /// Counts a read's lookup by its status (an error, such as a refused key, is neither).
    #[inline]
    fn add(&mut self, s: Status) {
        match s {
            Status::Ok => self.hits += 1,
            Status::NotFound => self.misses += 1,
            _ => {}
        }
    }
}

/// Renders every reply of `p` in order, in protocol version `v`, and adds the batch's keyspace
/// hits and misses to `stats`.
pub(crate) fn render(p: &Pending, v: Version, out: &mut Vec<u8>, stats: &ServerStats) {
    let mut lookups = Lookups::default();
    render_recipes(p, v, out, &mut lookups);
    if lookups.hits > 0 {
        stats
            .keyspace_hits
            .fetch_add(lookups.hits, Ordering::Relaxed);
    }
    if lookups.misses > 0 {
        stats
            .keyspace_misses
            .fetch_add(lookups.misses, Ordering::Relaxed);
    }
}

fn render_recipes(p: &Pending, v: Version, out: &mut Vec<u8>, lookups: &mut Lookups) {
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
            Recipe::Bulk { op } => {
                let (s, d) = p.result(op);
                lookups.add(s);
                match s {
                    Status::Ok => w.bulk(d),
                    Status::Error(e) => w.error(&cmd::op_error_text(&e)),
                    _ => w.null(),
                }
            }
            Recipe::Data { op } => match p.result(op) {
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
                if p.deletes.binary_search(&first).is_err() {
                    lookups.hits += found as u64;
                    lookups.misses += (n - found) as u64;
                }
                w.integer(found as i64)
            }
            Recipe::Values { first, n } => {
                // Values past the request's results budget: one error for the whole reply,
                // not an array that silently shows them as missing.
                let refused = (first..first + n)
                    .map(|i| p.result(i).0)
                    .find(|s| matches!(s, Status::Error(OpError::ReplyTooLarge { .. })));
                if let Some(Status::Error(e)) = refused {
                    w.error(&cmd::op_error_text(&e));
                    continue;
                }
                w.array_len(n);
                for i in first..first + n {
                    let (s, d) = p.result(i);
                    lookups.add(s);
                    match s {
                        Status::Ok => w.bulk(d),
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
            Recipe::Len { op } => {
                let (s, d) = p.result(op);
                lookups.add(s);
                match s {
                    Status::Ok => w.integer(d.len() as i64),
                    _ => w.integer(0),
                }
            }
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
                let (status, d) = p.result(op);
                if let Status::Error(e) = status {
                    w.error(&cmd::op_error_text(&e));
                } else {
                    w.array_len(2);
                    w.integer(i64::from(status == Status::Ok));
                    w.bulk(d);
                }
            }
            Recipe::Flag { op } => match p.result(op).0 {
                Status::Error(e) => w.error(&cmd::op_error_text(&e)),
                s => w.integer(i64::from(s == Status::Ok)),
            },
            Recipe::Deadline { op, absolute, ms } => {
                let (s, d) = p.result(op);
                lookups.add(s);
                match s {
                    Status::Ok if d.len() == 16 => {
                        let at = u64::from_le_bytes(d[..8].try_into().expect("8 bytes"));
                        let left = u64::from_le_bytes(d[8..].try_into().expect("8 bytes"));
                        // Deadlines are at most i64::MAX ms (Redis's range), so the
                        // rounding to seconds cannot overflow a u64.
                        let t = if absolute { at } else { left };
                        match (at, ms) {
                            (directkv_engine::NO_DEADLINE, _) => w.integer(-1),
                            (_, true) => w.integer(t as i64),
                            (_, false) => w.integer(((t + 500) / 1000) as i64),
                        }
                    }
                    Status::Error(e) => w.error(&cmd::op_error_text(&e)),
                    _ => w.integer(-2),
                }
            }
            Recipe::NullOrImmediate { op, start, end } => {
                let s = p.result(op).0;
                lookups.add(s);
                match s {
                    Status::Ok => out.extend_from_slice(&p.immediate[start as usize..end as usize]),
                    Status::Error(e) => w.error(&cmd::op_error_text(&e)),
                    _ => w.null(),
                }
            }
            Recipe::Bits { op, at } => {
                let d = cmd::bits::Bits::decode(&p.immediate[at..at + cmd::bits::BITS_ENCODED]);
                let (s, data) = p.result(op);
                if d.reads() {
                    lookups.add(s);
                }
                cmd::bits::render(&mut w, d, s, data);
            }
            Recipe::Key { op, d } => {
                let (s, data) = p.result(op);
                lookups.add(s);
                cmd::keyspace::render(&mut w, d, s, data);
            }
        }
    }
}
