//! All-or-nothing batches: the check that lets a multi-key write (MSET; MSETNX, COPY and
//! MULTI/EXEC after issue 20) be refused whole instead of applied in part (issue 19 item 9).
//!
//! ```text
//!  check(ops)    1. validate every operation (key and value limits): the first error refuses
//!                2. need[class]: the blocks each write may allocate, at most (write_blocks_max)
//!                3. trial: allocate need[c] blocks of every class c, largest first, free them all
//!                   (Table::trial_alloc): one failure refuses with OutOfMemory
//!  execute(ops)  run next, with nothing in between on this engine: every write finds its blocks
//! ```
//!
//! Why the trial makes the batch succeed. A write allocates at most its record's block (of the
//! class of its key and new value, unless it is inline) and one chained bucket; nothing else in
//! the engine takes slab memory. Each operation gets a bound of that size: a put's value is its
//! argument, a cas's its new value, an INCRBY's at most 20 bytes, and an append's, an
//! INCRBYFLOAT's and an update's at most `value_len_max` (they depend on the current value). A
//! same-key group that the pipeline writes back once stores the value its last writing
//! operation produced, which that operation's bound covers. So the batch's allocations can be
//! matched one to one with the trial's blocks, each no larger than its match. The trial's blocks
//! are free again when the batch starts (freeing pushes a block onto its class's free list as it
//! is; merging is lazy). Then no allocation of the batch fails, in any order:
//!
//! - `SlabAllocator::alloc(c)` is best fit: a free block of class `c` if there is one, else it
//!   splits one of the smallest larger class that has any; it merges only when both fail.
//! - Best fit keeps a matching: serving request `c` with block `s` (the smallest free block of
//!   at least `c`), while the matching gave `c` block `b >= s`, hands `s`'s own match (a request
//!   of at most `s`, if any) block `b` instead; the others keep theirs. Frees only add blocks.
//! - So a matched free block of at least `c` exists at every allocation: none fails, and no
//!   merge (which could join two matched blocks) ever runs.
//!
//! The check is conservative (a chained bucket for every write, the largest value for computed
//! ones), so near out-of-memory it may refuse a batch that would have fit; that is Redis's rule
//! too (`-OOM` before a write command runs).
//!
//! The guarantee holds only if nothing else allocates or frees on this engine between the check
//! and the batch: `Engine::execute_atomic` does both in one call; a caller that checks and
//! executes separately (a shard holding its part of a cross-shard write) must run nothing on the
//! engine in between.
//!
//! Non-goals: rolling back operations that fail for their own reasons (an INCR of a value that
//! is not a number fails alone, as in a Redis transaction); exactness near out-of-memory.

use crate::config::Limits;
use crate::error::OpError;
use crate::index::Table;
use crate::op::{Op, OpKind};
use crate::slab::CLASS_COUNT_MAX;

/// Longest value an INCRBY writes: an i64 in decimal ("-9223372036854775808").
const INCR_VALUE_BYTES_MAX: usize = 20;

/// Whether the whole batch `ops` will be stored (see the module comment): `Ok` when every
/// operation is within the limits and every block its writes may need is free; otherwise the
/// first operation's limit error, or `OutOfMemory`. Leaves the store's contents unchanged.
pub(crate) fn check(
    table: &mut Table,
    limits: &Limits,
    ops: &[Op],
    taken: &mut Vec<(u32, u8)>,
) -> Result<(), OpError> {
    for op in ops {
        crate::apply::validate(op, limits)?;
    }
    let mut need = [0u32; CLASS_COUNT_MAX];
    let mut acc = crate::index::Access::default();
    for op in ops {
        write_blocks(table, limits, op, &mut acc, &mut need)?;
    }
    if table.trial_alloc(&need, taken) {
        Ok(())
    } else {
        Err(OpError::OutOfMemory)
    }
}

/// Adds to `need` the blocks one operation's write may allocate, at most (the bound the module
/// comment gives for each kind); reads add nothing. Eviction (`crate::evict`) frees this much
/// ahead of a batch. Fails as the write would for a key-value larger than the top class.
pub(crate) fn write_blocks(
    table: &Table,
    limits: &Limits,
    op: &Op,
    acc: &mut crate::index::Access,
    need: &mut [u32; CLASS_COUNT_MAX],
) -> Result<(), OpError> {
    // A write that may keep or set a deadline may need a record where it would be inline
    // without one (`index/record.rs`), so those count a record's block.
    if op.kind.is_memcache() {
        return memcache_blocks_max(table, limits, op, acc, need);
    }
    let (vlen, deadline) = match op.kind {
        OpKind::Put | OpKind::PutNx | OpKind::PutXx => (op.arg.len(), false),
        OpKind::PutExpire => (op.arg.len(), true),
        OpKind::Cas => (op.arg2.len(), true),
        OpKind::IncrBy => (INCR_VALUE_BYTES_MAX, true),
        OpKind::Get | OpKind::Delete | OpKind::Reduce | OpKind::Filter | OpKind::Ttl => {
            return Ok(())
        }
        // The value stays and is rewritten with its new deadline (or none): the blocks a
        // write of its own length may take.
        OpKind::Expire | OpKind::GetEx | OpKind::Persist => {
            let h = crate::hash::key_hash(op.key);
            acc.clear();
            match table.lookup(op.key, h, acc) {
                Some(l) => (table.value(&l).len(), op.kind != OpKind::Persist),
                None => return Ok(()),
            }
        }
        OpKind::Append
        | OpKind::IncrByFloat
        | OpKind::UpdateS2S
        | OpKind::UpdateS2V
        | OpKind::UpdateV2V
        | OpKind::SetRange
        | OpKind::SetBit => (limits.value_len_max, true),
        k => unreachable!("{k:?} is a memcache kind"),
    };
    table.write_blocks_max(op.key.len(), vlen, deadline, false, need)
}

/// `blocks_max` of a memcache operation: the item it writes is a record with meta and room for
/// a deadline; a store's value is its data (an append's at most `value_len_max`), an incr's at
/// most the current value's length or 20 digits, a get's or touch's the current value.
fn memcache_blocks_max(
    table: &Table,
    limits: &Limits,
    op: &Op,
    acc: &mut crate::index::Access,
    need: &mut [u32; CLASS_COUNT_MAX],
) -> Result<(), OpError> {
    use crate::op::mc::{StoreArgs, StoreMode};
    crate::memcache::validate_args(op)?;
    let current = |acc: &mut crate::index::Access| {
        let h = crate::hash::key_hash(op.key);
        acc.clear();
        table.lookup(op.key, h, acc).map(|l| table.value(&l).len())
    };
    let vlen = match op.kind {
        OpKind::McDelete => return Ok(()),
        OpKind::McStore => match StoreArgs::decode(op.arg2).map(|a| a.mode) {
            Some(StoreMode::Append | StoreMode::Prepend) => limits.value_len_max,
            _ => op.arg.len(),
        },
        OpKind::McArith => current(acc).unwrap_or(0).max(INCR_VALUE_BYTES_MAX),
        _ => match current(acc) {
            Some(n) => n,
            None => return Ok(()),
        },
    };
    table.write_blocks_max(op.key.len(), vlen, true, true, need)
}
