//! All-or-nothing batches: the check that lets a multi-key write (MSET; MSETNX, COPY and
//! MULTI/EXEC after issue 20) be refused whole instead of applied in part (issue 19 item 9).
//!
//! ```text
//!  check(ops)    1. validate every operation (key and value limits): the first error refuses
//!                2. need[class] = blocks each write may allocate, at most (Table::write_blocks_max)
//!                3. trial: allocate need[c] blocks of every class c, largest first, free them all
//!                   (Table::trial_alloc): one failure refuses with OutOfMemory
//!  execute(ops)  run next, with nothing in between on this engine: every write finds its blocks
//! ```
//!
//! Why the trial makes the batch succeed. A write allocates at most its record's block (of the
//! class of its key and new value, unless it is inline) and one chained bucket; nothing else in
//! the engine takes slab memory. The bound of each operation is counted (a put's value is its
//! argument, a cas's its new value; an INCRBY's is at most 20 bytes; an append's, an
//! INCRBYFLOAT's and an update's are bounded by `value_len_max`, because they depend on the
//! current value), and a same-key group that the pipeline writes back once allocates at most
//! what one of its operations would. After the trial, class `c` holds at least `need[c]` free
//! blocks (in its hot cache or its pool). In the slab allocator (`slab/`), `alloc(c)` takes a
//! block of class `c` whenever class `c` has one, without splitting a larger block or merging;
//! it splits a larger class only when class `c` has none, and merges only when that fails too.
//! Frees only add free blocks. So by induction over the batch's allocations, the `k`-th
//! allocation of class `c` (k <= need[c]) finds class `c` still holding `need[c] - k + 1 >= 1`
//! blocks: no allocation of the batch splits, merges or fails, whatever the order of its
//! allocations and frees. The check is conservative (it counts a chained bucket for every write
//! and the largest value for computed ones), so near out-of-memory it may refuse a batch that
//! would have fit; that is Redis's rule too (`-OOM` before a write command runs).
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
    for op in ops {
        let vlen = match op.kind {
            OpKind::Put | OpKind::PutNx | OpKind::PutXx => op.arg.len(),
            OpKind::Cas => op.arg2.len(),
            OpKind::IncrBy => INCR_VALUE_BYTES_MAX,
            OpKind::Get | OpKind::Delete | OpKind::Reduce | OpKind::Filter => continue,
            OpKind::Append
            | OpKind::IncrByFloat
            | OpKind::UpdateS2S
            | OpKind::UpdateS2V
            | OpKind::UpdateV2V => limits.value_len_max,
        };
        table.write_blocks_max(op.key.len(), vlen, &mut need)?;
    }
    if table.trial_alloc(&need, taken) {
        Ok(())
    } else {
        Err(OpError::OutOfMemory)
    }
}
