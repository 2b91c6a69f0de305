//! memcached requests as engine operations: `plan` turns one parsed request into operations of
//! the engine's memcache kinds (`directkv_engine::mc`) in the batch's `dispatch::Plan`, and
//! remembers how to answer it; `run` executes the plan (the one door, every shard at once) and
//! renders every answer in request order.
//!
//! ```text
//!  Request ──plan──> Plan ops (McGet per key, McStore, McDelete, McArith, McTouch)
//!          └───────> Pending { what to answer, first op }       (borrows the input)
//!  run: dispatch::execute(plan) ──> for each Pending in order: render from plan.result(op)
//! ```
//!
//! With one shard, the operations skip the plan's copy (`Ops`): gets and deletes reach the
//! engine borrowing the request's bytes, the rest copied once, all in plan order, through
//! `Plan::execute_direct` (the same door, the same batch as the plan would have run); a
//! multi-get's answers are then read from the shard's results in that order (`Direct`).
//!
//! What is answered comes from the engine's status alone (memcached's words): Ok, NotFound,
//! NotStored, CasMismatch, and errors (out of memory: `SERVER_ERROR out of memory storing
//! object`; a non-number for incr/decr: `CLIENT_ERROR cannot increment or decrement
//! non-numeric value`). `noreply` and meta `q` drop the status lines memcached drops; a
//! `SERVER_ERROR` is always sent, as memcached's `out_errstring` does.
//!
//! The meta commands' answers are rendered by `meta.rs`. Meta flags served: b c f k O q s t v
//! T N (mg: vivify on miss, `W`) E I M C F J D, and h l as memcached answers them for an item
//! never hit (`h0`, `l0`: directkv keeps no access time). `t` shows the TTL as of its place
//! among the flags (before or after a `T` or `N`), as memcached does. Not kept: the stale and
//! win states (`I` marks nothing stale: md I deletes, ms I is ignored; no `X` or `Z`).

use directkv_engine::mc::{self, ArithArgs, ItemMeta, StoreArgs};
use directkv_engine::{Op, OpError, Results, Status, NO_DEADLINE};
use directkv_proto::memcache::{
    write_client_error, write_error, write_number, write_server_error, write_status, write_value,
    Keys, MemcacheError, MetaFlags, MetaKey, Request, Status as Word, StoreMode, KEY_BYTES_MAX,
};

use super::meta;
use super::stats::{Tally, C};
use crate::shard::batch::OwnedBatch;
use crate::shard::dispatch::{self, Plan};
use crate::shard::ShardCtx;

/// memcached's largest relative exptime: 30 days in seconds; larger ones are Unix times.
pub(crate) const RELATIVE_EXPTIME_MAX_SECS: i64 = 60 * 60 * 24 * 30;

/// A deadline in the past that is not `NO_DEADLINE` (0): "expired at once".
const EXPIRED: u64 = 1;

/// The engine deadline (ms since the Unix epoch, `NO_DEADLINE` = none) of a memcached
/// exptime read at `now_ms`: 0 none; up to 30 days, seconds from now; beyond, a Unix time in
/// seconds; negative, or a Unix time already past, expired at once.
pub(super) fn deadline(exptime: i32, now_ms: u64) -> u64 {
    let e = i64::from(exptime);
    if e == 0 {
        NO_DEADLINE
    } else if e < 0 {
        EXPIRED
    } else if e <= RELATIVE_EXPTIME_MAX_SECS {
        now_ms + e as u64 * 1000
    } else {
        let at = e as u64 * 1000;
        if at <= now_ms {
            EXPIRED
        } else {
            at
        }
    }
}

/// The engine's `compare_cas` for a CAS unique a client sent: 0 is "none" to the engine, but
/// to memcached a unique of 0 matches no item (none has it), and no item gets `u64::MAX`
/// from a counter that starts at 1.
fn compare(unique: u64) -> u64 {
    if unique == 0 {
        u64::MAX
    } else {
        unique
    }
}

/// Seconds left before `deadline` as memcached's `t` flag shows them (-1: none).
pub(super) fn ttl_secs(deadline: u64, now_ms: u64) -> i64 {
    if deadline == NO_DEADLINE {
        -1
    } else {
        (deadline.saturating_sub(now_ms).div_ceil(1000)) as i64
    }
}

