//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH (issue 20 item 4), with Redis 7's
//! replies and error texts.
//!
//! ```text
//!  MULTI ──> each command: name and arity checked ──ok──> +QUEUED, kept in Queue
//!                                                 └─bad──> its error; EXEC then -EXECABORT
//!  EXEC  ──> every queued command planned (cmd::plan) into ONE plan ──atomic::execute_tx──>
//!            the shards of its keys and of the watched keys held, watched keys checked:
//!            changed ─> null array, nothing run; else every operation run, then
//!            *N + each command's reply (an error at run time is that command's reply only)
//!  WATCH ──> keys put in their shard's watch table (shard/watch.rs); the one write hook in
//!            ShardCtx::execute marks the watcher dirty; UNWATCH, EXEC, DISCARD and the
//!            connection's end forget them
//! ```
//!
//! Atomicity: a transaction's operations are one plan, run as one batch per shard with those
//! shards held (`shard/atomic.rs`), so no other client's command runs in between and no
//! multi-key read sees it half done. Commands that need every shard (INFO, DBSIZE, FLUSHALL,
//! FLUSHDB: barriers) run at their place in the transaction between two such plans: each
//! part before and after them is atomic, the whole is not.
//!
//! Limits: `multi_commands_max` queued commands and `multi_bytes_max` queued bytes per
//! connection (past either the command is refused and EXEC aborts, as for an unknown command);
//! the queue and the watched keys count in the connection's buffers (`maxmemory_clients`).
//! `watch_keys_max` keys watched per connection.
//!
//! Non-goals: MSET inside a transaction is all or nothing for its arguments' limits, not for
//! memory (it is not checked before it runs, as no command of a transaction is); a multi-key
//! command that joins the atomic family (`Planned::Atomic`) must be taught here, or answers an
//! error inside EXEC.

use std::sync::Arc;

use directkv_engine::Op;
use directkv_proto::resp::{self, RespWriter, Version};

use super::cmd::{self, Planned, Session, COMMANDS};
use super::reply::{self, Pending, Recipe};
use crate::config::ServerConfig;
use crate::shard::dispatch::shard_of;
use crate::shard::watches::{Tables, Watches};
use crate::shard::{atomic, ShardCtx};

/// Bytes counted per queued argument beyond its own (its place in the queue's index).
const ARG_OVERHEAD_BYTES: usize = 16;

/// A connection's transaction: whether MULTI is open, the queued commands, the watched keys.
pub(crate) struct Multi {
    active: bool,
    /// EXEC is planning the queue: UNWATCH inside it must not forget the watches before
    /// they are checked, and nothing is queued.
    executing: bool,
    /// A command was refused while queuing: EXEC answers EXECABORT.
    dirty: bool,
    queue: Queue,
    watches: Watches,
    shards: usize,
    commands_max: usize,
    bytes_max: usize,
    watch_keys_max: usize,
}

/// Queued commands: their arguments end to end in `bytes`.
#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    /// (start, end) in `bytes` of every argument.
    args: Vec<(usize, usize)>,
    /// (first argument, number of arguments) of every command.
    cmds: Vec<(usize, usize)>,
}

impl Queue {
    fn len(&self) -> usize {
        self.cmds.len()
    }

    /// Bytes the queue counts against `multi_bytes_max`.
    fn counted_bytes(&self) -> usize {
        self.bytes.len() + self.args.len() * ARG_OVERHEAD_BYTES
    }

    fn push(&mut self, a: &[&[u8]]) {
        self.cmds.push((self.args.len(), a.len()));
        for arg in a {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(arg);
            self.args.push((start, self.bytes.len()));
        }
    }

    /// Arguments of command `i`.
    fn command(&self, i: usize) -> Vec<&[u8]> {
        let (first, n) = self.cmds[i];
        self.args[first..first + n]
            .iter()
            .map(|&(s, e)| &self.bytes[s..e])
            .collect()
    }

    fn capacity_bytes(&self) -> usize {
        self.bytes.capacity()
            + (self.args.capacity() + self.cmds.capacity()) * size_of::<(usize, usize)>()
    }
}

impl Multi {
    pub(crate) fn new(cfg: &ServerConfig, shards: usize, tables: Arc<Tables>) -> Multi {
        Multi {
            active: false,
            executing: false,
            dirty: false,
            queue: Queue::default(),
            watches: Watches::new(tables),
            shards,
            commands_max: cfg.multi_commands_max,
            bytes_max: cfg.multi_bytes_max,
            watch_keys_max: cfg.watch_keys_max,
        }
    }

