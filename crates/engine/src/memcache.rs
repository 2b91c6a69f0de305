//! What the memcache operations (issue 21 item 3, `op::mc`) do to one item: memcached 1.6's
//! rules for get/gat, set/add/replace/append/prepend/cas, delete, incr/decr and touch, on the
//! value, deadline and item meta (client flags, CAS unique) the pipeline hands over.
//!
//! ```text
//!  apply_mc(op, cur, item, now, cas)   pure like apply.rs: the caller stores the effect;
//!                                      `cas` is the CAS a write takes (`cas_at`)
//!   McGet     reply value ++ [flags][cas][deadline]; a touch sets the deadline (Touch);
//!             want_cas gives a meta-less entry meta (flags 0, the next CAS: Touch); one
//!             that only reads (`mc_get_reads`: memcached's get) never comes here: the
//!             pipeline answers it as a GET (`retire::run_single`, `push_read`; in a window
//!             of memcache operations, `direct::memcache_window` by `retire::mc_read`)
//!   McStore   add/replace/append/prepend conditions, then the CAS compare; the new item
//!             takes the next CAS (or the given one); append/prepend keep flags, deadline
//!   McDelete  the CAS compare, then Delete
//!   McArith   the CAS compare, then memcached's strtoull rules (`parse_u64`); incr wraps,
//!             decr stops at 0; a result no longer than the value is space-padded to its
//!             length (memcached rewrites in place), a longer one is just its digits; then
//!             the new deadline, if any (ma T); the reply says the deadline before and
//!             whether the item was created (ma's `t` shows the TTL as of its place among
//!             the flags)
//!   McTouch   the deadline; flags and CAS stay
//! ```
//!
//! Checked against memcached 1.6.18: touch and gat keep the CAS; a deadline at or before
//! `now` (negative exptime) stores nothing visible but answers as stored (add on a live key
//! is still NOT_STORED); `" 12 "`, `"+5"`, `"-0"`, `"00012"` and `"12 34"` are numbers,
//! `"12abc"`, `"-5"`, `" "`, `""` and values past 2^64-1 are not.
//!
//! Goals: one place for memcached's item rules, deterministic given the ops, `now` and the
//! CAS counter (engine state). Non-goals: memcached's chunked items (a value over its
//! slab_chunk_max is never numeric there; here a number is a number at any length).

use crate::apply::Effect;
use crate::error::OpError;
use crate::expiry::expired;
use crate::index::record::{Meta, NO_DEADLINE};
use crate::op::mc::{opt_u64, push_trailer, ArithArgs, ItemMeta, StoreArgs, StoreMode};
use crate::op::{Op, OpKind, Status};

/// An entry's deadline and item meta, as the pipeline carries them with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Item {
    /// Absolute ms, or `NO_DEADLINE`.
    pub deadline: u64,
    pub meta: Meta,
}

impl Item {
    pub(crate) const NONE: Item = Item {
        deadline: NO_DEADLINE,
        meta: Meta::NONE,
    };
}

/// The CAS counter is engine state (`Engine::cas_next`): every operation of a batch takes one
/// number, in request order, whether it uses it or not, and a memcache write's CAS unique is
/// its operation's number. The pipeline runs a key's group of operations ahead of the leaders
/// after it, so numbers drawn in execution order would differ from those the operations get
/// one by one; numbers by position do not. The CAS of operation `i` of a batch whose first
/// takes `base`; 0 (no CAS) is skipped when the counter wraps, after 2^64 operations.
#[inline(always)]
pub(crate) fn cas_at(base: u64, i: usize) -> u64 {
    base.wrapping_add(i as u64).max(1)
}

/// The counter after a batch of `n` operations from `base`.
pub(crate) fn cas_after(base: u64, n: usize) -> u64 {
    base.wrapping_add(n as u64).max(1)
}

/// The CAS a write takes: `given` if nonzero (meta `E`), else the operation's.
#[inline]
fn take_cas(given: u64, cas: u64) -> u64 {
    if given != 0 {
        given
    } else {
        cas
    }
}

/// Whether `McGet` `op` on an entry whose item meta is `meta` (None: missing) only reads:
/// no touch, and no CAS to give (none wanted, or the entry has one, or there is no entry).
/// Such an operation's result is the value and `push_trailer`'s trailer, or NotFound, exactly
/// as `apply_mc` gives it with `Effect::Keep`: the pipeline answers it the read-only way
/// (`retire::run_single`), without the apply and store machinery. Malformed arguments are not
/// reads (`apply_mc` refuses them).
#[inline(always)]
pub(crate) fn mc_get_reads(op: &Op, meta: Option<Meta>) -> bool {
    op.arg.is_empty()
        && match op.arg2 {
            [] | [0] => true,
            [1] => meta.is_none_or(|m| m.is_some()),
            _ => false,
        }
}