/// Whether a `t` flag comes before the flag `letter` in `flags`.
fn t_before(flags: MetaFlags<'_>, letter: u8) -> bool {
    for (l, _) in flags.iter() {
        if l == b't' {
            return true;
        }
        if l == letter {
            return false;
        }
    }
    false
}

/// The TTL a meta command gives an item it creates: memcached creates it without one, then
/// `N` and `T` each set theirs in flag order, so the later of the two wins.
fn created_ttl(flags: MetaFlags<'_>) -> Option<i32> {
    flags
        .iter()
        .filter_map(|(l, _)| match l {
            b'N' => flags.vivify_ttl,
            b'T' => flags.ttl,
            _ => None,
        })
        .last()
}

/// How to answer one request once its operations ran.
enum Pending<'a> {
    /// get, gets, gat, gats: one `McGet` per key from op `first`.
    Get {
        keys: Keys<'a>,
        cas: bool,
        touch: bool,
        first: usize,
    },
    Store {
        mode: StoreMode,
        noreply: bool,
        op: usize,
    },
    Arith {
        increment: bool,
        noreply: bool,
        op: usize,
    },
    Delete {
        noreply: bool,
        op: usize,
    },
    Touch {
        noreply: bool,
        op: usize,
    },
    /// mg; `vivify`: the op of the `McStore` (add) that creates a missing item (N);
    /// `before`: a read ahead of a touch, whose deadline `t` shows.
    MetaGet {
        key: MetaKey<'a>,
        flags: MetaFlags<'a>,
        op: usize,
        vivify: Option<usize>,
        before: Option<usize>,
    },
    MetaSet {
        key: MetaKey<'a>,
        flags: MetaFlags<'a>,
        op: usize,
    },
    MetaDelete {
        key: MetaKey<'a>,
        flags: MetaFlags<'a>,
        op: usize,
    },
    MetaArith {
        key: MetaKey<'a>,
        flags: MetaFlags<'a>,
        op: usize,
    },
    MetaDebug {
        key: MetaKey<'a>,
        op: usize,
    },
    /// A reply known when planned (`OK`, `MN`, `VERSION ...`, `STORED` of a login).
    Line(&'static [u8]),
    /// An error line.
    Error(MemcacheError),
    /// A `CLIENT_ERROR <text>` line.
    ClientError(&'static str),
}

/// Where the batch's operations go. With several shards, into the plan (copied into each
/// shard's batch, to cross to its thread). With one, in order into `planned`, which `run`
/// hands the engine as it is: the gets and deletes as the request gave them (their keys
/// borrow the input, their arguments are static), the others copied into `copies` (their
/// arguments were made while planning) and held by a placeholder that `run` replaces with
/// the copy (`fixups`: place in `planned`, index in `copies`). A batch of gets, the common
/// case at depth, is neither copied nor converted.
struct Ops<'p, 'a> {
    plan: &'p mut Plan,
    copies: &'p mut OwnedBatch,
    fixups: &'p mut Vec<(usize, usize)>,
    planned: &'p mut Vec<Op<'a>>,
}

impl<'a> Ops<'_, 'a> {
    fn direct(&self) -> bool {
        self.plan.shards() == 1
    }

    /// Operations planned so far: the index the next one gets.
    fn len(&self) -> usize {
        if self.direct() {
            self.planned.len()
        } else {
            self.plan.len()
        }
    }

    /// Plans an operation whose bytes live as long as the input; returns its index.
    #[inline]
    fn borrowed(&mut self, op: Op<'a>) -> usize {
        if !self.direct() {
            return self.plan.op(&op);
        }
        self.planned.push(op);
        self.planned.len() - 1
    }

    /// Plans an operation that borrows temporaries (copied); returns its index.
    fn copied(&mut self, op: &Op<'_>) -> usize {
        if !self.direct() {
            return self.plan.op(op);
        }
        let i = self.copies.push(op);
        self.fixups.push((self.planned.len(), i));
        self.planned.push(Op {
            kind: op.kind,
            key: &[],
            arg: &[],
            arg2: &[],
            func: op.func,
            elem: op.elem,
            no_return: op.no_return,
        });
        self.planned.len() - 1
    }
}

