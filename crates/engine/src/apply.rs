//! What one operation does to one value: the file to edit to add an operation.
//!
//! ```text
//!  validate(op, limits)                 key and value lengths, before the op enters a window
//!  apply(registry, op, current value)   -> (Status, Effect), reply bytes appended to `out`
//!                                          Effect: keep / set scratch / set arg / set arg2 /
//!                                          delete; the pipeline stores it (or forwards it)
//! ```
//!
//! Pure: nothing here reads or writes the table, so the same `apply` serves an operation run
//! alone and one run against a group's forwarded value. Adding an operation means a kind in
//! `op.rs`, its arm here (and in `validate_value` if it carries a value to store), and its
//! fast paths in the pipeline only if it needs any.

use crate::config::Limits;
use crate::index::record::{Meta, NO_DEADLINE};
use crate::memcache::Item;
use crate::op::{Op, OpKind, Status};
use crate::ops::{self, FunctionRegistry};

/// What an operation does to the stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    Keep,
    /// The new value is in the scratch buffer.
    SetScratch,
    /// The new value is `op.arg`.
    SetArg,
    /// The new value is `op.arg2` (cas).
    SetArg2,
    Delete,
    /// The value stays; its deadline changed (key expiry: `expiry.rs`).
    Touch,
}

/// Applies one operation to the current value `cur` (None = missing) whose deadline and item
/// meta are `*item` (`Item::NONE` when missing; `*item` becomes what to store with the
/// effect). Appends the operation's reply data to `out` unless it is "no return". `cas` is the
/// CAS unique a memcache write takes (the operation's, `memcache::cas_at`). Pure: the caller
/// stores the effect.
///
/// An operation of the RESP and native kinds that changes or deletes the value drops the
/// item's meta (so a CAS a memcached client holds no longer matches); one that keeps the value
/// (a read, a deadline change) keeps it.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn apply(
    reg: &FunctionRegistry,
    op: &Op,
    cur: Option<&[u8]>,
    item: &mut Item,
    now: u64,
    cas: u64,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    if op.kind.is_memcache() {
        return crate::memcache::apply_mc(op, cur, item, now, cas, scratch, out);
    }
    let r = apply_kv(reg, op, cur, &mut item.deadline, now, scratch, out);
    if !matches!(r.1, Effect::Keep | Effect::Touch) {
        item.meta = Meta::NONE;
    } else if op.kind == OpKind::Ttl && op.arg == crate::op::TTL_WITH_META {
        // A read that says whether the entry has item meta (MEMORY USAGE counts its bytes).
        if r.0 == Status::Ok && !op.no_return {
            out.push(u8::from(item.meta.is_some()));
        }
    }
    r
}

/// [`apply`] for the RESP and native kinds, on the value and its deadline `*dl`
/// (`NO_DEADLINE` when missing or without one; `*dl` becomes the deadline to store).
// `#[inline]` on `apply` and its two helpers (not on `validate`): the pipeline's code then
// compiles as it did when this was part of its module. Without it the GET window took 206
// instructions per operation instead of 194; with `validate` inlined too, atomic-single took
// 89.4 instead of 87.4 (callgrind, scripts/instructions-per-op.sh).
#[inline]
fn apply_kv(
    reg: &FunctionRegistry,
    op: &Op,
    cur: Option<&[u8]>,
    dl: &mut u64,
    now: u64,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    let reply = !op.no_return;
    let emit = |out: &mut Vec<u8>, bytes: &[u8]| {
        if reply {
            crate::op::push_small(out, bytes)
        }
    };
    match op.kind {
        OpKind::Get => match cur {
            Some(v) => {
                emit(out, v);
                (Status::Ok, Effect::Keep)
            }
            None => (Status::NotFound, Effect::Keep),
        },
        // A plain put clears the deadline (Redis's SET without KEEPTTL).
        OpKind::Put => {
            *dl = NO_DEADLINE;
            (Status::Ok, Effect::SetArg)
        }
        OpKind::PutNx if cur.is_some() => (Status::NotStored, Effect::Keep),
        OpKind::PutXx if cur.is_none() => (Status::NotStored, Effect::Keep),
        OpKind::PutNx | OpKind::PutXx => {
            *dl = NO_DEADLINE;
            (Status::Ok, Effect::SetArg)
        }
        OpKind::Delete if cur.is_some() => (Status::Ok, Effect::Delete),
        OpKind::Delete => (Status::NotFound, Effect::Keep),
        OpKind::Cas => {
            // A missing key matches an empty expected value, so cas can create a key.
            let current = cur.unwrap_or(&[]);
            emit(out, current);
            if current == op.arg && (cur.is_some() || op.arg.is_empty()) {
                (Status::Ok, Effect::SetArg2)
            } else {
                (Status::CasMismatch, Effect::Keep)
            }
        }
        OpKind::UpdateS2S => {
            match ops::update_scalar2scalar(reg, op.func, op.elem, cur, op.arg, scratch) {
                Ok(()) => {
                    match cur {
                        Some(v) => emit(out, v),
                        None => {
                            if reply {
                                out.resize(out.len() + op.elem.width(), 0)
                            }
                        }
                    }
                    (Status::Ok, Effect::SetScratch)
                }
                Err(e) => (Status::Error(e), Effect::Keep),
            }
        }
        OpKind::Append | OpKind::IncrBy | OpKind::IncrByFloat => {
            apply_string(op, cur, scratch, out)
        }
        OpKind::PutExpire | OpKind::Expire | OpKind::Persist | OpKind::Ttl | OpKind::GetEx => {
            crate::expiry::apply_expiry(op, cur, dl, now, out)
        }
        OpKind::SetRange | OpKind::SetBit => apply_range(op, cur, scratch, out),
        _ => apply_vector(reg, op, cur, scratch, out),
    }
}