/// Whether `McGet` `op` only reads whatever the entry (`mc_get_reads` for every `meta`): no
/// touch and no CAS wanted, memcached's `get`.
#[inline(always)]
pub(crate) fn mc_get_reads_always(op: &Op) -> bool {
    op.kind == OpKind::McGet && op.arg.is_empty() && matches!(op.arg2, [] | [0])
}

/// `McGet`'s Ok data for a read (`mc_get_reads`): the value, then the trailer.
#[inline(always)]
pub(crate) fn push_read(out: &mut Vec<u8>, value: &[u8], deadline: u64, meta: Meta) {
    crate::op::push_small(out, value);
    push_trailer(
        out,
        ItemMeta {
            flags: meta.flags,
            cas: meta.cas,
            deadline,
        },
    );
}

/// Checks a memcache operation's arguments (the length of `McStore`'s data is checked with the
/// other values' by `apply::validate_value`): run first by `apply_mc`, and by `atomic.rs` before
/// an all-or-nothing batch.
pub(crate) fn validate_args(op: &Op) -> Result<(), OpError> {
    let ok = match op.kind {
        OpKind::McGet => opt_u64(op.arg).is_some() && matches!(op.arg2, [] | [0] | [1]),
        OpKind::McStore => StoreArgs::decode(op.arg2).is_some(),
        OpKind::McDelete => opt_u64(op.arg).is_some(),
        OpKind::McArith => ArithArgs::decode(op.arg2).is_some(),
        OpKind::McTouch => op.arg.len() == 8,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(OpError::BadMcArgs)
    }
}

/// The memcache operations on the current value `cur` (None = missing) whose deadline and
/// meta are `*item` (which becomes what to store with the effect). Appends the reply data to
/// `out` unless the op is "no return". Arguments were checked by `validate_args`. Out of line,
/// so the other kinds' paths in `apply::apply` stay as they were compiled.
#[inline(never)]
pub(crate) fn apply_mc(
    op: &Op,
    cur: Option<&[u8]>,
    item: &mut Item,
    now: u64,
    cas: u64,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    let reply = !op.no_return;
    let bad = (Status::Error(OpError::BadMcArgs), Effect::Keep);
    if validate_args(op).is_err() {
        return bad;
    }
    match op.kind {
        OpKind::McGet => {
            let Some(v) = cur else {
                return (Status::NotFound, Effect::Keep);
            };
            let Some(touch) = opt_u64(op.arg) else {
                return bad;
            };
            let mut effect = Effect::Keep;
            if let Some(d) = touch {
                item.deadline = d;
                effect = Effect::Touch;
            }
            if op.arg2 == [1] && !item.meta.is_some() {
                item.meta = Meta {
                    flags: 0,
                    cas: take_cas(0, cas),
                };
                effect = Effect::Touch;
            }
            if reply {
                out.extend_from_slice(v);
                push_trailer(out, view(item));
            }
            // Read, then gone (memcached's gat with a negative exptime).
            if expired(item.deadline, now) {
                effect = Effect::Delete;
            }
            (Status::Ok, effect)
        }
        OpKind::McStore => {
            let Some(a) = StoreArgs::decode(op.arg2) else {
                return bad;
            };
            let appends = matches!(a.mode, StoreMode::Append | StoreMode::Prepend);
            let old = match cur {
                None if appends || a.mode == StoreMode::Replace => {
                    return (Status::NotStored, Effect::Keep)
                }
                None if a.compare_cas != 0 => return (Status::NotFound, Effect::Keep),
                None => None,
                Some(_) if a.mode == StoreMode::Add => return (Status::NotStored, Effect::Keep),
                Some(_) if a.compare_cas != 0 && a.compare_cas != item.meta.cas => {
                    return (Status::CasMismatch, Effect::Keep)
                }
                Some(v) => Some(v),
            };
            let cas = take_cas(a.new_cas, cas);
            if reply {
                out.extend_from_slice(&cas.to_le_bytes());
            }
            let effect = match (appends, old) {
                (true, Some(v)) => {
                    scratch.clear();
                    if a.mode == StoreMode::Append {
                        scratch.extend_from_slice(v);
                        scratch.extend_from_slice(op.arg);
                    } else {
                        scratch.extend_from_slice(op.arg);
                        scratch.extend_from_slice(v);
                    }
                    item.meta.cas = cas;
                    Effect::SetScratch
                }
                _ => {
                    if expired(a.deadline, now) {
                        // Stored and gone at once: memcached answers STORED.
                        let e = if old.is_some() {
                            Effect::Delete
                        } else {
                            Effect::Keep
                        };
                        return (Status::Ok, e);
                    }
                    item.deadline = a.deadline;
                    item.meta = Meta {
                        flags: a.flags,
                        cas,
                    };
                    Effect::SetArg
                }
            };
            (Status::Ok, effect)
        }
        OpKind::McDelete => {
            let Some(compare) = opt_u64(op.arg) else {
                return bad;
            };
            match (cur, compare) {
                (None, _) => (Status::NotFound, Effect::Keep),
                (Some(_), Some(c)) if c != item.meta.cas => (Status::CasMismatch, Effect::Keep),
                (Some(_), _) => (Status::Ok, Effect::Delete),
            }
        }
        OpKind::McArith => {
            let Some(a) = ArithArgs::decode(op.arg2) else {
                return bad;
            };
            let Some(v) = cur else {
                let Some((initial, deadline)) = a.create else {
                    return (Status::NotFound, Effect::Keep);
                };
                let cas = take_cas(a.new_cas, cas);
                if reply {
                    push_arith_reply(out, initial, cas, NO_DEADLINE, true);
                }
                if expired(deadline, now) {
                    return (Status::Ok, Effect::Keep);
                }
                scratch.clear();
                push_decimal(scratch, initial);
                *item = Item {
                    deadline,
                    meta: Meta { flags: 0, cas },
                };
                return (Status::Ok, Effect::SetScratch);
            };
            if a.compare_cas != 0 && a.compare_cas != item.meta.cas {
                return (Status::CasMismatch, Effect::Keep);
            }
            let Some(n) = parse_u64(v) else {
                return (Status::Error(OpError::NotAnInteger), Effect::Keep);
            };
            let n = if a.incr {
                n.wrapping_add(a.delta)
            } else {
                n.saturating_sub(a.delta)
            };
            scratch.clear();
            push_decimal(scratch, n);
            if scratch.len() < v.len() {
                scratch.resize(v.len(), b' ');
            }
            let cas = take_cas(a.new_cas, cas);
            item.meta.cas = cas;
            if reply {
                push_arith_reply(out, n, cas, item.deadline, false);
            }
            if let Some(d) = a.touch {
                item.deadline = d;
                if expired(d, now) {
                    return (Status::Ok, Effect::Delete);
                }
            }
            (Status::Ok, Effect::SetScratch)
        }
        OpKind::McTouch => {
            let Some(Some(d)) = opt_u64(op.arg) else {
                return bad;
            };
            if cur.is_none() {
                return (Status::NotFound, Effect::Keep);
            }
            if reply {
                out.extend_from_slice(&item.meta.cas.to_le_bytes());
            }
            item.deadline = d;
            if expired(d, now) {
                return (Status::Ok, Effect::Delete);
            }
            (Status::Ok, Effect::Touch)
        }
        k => unreachable!("{k:?} is not a memcache operation"),
    }
}