/// One connection's batch: the plan, what to answer, and the counts since the last batch.
pub(crate) struct Batch {
    plan: Plan,
    /// With one shard (`Ops`): the copied operations, and where they go in `planned`.
    copies: OwnedBatch,
    fixups: Vec<(usize, usize)>,
    /// With one shard: the operations in order. Empty between batches; its capacity is reused
    /// (`recycle`), as `pending`'s is.
    planned: Vec<Op<'static>>,
    /// Empty between batches; its capacity is reused (`recycle`).
    pending: Vec<Pending<'static>>,
    pub(crate) tally: Tally,
    /// The batch's clock, read once when it starts (deadlines, `t`).
    now_ms: u64,
}

/// Gives an empty vector's allocation a new lifetime (an in-place collect of no elements:
/// `T` and `U` are one type but for a lifetime, so the allocation is kept).
fn recycle<T, U>(v: Vec<T>) -> Vec<U> {
    debug_assert!(v.is_empty());
    v.into_iter().map(|_| unreachable!("empty")).collect()
}

/// The batch being planned, borrowing the input.
pub(crate) struct Planner<'b, 'a> {
    batch: &'b mut Batch,
    pending: Vec<Pending<'a>>,
    planned: Vec<Op<'a>>,
}

impl Batch {
    pub(crate) fn new(shards: usize) -> Batch {
        Batch {
            plan: Plan::new(shards),
            copies: OwnedBatch::default(),
            fixups: Vec::new(),
            planned: Vec::new(),
            pending: Vec::new(),
            tally: Tally::default(),
            now_ms: 0,
        }
    }

    /// Bytes held, for `maxmemory_clients`.
    pub(crate) fn capacity_bytes(&self) -> usize {
        self.plan.capacity_bytes()
            + self.copies.capacity_bytes()
            + self.fixups.capacity() * size_of::<(usize, usize)>()
            + self.planned.capacity() * size_of::<Op<'static>>()
            + self.pending.capacity() * size_of::<Pending<'static>>()
    }

    /// Gives back all but `bytes` of the plan's buffers.
    pub(crate) fn release(&mut self, bytes: usize) {
        self.plan.release(bytes);
        self.copies.release(bytes);
        self.fixups = Vec::new();
        self.planned = Vec::new();
        self.pending = Vec::new();
    }

    /// Starts planning requests that borrow `'a` bytes.
    pub(crate) fn planner<'b, 'a>(&'b mut self) -> Planner<'b, 'a> {
        self.plan.clear();
        self.copies.clear();
        self.fixups.clear();
        self.now_ms = crate::shard::expiry::now_ms();
        let pending = recycle(std::mem::take(&mut self.pending));
        let planned = recycle(std::mem::take(&mut self.planned));
        Planner {
            batch: self,
            pending,
            planned,
        }
    }
}

