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
//! multi-key read sees it half done. The commands that need every shard (SCAN, KEYS,
//! RANDOMKEY, DBSIZE, FLUSHALL, FLUSHDB, INFO: barriers outside a transaction) make the
//! transaction hold every shard (below) and run at their place in it as messages to the held
//! shards (`shard/exclusive.rs`), so they see the transaction's earlier writes and nothing
//! else's, and a FLUSHALL empties the shards between two of its commands with no other
//! client's command before or after it in between (issue 20). FLUSHALL goes through
//! `ShardCtx::flush` on every shard as it does outside, which marks the watchers of those
//! shards dirty.
//!
//! Cost: a transaction with an every-shard command holds every shard for its whole length, as
//! Redis's one thread is held: a KEYS walks whole indexes, an INFO asks every shard for its
//! report (about 0.15 ms), a FLUSHALL replaces every shard's engine (`ShardCtx::flush`, some
//! milliseconds per shard), and `multi_commands_max` bounds how many a transaction holds.
//!
//! Limits: `multi_commands_max` queued commands and `multi_bytes_max` queued bytes per
//! connection (past either the command is refused and EXEC aborts, as for an unknown command);
//! the queue and the watched keys count in the connection's buffers (`maxmemory_clients`).
//! `watch_keys_max` keys watched per connection.
//!
//! Commands that read before they write (RENAME, RENAMENX, COPY, MSETNX, and MEMORY USAGE,
//! `keyspace::Exclusive`) cannot be planned in advance: a transaction that holds one runs with
//! all its shards held at once (`shard/exclusive.rs`), its planned commands as batches and
//! those commands in their place, so it is still atomic.
//!
//! Expiry (Redis 7): a watched key that expires aborts the transaction, whether the sweep or a
//! lookup removed it (`shard/watches.rs`) or it is still there past its deadline at EXEC,
//! which looks every watched key up first (removing it); WATCH does the same before it
//! watches, so a key already expired then counts as no change.
//!
//! Non-goals: MSET inside a transaction is all or nothing for its arguments' limits, not for
//! memory (it is not checked before it runs, as no command of a transaction is).

use std::sync::Arc;

use directkv_engine::Op;
use directkv_proto::resp::{self, RespWriter, Version};

use super::cmd::keyspace::{self, Answer, Exclusive};
use super::cmd::{self, Name, Planned, Session, COMMANDS};
use super::reply::{self, Pending};
use crate::config::ServerConfig;
use crate::shard::dispatch::{self, shard_of, Plan};
use crate::shard::watches::{Tables, Watcher, Watches};
use crate::shard::{atomic, exclusive, ShardCtx};

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
        // Redis 7's "no-multi" commands that directkv has: refused, and EXEC then aborts
        // (queued, it stopped the server at EXEC).
        b"shutdown" | b"save" => {
            m.dirty = true;
            cmd::error(p, v, "ERR Command not allowed inside a transaction")
        }
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
        watch(ctx, s, a, out).await;
    } else {
        exec(ctx, p, s, requirepass, out).await;
    }
}

/// Looks `keys` up: a read, which changes nothing but what the engine does to a key past its
/// deadline (it removes it, which marks the key's watchers: `shard/watches.rs`).
async fn probe<'k>(ctx: &ShardCtx, keys: impl Iterator<Item = &'k [u8]>) {
    let mut plan = Plan::new(ctx.shards());
    let mut any = false;
    for k in keys {
        plan.op(&Op::get(k).no_return());
        any = true;
    }
    if any {
        dispatch::execute(ctx, &mut plan).await;
    }
}

/// WATCH key [key ...]. A key already past its deadline is removed first, so that its
/// removal does not count as a change (Redis 7: a key expired at WATCH is no change).
async fn watch(ctx: &ShardCtx, s: &mut Session, a: &[&[u8]], out: &mut Vec<u8>) {
    let (len, max) = (s.multi.watches.len(), s.multi.watch_keys_max);
    // Refused whole, before any key is watched (a key watched twice counts twice here).
    if len + (a.len() - 1) > max {
        RespWriter::new(out, s.version).error(&format!(
            "ERR too many watched keys: more than watch_keys_max ({max})"
        ));
        return;
    }
    probe(ctx, a[1..].iter().copied()).await;
    let m = &mut s.multi;
    for key in &a[1..] {
        m.watches.watch(shard_of(key, m.shards), key);
    }
    RespWriter::new(out, s.version).simple("OK");
}