/// `McArith`'s Ok reply: the number, the CAS, the deadline the item had before (`NO_DEADLINE`
/// for a created one) and whether it was created.
fn push_arith_reply(out: &mut Vec<u8>, n: u64, cas: u64, before: u64, created: bool) {
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&cas.to_le_bytes());
    out.extend_from_slice(&before.to_le_bytes());
    out.extend_from_slice(&u64::from(created).to_le_bytes());
}

/// The memcache view of an item.
fn view(item: &Item) -> ItemMeta {
    ItemMeta {
        flags: item.meta.flags,
        cas: item.meta.cas,
        deadline: item.deadline,
    }
}

fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut n = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

/// C's `isspace` in the C locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// A value as memcached 1.6's `safe_strtoull` reads it (incr/decr): C's `strtoull` in base 10
/// (leading white space, an optional sign, digits; a minus negates modulo 2^64), out of range
/// or without digits is not a number, the digits must be followed by white space, a NUL or the
/// value's end (memcached's value is followed by "\r\n"), and a minus that gives a number of
/// 2^63 or more is refused.
pub fn parse_u64(v: &[u8]) -> Option<u64> {
    let mut i = v.iter().take_while(|&&b| is_space(b)).count();
    let neg = match v.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = v[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut n = 0u64;
    for &d in &v[i..i + digits] {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    let end = i + digits;
    if end < v.len() && !is_space(v[end]) && v[end] != 0 {
        return None;
    }
    let n = if neg { n.wrapping_neg() } else { n };
    if neg && (n as i64) < 0 {
        return None;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::parse_u64;

    /// The values tried on memcached 1.6.18 (`incr k 1` after `set k`): numbers and not.
    #[test]
    fn numbers_as_memcached_reads_them() {
        for (v, want) in [
            (&b"10"[..], Some(10)),
            (b" 12 ", Some(12)),
            (b"12  ", Some(12)),
            (b"+5", Some(5)),
            (b"-0", Some(0)),
            (b"00012", Some(12)),
            (b"12 34", Some(12)),
            (b"\t7\n", Some(7)),
            (b"7\r\n", Some(7)),
            (b"1\x002", Some(1)),
            (b"18446744073709551615", Some(u64::MAX)),
            (b"                    5", Some(5)),
            (b"0000000000000000000000000000000000000009", Some(9)),
            (b"-18446744073709551615", Some(1)),
            (b"12abc", None),
            (b"-5", None),
            (b"", None),
            (b" ", None),
            (b"0x", None),
            (b"abc", None),
            (b"18446744073709551616", None),
            (b"123456789012345678901", None),
        ] {
            assert_eq!(parse_u64(v), want, "{:?}", String::from_utf8_lossy(v));
        }
    }
}