impl<'a> Planner<'_, 'a> {
    /// Requests planned and not yet answered.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    pub(crate) fn tally(&mut self) -> &mut Tally {
        &mut self.batch.tally
    }

    /// Answers `line` in its turn.
    pub(crate) fn line(&mut self, line: &'static [u8]) {
        self.pending.push(Pending::Line(line));
    }

    /// Answers `error` in its turn.
    pub(crate) fn error(&mut self, error: MemcacheError) {
        self.pending.push(Pending::Error(error));
    }

    /// Answers `CLIENT_ERROR text` in its turn.
    pub(crate) fn client_error(&mut self, text: &'static str) {
        self.pending.push(Pending::ClientError(text));
    }

    /// Plans an item request (not stats, flush_all, quit, version, verbosity: the caller's).
    pub(crate) fn request(&mut self, request: Request<'a>) {
        let Batch {
            plan,
            copies,
            fixups,
            tally,
            now_ms: now,
            ..
        } = &mut *self.batch;
        let now = *now;
        let mut plan = Ops {
            plan,
            copies,
            fixups,
            planned: &mut self.planned,
        };
        let first = plan.len();
        let p = match request {
            Request::Get { keys, cas } => {
                let want: &[u8] = if cas { &mc::WANT_CAS } else { &[] };
                for key in keys.iter() {
                    plan.borrowed(Op::mc_get(key, &[], want));
                }
                tally.add(C::CmdGet, keys.len() as u64);
                Pending::Get {
                    keys,
                    cas,
                    touch: false,
                    first,
                }
            }
            Request::GetAndTouch { exptime, keys, cas } => {
                let want: &[u8] = if cas { &mc::WANT_CAS } else { &[] };
                let touch = mc::touch_arg(deadline(exptime, now));
                for key in keys.iter() {
                    plan.copied(&Op::mc_get(key, &touch, want));
                }
                tally.add(C::CmdTouch, keys.len() as u64);
                tally.add(C::CmdGet, keys.len() as u64);
                Pending::Get {
                    keys,
                    cas,
                    touch: true,
                    first,
                }
            }
            Request::Store {
                mode,
                key,
                flags,
                exptime,
                value,
                noreply,
            } => {
                let (m, compare_cas) = match mode {
                    StoreMode::Set => (mc::StoreMode::Set, 0),
                    StoreMode::Add => (mc::StoreMode::Add, 0),
                    StoreMode::Replace => (mc::StoreMode::Replace, 0),
                    StoreMode::Append => (mc::StoreMode::Append, 0),
                    StoreMode::Prepend => (mc::StoreMode::Prepend, 0),
                    StoreMode::Cas { unique } => (mc::StoreMode::Set, compare(unique)),
                };
                let args = StoreArgs {
                    mode: m,
                    flags,
                    deadline: deadline(exptime, now),
                    compare_cas,
                    new_cas: 0,
                }
                .encode();
                tally.add(C::CmdSet, 1);
                Pending::Store {
                    mode,
                    noreply,
                    op: plan.copied(&Op::mc_store(key, value, &args)),
                }
            }
            Request::Arithmetic {
                key,
                delta,
                increment,
                noreply,
            } => {
                let args = ArithArgs::new(increment, delta).encode();
                Pending::Arith {
                    increment,
                    noreply,
                    op: plan.copied(&Op::mc_arith(key, &args)),
                }
            }
            Request::Delete { key, noreply } => Pending::Delete {
                noreply,
                op: plan.borrowed(Op::mc_delete(key, &[])),
            },
            Request::Touch {
                key,
                exptime,
                noreply,
            } => {
                tally.add(C::CmdTouch, 1);
                let d = mc::u64_arg(deadline(exptime, now));
                Pending::Touch {
                    noreply,
                    op: plan.copied(&Op::mc_touch(key, &d)),
                }
            }
            Request::MetaGet { key, flags } => {
                tally.add(C::CmdGet, 1);
                let mut buf = [0u8; KEY_BYTES_MAX];
                let k = key.decode(&mut buf);
                let want: &[u8] = if flags.has(b'c') { &mc::WANT_CAS } else { &[] };
                let touch = flags.ttl.map(|t| mc::touch_arg(deadline(t, now)));
                // memcached's `t` shows the TTL as of its place among the flags: one before a
                // `T` shows the TTL before the touch, so read it first (same key, same shard,
                // in order).
                let before = (touch.is_some() && t_before(flags, b'T'))
                    .then(|| plan.copied(&Op::mc_get(k, &[], &[])));
                let op = plan.copied(&Op::mc_get(k, touch.as_ref().map_or(&[], |t| &t[..]), want));
                let vivify = flags.vivify_ttl.map(|_| {
                    // A created item takes the TTL of the later of `N` and `T`.
                    let ttl = created_ttl(flags).unwrap_or(0);
                    let args = StoreArgs {
                        mode: mc::StoreMode::Add,
                        ..StoreArgs::set(0, deadline(ttl, now))
                    }
                    .encode();
                    plan.copied(&Op::mc_store(k, &[], &args))
                });
                Pending::MetaGet {
                    key,
                    flags,
                    op,
                    vivify,
                    before,
                }
            }
            Request::MetaSet { key, flags, value } => {
                tally.add(C::CmdSet, 1);
                let mut buf = [0u8; KEY_BYTES_MAX];
                let k = key.decode(&mut buf);
                // As memcached 1.6.18: add ignores `C`; replace with `C` is a cas (a missing
                // item is NF, not NS); append and prepend compare it on an existing item.
                let compare_cas = flags.compare_cas.map_or(0, compare);
                let (mode, compare_cas) = match flags.mode {
                    Some(b'E') => (mc::StoreMode::Add, 0),
                    Some(b'A') => (mc::StoreMode::Append, compare_cas),
                    Some(b'P') => (mc::StoreMode::Prepend, compare_cas),
                    Some(b'R') if compare_cas == 0 => (mc::StoreMode::Replace, 0),
                    _ => (mc::StoreMode::Set, compare_cas),
                };
                let args = StoreArgs {
                    mode,
                    flags: flags.client_flags.unwrap_or(0),
                    deadline: flags.ttl.map_or(NO_DEADLINE, |t| deadline(t, now)),
                    compare_cas,
                    new_cas: flags.explicit_cas.unwrap_or(0),
                }
                .encode();
                Pending::MetaSet {
                    key,
                    flags,
                    op: plan.copied(&Op::mc_store(k, value, &args)),
                }
            }
            Request::MetaDelete { key, flags } => {
                let mut buf = [0u8; KEY_BYTES_MAX];
                let k = key.decode(&mut buf);
                let cas = flags.compare_cas.map(|c| mc::u64_arg(compare(c)));
                Pending::MetaDelete {
                    key,
                    flags,
                    op: plan.copied(&Op::mc_delete(k, cas.as_ref().map_or(&[], |c| &c[..]))),
                }
            }
            Request::MetaArithmetic { key, flags } => {
                let mut buf = [0u8; KEY_BYTES_MAX];
                let k = key.decode(&mut buf);
                let args = ArithArgs {
                    incr: !matches!(flags.mode, Some(b'D' | b'-')),
                    delta: flags.delta.unwrap_or(1),
                    compare_cas: flags.compare_cas.map_or(0, compare),
                    new_cas: flags.explicit_cas.unwrap_or(0),
                    // A created item takes the TTL of the later of `N` and `T`.
                    create: flags.vivify_ttl.map(|_| {
                        let ttl = created_ttl(flags).unwrap_or(0);
                        (flags.initial.unwrap_or(0), deadline(ttl, now))
                    }),
                    touch: flags.ttl.map(|t| deadline(t, now)),
                }
                .encode();
                Pending::MetaArith {
                    key,
                    flags,
                    op: plan.copied(&Op::mc_arith(k, &args)),
                }
            }
            Request::MetaDebug { key } => {
                // memcached 1.6.18's cmd_meta counts `me` alone.
                tally.add(C::CmdMeta, 1);
                let mut buf = [0u8; KEY_BYTES_MAX];
                let k = key.decode(&mut buf);
                Pending::MetaDebug {
                    key,
                    op: plan.copied(&Op::mc_get(k, &[], &[])),
                }
            }
            Request::MetaNoop => Pending::Line(b"MN\r\n"),
            Request::Version => Pending::Line(VERSION_LINE),
            Request::Verbosity { noreply, .. } => {
                if noreply {
                    return;
                }
                Pending::Line(b"OK\r\n")
            }
            // The caller's (barriers, or the connection's end).
            Request::Stats { .. } | Request::FlushAll { .. } | Request::Quit => return,
        };
        self.pending.push(p);
    }

    /// Executes the planned operations and appends every answer to `out`, in order; the batch
    /// is empty again afterwards.
    pub(crate) async fn run(&mut self, ctx: &ShardCtx, out: &mut Vec<u8>) {
        if self.pending.is_empty() {
            return;
        }
        let Batch {
            plan,
            copies,
            fixups,
            tally,
            now_ms,
            ..
        } = &mut *self.batch;
        // One shard: the engine gets the operations as planned (`Ops`), and the answers take
        // their keys from them (no second split of a multi-get's line).
        let mut run: Vec<Op<'_>> = std::mem::take(&mut self.planned);
        if !run.is_empty() {
            for &(at, i) in fixups.iter() {
                run[at] = copies.op(i);
            }
            plan.execute_direct(ctx, &run);
        } else if !plan.is_empty() {
            dispatch::execute(ctx, plan).await;
        }
        let direct = Direct {
            ops: &run,
            results: if run.is_empty() {
                None
            } else {
                plan.results_of(ctx.id)
            },
        };
        for p in self.pending.drain(..) {
            render(&p, plan, &direct, *now_ms, tally, out);
        }
        run.clear();
        self.planned = recycle(run);
        plan.clear();
        copies.clear();
        fixups.clear();
    }

    /// Ends planning: the vectors' allocations go back to the batch.
    pub(crate) fn finish(mut self) {
        self.pending.clear();
        self.planned.clear();
        self.batch.pending = recycle(std::mem::take(&mut self.pending));
        self.batch.planned = recycle(std::mem::take(&mut self.planned));
    }
}