/// A part of a transaction that holds a command which reads before it writes (RENAME, COPY,
/// MSETNX, MEMORY USAGE) or needs every shard (SCAN, KEYS, RANDOMKEY, DBSIZE, FLUSHALL,
/// FLUSHDB, INFO): the commands planned before it, then it, ...
enum Segment<'q> {
    Planned(Pending),
    Exclusive(Result<Exclusive<'q>, Answer>),
    /// A barrier outside a transaction (`cmd/scan.rs`'s walks, `cmd/server.rs`'s DBSIZE,
    /// FLUSHALL, FLUSHDB, INFO): it holds every shard.
    EveryShard(Vec<&'q [u8]>),
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
    // A watched key past its deadline but not yet reclaimed is reclaimed now, which marks the
    // watch: Redis checks at EXEC whether a watched key expired.
    probe(ctx, s.multi.watches.keys()).await;
    let mut watched = vec![false; ctx.shards()];
    s.multi.watches.shards().for_each(|sh| watched[sh] = true);
    let watcher = s.multi.watches.watcher();
    let watch = (watched.as_slice(), &*watcher);
    let mut segments = Vec::new();
    p.clear();
    for i in 0..queue.len() {
        let a = queue.command(i);
        let name = Name::lower(a[0]);
        match cmd::plan(p, s, &a, requirepass) {
            Planned::Queued => {}
            Planned::Atomic if keyspace::is_atomic(name.as_bytes()) => {
                let before = std::mem::replace(p, Pending::new(ctx.shards()));
                segments.push(Segment::Planned(before));
                let e = Exclusive::parse(&ctx.cfg, name.as_bytes(), &a);
                segments.push(Segment::Exclusive(e));
            }
            Planned::Atomic => plan_atomic(p, v, &ctx.cfg, &a),
            Planned::Barrier => {
                let before = std::mem::replace(p, Pending::new(ctx.shards()));
                segments.push(Segment::Planned(before));
                segments.push(Segment::EveryShard(a));
            }
            // Neither EXEC nor WATCH is ever queued.
            Planned::Multi => {
                cmd::error(p, v, "ERR command not allowed inside a transaction");
            }
        }
    }
    run_queue(ctx, p, segments, v, watch, queue.len(), out).await;
    s.multi.reset();
}

/// Runs the transaction: what `segments` and then `p` hold, as one atomic whole, and renders
/// its replies after the array header, or the null array when a watched key (of the shards
/// `watch.0` marks) changed.
async fn run_queue(
    ctx: &ShardCtx,
    p: &mut Pending,
    mut segments: Vec<Segment<'_>>,
    v: Version,
    watch: (&[bool], &Watcher),
    commands: usize,
    out: &mut Vec<u8>,
) {
    if !segments.is_empty() {
        segments.push(Segment::Planned(std::mem::replace(
            p,
            Pending::new(ctx.shards()),
        )));
        return run_held(ctx, &mut segments, v, watch, commands, out).await;
    }
    let (shards, w) = watch;
    let ran = atomic::execute_tx(ctx, &mut p.plan, shards, &|| w.is_dirty()).await;
    if let Ok(false) = ran {
        p.clear();
        return aborted(ctx, v, out);
    }
    RespWriter::new(out, v).array_len(commands);
    // On `Err` (a shard gone) the operations of the missing shards render as errors.
    reply::render(p, v, out, &ctx.stats);
    p.clear();
}

/// EXEC's null array for a transaction a watched key aborted.
fn aborted(ctx: &ShardCtx, v: Version, out: &mut Vec<u8>) {
    ctx.stats
        .multi_watch_aborted
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    RespWriter::new(out, v).null_array();
}

/// A transaction with a command that reads before it writes or needs every shard: every
/// shard of its keys, of its watched keys (and every shard, for the latter kind) held at once
/// (`shard/exclusive.rs`), then its commands run in order, each segment of planned commands as
/// one batch per shard, each other command as it runs alone, with no other client's command in
/// between.
async fn run_held(
    ctx: &ShardCtx,
    segments: &mut [Segment<'_>],
    v: Version,
    watch: (&[bool], &Watcher),
    commands: usize,
    out: &mut Vec<u8>,
) {
    let n = ctx.shards();
    let mut shards: Vec<usize> = (0..n).filter(|&s| watch.0[s]).collect();
    for seg in segments.iter() {
        match seg {
            Segment::Planned(pend) => {
                shards.extend((0..n).filter(|&s| !pend.plan.batches[s].is_empty()))
            }
            Segment::Exclusive(Ok(e)) => shards.extend(e.keys().iter().map(|k| shard_of(k, n))),
            Segment::Exclusive(Err(_)) => {}
            Segment::EveryShard(_) => shards.extend(0..n),
        }
    }
    let mut plan = Plan::new(n);
    let held = exclusive::run(ctx, &shards, |h| {
        if watch.1.is_dirty() {
            return false;
        }
        RespWriter::new(out, v).array_len(commands);
        for seg in segments.iter_mut() {
            match seg {
                Segment::Planned(pend) => {
                    // On `Err` (a shard gone) its operations render as errors.
                    let _ = h.run(&mut pend.plan);
                    reply::render(pend, v, out, &ctx.stats);
                }
                Segment::Exclusive(Ok(e)) => e.run(ctx, h, &mut plan).write(out, v),
                Segment::Exclusive(Err(a)) => a.write(out, v),
                Segment::EveryShard(a) if cmd::scan::is_walk(Name::lower(a[0]).as_bytes()) => {
                    cmd::scan::in_transaction(ctx, h, v, a, out)
                }
                Segment::EveryShard(a) => cmd::server::in_transaction(ctx, h, v, a, out),
            }
        }
        true
    })
    .await;
    match held {
        Ok(true) => {}
        Ok(false) => aborted(ctx, v, out),
        Err(e) => RespWriter::new(out, v).error(&cmd::op_error_text(&e)),
    }
}

/// Plans a command that runs alone as an atomic plan outside a transaction (MSET, and DEL,
/// UNLINK or MGET over several shards): inside one, the transaction is the atomic plan.
fn plan_atomic(p: &mut Pending, v: Version, cfg: &ServerConfig, a: &[&[u8]]) {
    let name = Name::lower(a[0]);
    match name.as_bytes() {
        b"mset" => {
            if let Err(e) = cmd::strings::plan_mset(p, cfg, a) {
                cmd::error(p, v, &cmd::op_error_text(&e));
            }
        }
        b"del" | b"unlink" => cmd::strings::plan_del(p, &a[1..]),
        b"mget" => cmd::strings::plan_mget(p, &a[1..]),
        other => unreachable!("{} is not an atomic plan", String::from_utf8_lossy(other)),
    }
}