    /// Bytes held (queued commands, watched keys), for the accounting of client memory.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.queue.capacity_bytes() + self.watches.capacity_bytes()
    }

    /// Leaves MULTI and forgets the queue and the watches (EXEC, DISCARD).
    fn reset(&mut self) {
        self.active = false;
        self.executing = false;
        self.dirty = false;
        self.queue = Queue::default();
        self.watches.clear();
    }
}

fn ok(p: &mut Pending, v: Version) -> Planned {
    p.immediate(|o| RespWriter::new(o, v).simple("OK"));
    Planned::Queued
}

/// The transaction commands, and every command while MULTI is open (queued or refused);
/// `None` for a command to plan as usual. `name` is lower case.
pub(crate) fn intercept(
    p: &mut Pending,
    s: &mut Session,
    name: &[u8],
    a: &[&[u8]],
) -> Option<Planned> {
    let v = s.version;
    let m = &mut s.multi;
    if m.executing {
        // A queued UNWATCH: its reply, while the watches stay until EXEC checked them (as
        // in Redis, where EXEC checks them before it runs any queued command).
        return (name == b"unwatch").then(|| ok(p, v));
    }
    if !m.active {
        return Some(match name {
            b"multi" if a.len() == 1 => {
                m.active = true;
                ok(p, v)
            }
            b"exec" if a.len() == 1 => cmd::error(p, v, "ERR EXEC without MULTI"),
            b"discard" if a.len() == 1 => cmd::error(p, v, "ERR DISCARD without MULTI"),
            b"unwatch" if a.len() == 1 => {
                m.watches.clear();
                ok(p, v)
            }
            b"watch" if a.len() >= 2 => Planned::Multi,
            b"multi" | b"exec" | b"discard" | b"unwatch" | b"watch" => cmd::arity(p, v, name),
            _ => return None,
        });
    }
    // QUIT runs at once, as in Redis.
    if name == b"quit" {
        return None;
    }
    let known = COMMANDS.iter().find(|(n, _)| n.as_bytes() == name);
    let Some(&(_, arity)) = known else {
        m.dirty = true;
        let msg = resp::err_unknown_command(a[0], a[1..].iter().copied());
        p.immediate(|o| RespWriter::new(o, v).error_bytes(&msg));
        return Some(Planned::Queued);
    };
    let n = a.len() as i32;
    if (arity >= 0 && n != arity) || n < -arity {
        m.dirty = true;
        return Some(cmd::arity(p, v, name));
    }
    Some(match name {
        b"multi" => cmd::error(p, v, "ERR MULTI calls can not be nested"),
        b"watch" => cmd::error(p, v, "ERR WATCH inside MULTI is not allowed"),
        b"exec" => Planned::Multi,
        b"discard" => {
            m.reset();
            ok(p, v)
        }
        _ => {
            let bytes: usize = a.iter().map(|x| x.len() + ARG_OVERHEAD_BYTES).sum();
            if m.queue.len() >= m.commands_max {
                m.dirty = true;
                let text = format!(
                    "ERR transaction too long: more than multi_commands_max ({}) queued commands",
                    m.commands_max
                );
                return Some(cmd::error(p, v, &text));
            }
            if m.queue.counted_bytes() + bytes > m.bytes_max {
                m.dirty = true;
                let text = format!(
                    "ERR transaction too large: more than multi_bytes_max ({}) queued bytes",
                    m.bytes_max
                );
                return Some(cmd::error(p, v, &text));
            }
            m.queue.push(a);
            p.immediate(|o| RespWriter::new(o, v).simple("QUEUED"));
            Planned::Queued
        }
    })
}

/// Runs a command `intercept` answered [`Planned::Multi`] for (EXEC or WATCH) after the
/// commands before it, into the emptied `p`, and appends its reply.
pub(crate) async fn run(
    ctx: &ShardCtx,
    p: &mut Pending,
    s: &mut Session,
    a: &[&[u8]],
    requirepass: Option<&str>,
    out: &mut Vec<u8>,
) {
    if a[0].eq_ignore_ascii_case(b"watch") {
        watch(s, a, out);
    } else {
        exec(ctx, p, s, requirepass, out).await;
    }
}

/// WATCH key [key ...].
fn watch(s: &mut Session, a: &[&[u8]], out: &mut Vec<u8>) {
    let m = &mut s.multi;
    let mut w = RespWriter::new(out, s.version);
    // Refused whole, before any key is watched (a key watched twice counts twice here).
    if m.watches.len() + (a.len() - 1) > m.watch_keys_max {
        w.error(&format!(
            "ERR too many watched keys: more than watch_keys_max ({})",
            m.watch_keys_max
        ));
        return;
    }
    for key in &a[1..] {
        m.watches.watch(shard_of(key, m.shards), key);
    }
    w.simple("OK");
}