/// `VERSION <the memcached release whose protocol this is>` (see `stats::PROTOCOL_VERSION`).
const VERSION_LINE: &[u8] = b"VERSION 1.6.18\r\n";

/// The answer of a delete or touch: `hit`'s counter and word when the key was there, NOT_FOUND
/// and `miss` when it was not.
fn hit_or_miss(
    status: Status,
    hit: (C, Word),
    miss: C,
    noreply: bool,
    tally: &mut Tally,
    out: &mut Vec<u8>,
) {
    match status {
        Status::Ok => {
            tally.add(hit.0, 1);
            status_line(out, noreply, hit.1);
        }
        Status::Error(e) => engine_error(out, e, noreply, tally),
        _ => {
            tally.add(miss, 1);
            status_line(out, noreply, Word::NotFound);
        }
    }
}

fn status_line(out: &mut Vec<u8>, noreply: bool, word: Word) {
    if !noreply {
        write_status(out, word);
    }
}

/// The error line of an engine error, as memcached words it; `None` for a client error that
/// `noreply` silences (memcached's `out_string`), after writing nothing.
pub(super) fn engine_error(out: &mut Vec<u8>, e: OpError, noreply: bool, tally: &mut Tally) {
    match e {
        OpError::OutOfMemory => {
            tally.add(C::StoreNoMemory, 1);
            write_server_error(out, "out of memory storing object");
        }
        OpError::ValueTooLarge { .. } => {
            tally.add(C::StoreTooLarge, 1);
            write_error(out, MemcacheError::TooLarge);
        }
        OpError::NotAnInteger => {
            if !noreply {
                write_client_error(out, "cannot increment or decrement non-numeric value");
            }
        }
        OpError::KeyEmpty | OpError::KeyTooLong { .. } => {
            if !noreply {
                write_error(out, MemcacheError::BadCommandLine);
            }
        }
        OpError::ReplyTooLarge { .. } => {
            write_server_error(out, "out of memory writing get response")
        }
        other => write_server_error(out, &other.to_string()),
    }
}