/// The Redis-style string operations: the new value goes to `scratch`.
#[inline]
fn apply_string(
    op: &Op,
    cur: Option<&[u8]>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    scratch.clear();
    let r = match op.kind {
        OpKind::Append => {
            scratch.extend_from_slice(cur.unwrap_or(&[]));
            scratch.extend_from_slice(op.arg);
            Ok(())
        }
        OpKind::IncrBy => crate::strings::incr_by(cur, op.arg, scratch),
        _ => crate::strings::incr_by_float(cur, op.arg, scratch),
    };
    if let Err(e) = r {
        return (Status::Error(e), Effect::Keep);
    }
    if !op.no_return {
        match op.kind {
            OpKind::Append => out.extend_from_slice(&(scratch.len() as u64).to_le_bytes()),
            _ => out.extend_from_slice(scratch),
        }
    }
    (Status::Ok, Effect::SetScratch)
}

/// SETRANGE and SETBIT (`ops/range.rs`): the new value goes to `scratch`.
fn apply_range(
    op: &Op,
    cur: Option<&[u8]>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    let reply = !op.no_return;
    let changed = match op.kind {
        OpKind::SetRange => match ops::range::set_range(cur, op.arg, op.arg2, scratch) {
            Ok(changed) => {
                if reply {
                    out.extend_from_slice(&(scratch.len() as u64).to_le_bytes());
                }
                changed
            }
            Err(e) => return (Status::Error(e), Effect::Keep),
        },
        _ => match ops::range::set_bit(cur, op.arg, op.arg2, scratch) {
            Ok(old) => {
                if reply {
                    out.push(old);
                }
                true
            }
            Err(e) => return (Status::Error(e), Effect::Keep),
        },
    };
    let effect = if changed {
        Effect::SetScratch
    } else {
        Effect::Keep
    };
    (Status::Ok, effect)
}

#[inline]
fn apply_vector(
    reg: &FunctionRegistry,
    op: &Op,
    cur: Option<&[u8]>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    let Some(v) = cur else {
        return (Status::NotFound, Effect::Keep);
    };
    let r = match op.kind {
        OpKind::UpdateS2V => ops::update_scalar2vector(reg, op.func, op.elem, v, op.arg, scratch),
        OpKind::UpdateV2V => ops::update_vector2vector(reg, op.func, op.elem, v, op.arg, scratch),
        OpKind::Reduce => ops::reduce(reg, op.func, op.elem, v, op.arg, scratch),
        OpKind::Filter => ops::filter(reg, op.func, op.elem, v, op.arg, scratch),
        k => unreachable!("{k:?} is not a vector operation"),
    };
    if let Err(e) = r {
        return (Status::Error(e), Effect::Keep);
    }
    let (data, effect) = match op.kind {
        OpKind::UpdateS2V | OpKind::UpdateV2V => (v, Effect::SetScratch),
        _ => (&scratch[..], Effect::Keep),
    };
    if !op.no_return {
        out.extend_from_slice(data);
    }
    (Status::Ok, effect)
}

/// Checks an operation against the limits before it enters the pipeline. The empty key is a
/// key like any other (Redis accepts it; the index stores it as a record, `index::bucket`).
pub(crate) fn validate(op: &Op, limits: &Limits) -> Result<(), crate::OpError> {
    use crate::OpError;
    let klen = op.key.len();
    if klen > limits.key_len_max {
        return Err(OpError::KeyTooLong {
            len: klen,
            max: limits.key_len_max,
        });
    }
    validate_value(op, limits)
}

/// The value half of [`validate`], for an operation whose key is known to be valid.
#[inline(always)]
pub(crate) fn validate_value(op: &Op, limits: &Limits) -> Result<(), crate::OpError> {
    use crate::OpError;
    if op.kind.writes() {
        let value_len = match op.kind {
            // The memcache kinds' other arguments are checked by `memcache::apply_mc` (and
            // `atomic.rs`): a call here gave `validate`, which the GET/PUT windows run for every
            // operation, a stack frame (PUT +6 instructions per operation, callgrind).
            OpKind::Put | OpKind::PutNx | OpKind::PutXx | OpKind::McStore => op.arg.len(),
            OpKind::PutExpire | OpKind::Expire | OpKind::GetEx => {
                crate::expiry::validate_args(op)?;
                if op.kind == OpKind::PutExpire {
                    op.arg.len()
                } else {
                    0
                }
            }
            OpKind::Cas => op.arg2.len(),
            OpKind::SetRange | OpKind::SetBit => ops::range::value_len(op),

            _ => 0,
        };
        if value_len > limits.value_len_max {
            return Err(OpError::ValueTooLarge {
                len: value_len,
                max: limits.value_len_max,
            });
        }
    }
    Ok(())
}