/// EXEC: the queued commands run as one transaction (see the module comment).
async fn exec(
    ctx: &ShardCtx,
    p: &mut Pending,
    s: &mut Session,
    requirepass: Option<&str>,
    out: &mut Vec<u8>,
) {
    let v = s.version;
    if s.multi.dirty {
        s.multi.reset();
        RespWriter::new(out, v)
            .error("EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    let queue = std::mem::take(&mut s.multi.queue);
    s.multi.active = false;
    s.multi.executing = true;
    ctx.stats
        .multi_exec
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut watched = vec![false; ctx.shards()];
    s.multi.watches.shards().for_each(|sh| watched[sh] = true);
    let watcher = s.multi.watches.watcher();
    let mut first = Some((watched.as_slice(), &*watcher));
    p.clear();
    for i in 0..queue.len() {
        let a = queue.command(i);
        match cmd::plan(p, s, &a, requirepass) {
            Planned::Queued => {}
            Planned::Atomic => plan_atomic(p, v, &ctx.cfg, &a),
            Planned::Barrier => {
                if !part(ctx, p, v, first.take(), queue.len(), out).await {
                    s.multi.reset();
                    return;
                }
                cmd::server::barrier(ctx, v, &a, out).await;
            }
            // Neither EXEC nor WATCH is ever queued.
            Planned::Multi => {
                cmd::error(p, v, "ERR command not allowed inside a transaction");
            }
        }
    }
    part(ctx, p, v, first.take(), queue.len(), out).await;
    s.multi.reset();
}

/// Runs what `p` holds as one atomic part of a transaction and renders its replies. The first
/// part (`watch` is `Some`) checks the watched keys and writes the reply's array header, or
/// the null array and `false` when a watched key changed.
async fn part(
    ctx: &ShardCtx,
    p: &mut Pending,
    v: Version,
    watch: Option<(&[bool], &crate::shard::watches::Watcher)>,
    commands: usize,
    out: &mut Vec<u8>,
) -> bool {
    let ran = match watch {
        Some((shards, w)) => atomic::execute_tx(ctx, &mut p.plan, shards, &|| w.is_dirty()).await,
        None => atomic::execute_tx(ctx, &mut p.plan, &[], &|| false).await,
    };
    if watch.is_some() {
        if let Ok(false) = ran {
            ctx.stats
                .multi_watch_aborted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            RespWriter::new(out, v).null_array();
            p.clear();
            return false;
        }
        RespWriter::new(out, v).array_len(commands);
    }
    // On `Err` (a shard gone) the operations of the missing shards render as errors.
    reply::render(p, v, out, &ctx.stats);
    p.clear();
    true
}

/// Plans a command that runs alone as an atomic plan outside a transaction (MSET, and DEL,
/// UNLINK or MGET over several shards): inside one, the transaction is the atomic plan.
fn plan_atomic(p: &mut Pending, v: Version, cfg: &ServerConfig, a: &[&[u8]]) {
    let name = a[0].to_ascii_lowercase();
    let first = p.next_op();
    match name.as_slice() {
        b"mset" => {
            let pairs = a[1..].chunks_exact(2);
            if let Some(e) = pairs.clone().find_map(|kv| limit_error(cfg, kv[0], kv[1])) {
                cmd::error(p, v, &cmd::op_error_text(&e));
                return;
            }
            for kv in pairs {
                p.op(&Op::put(kv[0], kv[1]));
            }
            let n = (a.len() - 1) / 2;
            p.recipes.push(Recipe::AllOk { first, n });
        }
        b"del" | b"unlink" => {
            for k in &a[1..] {
                p.op(&Op::delete(k));
            }
            let n = a.len() - 1;
            p.recipes.push(Recipe::CountFound { first, n });
        }
        b"mget" => {
            for k in &a[1..] {
                p.op(&Op::get(k));
            }
            let n = a.len() - 1;
            p.recipes.push(Recipe::Values { first, n });
        }
        _ => {
            let text = format!(
                "ERR {} cannot run inside MULTI yet (issue 20)",
                String::from_utf8_lossy(&name).to_ascii_uppercase()
            );
            cmd::error(p, v, &text);
        }
    }
}

/// The limit a SET of `key` and `value` would break (the engine's own check, made before
/// anything of an MSET is planned, so that it stores all its pairs or none).
fn limit_error(cfg: &ServerConfig, key: &[u8], value: &[u8]) -> Option<directkv_engine::OpError> {
    use directkv_engine::OpError;
    if key.is_empty() {
        Some(OpError::KeyEmpty)
    } else if key.len() > cfg.key_len_max {
        Some(OpError::KeyTooLong {
            len: key.len(),
            max: cfg.key_len_max,
        })
    } else if value.len() > cfg.value_len_max {
        Some(OpError::ValueTooLarge {
            len: value.len(),
            max: cfg.value_len_max,
        })
    } else {
        None
    }
}