pub(super) fn u64_at(data: &[u8], at: usize) -> u64 {
    data.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// With one shard (`Ops`), the operations as the engine ran them and their results, in plan
/// order: a get's keys are found there without splitting its line again, and its answers
/// without the plan's lookup of each (`Plan::result`). With several, `ops` is empty and
/// `results` None.
struct Direct<'r, 'a> {
    ops: &'r [Op<'a>],
    results: Option<&'r Results>,
}

/// Appends the answer of `p`.
fn render(
    p: &Pending<'_>,
    plan: &Plan,
    direct: &Direct<'_, '_>,
    now: u64,
    tally: &mut Tally,
    out: &mut Vec<u8>,
) {
    match *p {
        Pending::Line(line) => out.extend_from_slice(line),
        Pending::Error(e) => write_error(out, e),
        Pending::ClientError(text) => write_client_error(out, text),
        Pending::Get {
            keys,
            cas,
            touch,
            first,
        } => {
            let (hit, miss) = if touch {
                (C::TouchHits, C::TouchMisses)
            } else {
                (C::GetHits, C::GetMisses)
            };
            let mut words = keys.iter();
            for i in 0..keys.len() {
                let (key, result) = match (direct.ops.get(first + i), direct.results) {
                    (Some(op), Some(r)) => (op.key, (r.status(first + i), r.data(first + i))),
                    _ => (words.next().unwrap_or_default(), plan.result(first + i)),
                };
                match result {
                    (Status::Ok, data) => {
                        let (value, meta) =
                            mc::split_get(data).unwrap_or((&[], ItemMeta::default()));
                        tally.add(hit, 1);
                        if touch {
                            tally.add(C::GetHits, 1);
                        }
                        write_value(out, key, meta.flags, value, cas.then_some(meta.cas));
                    }
                    (Status::Error(e), _) => {
                        // memcached ends the reply with the error (no END).
                        engine_error(out, e, false, tally);
                        return;
                    }
                    _ => {
                        tally.add(miss, 1);
                        if touch {
                            tally.add(C::GetMisses, 1);
                        }
                    }
                }
            }
            write_status(out, Word::End);
        }
        Pending::Store { mode, noreply, op } => {
            let is_cas = matches!(mode, StoreMode::Cas { .. });
            match plan.result(op).0 {
                Status::Ok => {
                    tally.add(C::TotalItems, 1);
                    if is_cas {
                        tally.add(C::CasHits, 1);
                    }
                    status_line(out, noreply, Word::Stored);
                }
                Status::NotStored => status_line(out, noreply, Word::NotStored),
                Status::CasMismatch => {
                    tally.add(C::CasBadval, 1);
                    status_line(out, noreply, Word::Exists);
                }
                Status::NotFound => {
                    tally.add(C::CasMisses, 1);
                    status_line(out, noreply, Word::NotFound);
                }
                Status::Error(e) => engine_error(out, e, noreply, tally),
            }
        }
        Pending::Arith {
            increment,
            noreply,
            op,
        } => {
            let (hit, miss) = if increment {
                (C::IncrHits, C::IncrMisses)
            } else {
                (C::DecrHits, C::DecrMisses)
            };
            match plan.result(op) {
                (Status::Ok, data) => {
                    tally.add(hit, 1);
                    if !noreply {
                        write_number(out, u64_at(data, 0));
                    }
                }
                (Status::Error(e), _) => engine_error(out, e, noreply, tally),
                _ => {
                    tally.add(miss, 1);
                    status_line(out, noreply, Word::NotFound);
                }
            }
        }
        Pending::Delete { noreply, op } => hit_or_miss(
            plan.result(op).0,
            (C::DeleteHits, Word::Deleted),
            C::DeleteMisses,
            noreply,
            tally,
            out,
        ),
        Pending::Touch { noreply, op } => hit_or_miss(
            plan.result(op).0,
            (C::TouchHits, Word::Touched),
            C::TouchMisses,
            noreply,
            tally,
            out,
        ),
        Pending::MetaGet {
            key,
            flags,
            op,
            vivify,
            before,
        } => meta::get(key, flags, plan, (op, vivify, before), now, tally, out),
        Pending::MetaSet { key, flags, op } => {
            meta::set(key, flags, plan.result(op), now, tally, out)
        }
        Pending::MetaDelete { key, flags, op } => {
            meta::delete(key, flags, plan.result(op).0, now, tally, out)
        }
        Pending::MetaArith { key, flags, op } => {
            meta::arith(key, flags, plan.result(op), now, tally, out)
        }
        Pending::MetaDebug { key, op } => meta::debug(key, plan.result(op), now, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pending_list_keeps_its_allocation_between_batches() {
        let mut v: Vec<Pending<'static>> = Vec::with_capacity(64);
        let ptr = v.as_ptr() as usize;
        let buf = b"x".to_vec();
        let mut borrowed: Vec<Pending<'_>> = recycle(std::mem::take(&mut v));
        borrowed.push(Pending::Line(b"OK\r\n"));
        borrowed.push(Pending::Get {
            keys: directkv_proto::memcache::Keys::from_words(&buf),
            cas: false,
            touch: false,
            first: 0,
        });
        borrowed.clear();
        let back: Vec<Pending<'static>> = recycle(borrowed);
        assert_eq!((back.as_ptr() as usize, back.capacity()), (ptr, 64));
        // Small enough that a batch of 1024 requests holds a few hundred KiB at most.
        assert!(
            size_of::<Pending<'static>>() <= 256,
            "{}",
            size_of::<Pending<'static>>()
        );
    }

    #[test]
    fn the_engines_operation_list_keeps_its_allocation_between_batches() {
        let mut v: Vec<Op<'static>> = Vec::with_capacity(64);
        let ptr = v.as_ptr() as usize;
        let key = b"k".to_vec();
        let mut borrowed: Vec<Op<'_>> = recycle(std::mem::take(&mut v));
        borrowed.push(Op::mc_get(&key, &[], &[]));
        borrowed.clear();
        let back: Vec<Op<'static>> = recycle(borrowed);
        assert_eq!((back.as_ptr() as usize, back.capacity()), (ptr, 64));
    }

    #[test]
    fn exptimes_become_memcacheds_deadlines() {
        let now = 1_700_000_000_000;
        assert_eq!(deadline(0, now), NO_DEADLINE);
        assert_eq!(deadline(-1, now), EXPIRED);
        assert_eq!(deadline(10, now), now + 10_000);
        assert_eq!(deadline(2_592_000, now), now + 2_592_000_000);
        // Beyond 30 days: a Unix time, here in the past (expired) and in the future.
        assert_eq!(deadline(2_592_001, now), EXPIRED);
        assert_eq!(deadline(1_800_000_000, now), 1_800_000_000_000);
        assert_eq!(ttl_secs(NO_DEADLINE, now), -1);
        assert_eq!(ttl_secs(now + 100_000, now), 100);
        assert_eq!(ttl_secs(now + 99_001, now), 100);
    }
}
