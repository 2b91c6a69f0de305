//! The answers to meta commands (mg, ms, md, ma, me), rendered from their operations'
//! results (`exec.rs` plans them): the status word, then the return flags in the order the
//! client asked for them, then the value block for `v`.
//!
//! ```text
//!   mg hit:  VA <len> <flags>*\r\n<value>\r\n  (v)   or   HD <flags>*   miss: EN k O (unless q)
//!   ms:      HD c k b O (q: nothing) | NS | EX | NF, with k b O and c0
//!   md:      HD (q: nothing) | NF | EX          ma: VA/HD with the number, NF, EX
//! ```

use directkv_engine::mc::{self, ItemMeta};
use directkv_engine::{Status, NO_DEADLINE};
use directkv_proto::memcache::{
    write_meta_end, write_meta_flag, write_meta_flag_number, write_meta_status,
    write_meta_value_header, write_number, MetaFlags, MetaKey, MetaStatus,
};

use super::exec::{deadline, engine_error, ttl_secs, u64_at};
use super::stats::{Tally, C};
use crate::shard::dispatch::Plan;

/// ms.
pub(super) fn set(
    key: MetaKey<'_>,
    flags: MetaFlags<'_>,
    result: (Status, &[u8]),
    now: u64,
    tally: &mut Tally,
    out: &mut Vec<u8>,
) {
    match result {
        (Status::Ok, data) => {
            tally.add(C::TotalItems, 1);
            if flags.quiet() {
                return;
            }
            write_meta_status(out, MetaStatus::Header);
            let meta = ItemMeta {
                cas: u64_at(data, 0),
                ..ItemMeta::default()
            };
            return_flags(out, key, flags, Some((&meta, 0)), now);
            write_meta_end(out, None);
        }
        (Status::Error(e), _) => engine_error(out, e, false, tally),
        (status, _) => {
            let s = match status {
                Status::NotStored => MetaStatus::NotStored,
                Status::CasMismatch => {
                    tally.add(C::CasBadval, 1);
                    MetaStatus::Exists
                }
                _ => MetaStatus::NotFound,
            };
            write_meta_status(out, s);
            return_flags_ms(out, key, flags, None, now, true, TtlChanges::default());
            write_meta_end(out, None);
        }
    }
}

/// md.
pub(super) fn delete(
    key: MetaKey<'_>,
    flags: MetaFlags<'_>,
    status: Status,
    now: u64,
    tally: &mut Tally,
    out: &mut Vec<u8>,
) {
    let s = match status {
        Status::Ok => {
            tally.add(C::DeleteHits, 1);
            if flags.quiet() {
                return;
            }
            MetaStatus::Header
        }
        Status::CasMismatch => MetaStatus::Exists,
        Status::Error(e) => return engine_error(out, e, false, tally),
        _ => {
            tally.add(C::DeleteMisses, 1);
            MetaStatus::NotFound
        }
    };
    write_meta_status(out, s);
    return_flags(out, key, flags, None, now);
    write_meta_end(out, None);
}

/// me: memcached's debug line, as far as directkv keeps what it shows.
pub(super) fn debug(key: MetaKey<'_>, result: (Status, &[u8]), now: u64, out: &mut Vec<u8>) {
    match result {
        (Status::Ok, data) => {
            let (value, meta) = mc::split_get(data).unwrap_or((&[], ItemMeta::default()));
            out.extend_from_slice(b"ME ");
            out.extend_from_slice(key.raw());
            let line = format!(
                " exp={} la=0 cas={} fetch=no cls=1 size={}\r\n",
                ttl_secs(meta.deadline, now),
                meta.cas,
                value.len()
            );
            out.extend_from_slice(line.as_bytes());
        }
        _ => out.extend_from_slice(b"EN\r\n"),
    }
}

/// The deadlines a meta reply's `t` flags show, as memcached shows them: each `t` the TTL as of
/// its place among the flags, which starts as the item's (`ItemMeta::deadline`) and changes
/// at a `T` (to `on_t`) and, for an item the command created, at an `N` (to `on_n`).
#[derive(Clone, Copy, Default)]
struct TtlChanges {
    on_t: Option<u64>,
    on_n: Option<u64>,
}

/// The return flags of a meta reply, in the order asked: `item` is the item's meta and its
/// value length when the reply is about an item (hit), None on a miss or a refusal (then only
/// `k`, `b` and `O` are echoed, as memcached does, and `c0` for a refused `ms`).
fn return_flags(
    out: &mut Vec<u8>,
    key: MetaKey<'_>,
    flags: MetaFlags<'_>,
    item: Option<(&ItemMeta, usize)>,
    now: u64,
) {
    return_flags_ms(out, key, flags, item, now, false, TtlChanges::default())
}

fn return_flags_ms(
    out: &mut Vec<u8>,
    key: MetaKey<'_>,
    flags: MetaFlags<'_>,
    item: Option<(&ItemMeta, usize)>,
    now: u64,
    refused_ms: bool,
    changes: TtlChanges,
) {
    let mut ttl_deadline = item.map_or(NO_DEADLINE, |(m, _)| m.deadline);
    for (letter, token) in flags.iter() {
        match (letter, item) {
            (b'T', Some(_)) => ttl_deadline = changes.on_t.unwrap_or(ttl_deadline),
            (b'N', Some(_)) => ttl_deadline = changes.on_n.unwrap_or(ttl_deadline),
            (b'c', None) if refused_ms => write_meta_flag_number(out, b'c', 0),
            (b'k', _) => {
                write_meta_flag(out, b'k', key.raw());
                if key.is_base64() {
                    write_meta_flag(out, b'b', b"");
                }
            }
            (b'O', _) => write_meta_flag(out, b'O', token),
            (b'c', Some((m, _))) => write_meta_flag_number(out, b'c', m.cas as i64),
            (b'f', Some((m, _))) => write_meta_flag_number(out, b'f', i64::from(m.flags)),
            (b's', Some((_, len))) => write_meta_flag_number(out, b's', len as i64),
            (b't', Some(_)) => write_meta_flag_number(out, b't', ttl_secs(ttl_deadline, now)),
            (b'h' | b'l', Some(_)) => write_meta_flag_number(out, letter, 0),
            _ => {}
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn get(
    key: MetaKey<'_>,
    flags: MetaFlags<'_>,
    plan: &Plan,
    (op, vivify, before): (usize, Option<usize>, Option<usize>),
    now: u64,
    tally: &mut Tally,
    out: &mut Vec<u8>,
) {
    let on_t = flags.ttl.map(|t| deadline(t, now));
    let (value, meta, won, changes) = match plan.result(op) {
        (Status::Ok, data) => {
            tally.add(C::GetHits, 1);
            let (value, mut meta) = mc::split_get(data).unwrap_or((&[], ItemMeta::default()));
            // The op's deadline is the one after a touch; a `t` before `T` shows the one
            // read ahead of it.
            let changes = TtlChanges {
                on_t: on_t.map(|_| meta.deadline),
                on_n: None,
            };
            if let Some((Status::Ok, d)) = before.map(|b| plan.result(b)) {
                meta.deadline = mc::split_get(d).map_or(meta.deadline, |(_, m)| m.deadline);
            }
            (value, meta, false, changes)
        }
        (Status::Error(e), _) => return engine_error(out, e, false, tally),
        _ => {
            tally.add(C::GetMisses, 1);
            match vivify.map(|v| plan.result(v)) {
                // The miss created an empty item: this client won the right to fill it.
                // memcached creates it without a TTL; `N` and `T` set theirs in flag order.
                Some((Status::Ok, data)) => {
                    let meta = ItemMeta {
                        flags: 0,
                        cas: u64_at(data, 0),
                        deadline: NO_DEADLINE,
                    };
                    let changes = TtlChanges {
                        on_t,
                        on_n: flags.vivify_ttl.map(|t| deadline(t, now)),
                    };
                    (&[][..], meta, true, changes)
                }
                _ => {
                    if !flags.quiet() {
                        write_meta_status(out, MetaStatus::Miss);
                        return_flags(out, key, flags, None, now);
                        write_meta_end(out, None);
                    }
                    return;
                }
            }
        }
    };
    let with_value = flags.has(b'v');
    if with_value {
        write_meta_value_header(out, value.len());
    } else {
        write_meta_status(out, MetaStatus::Header);
    }
    let item = Some((&meta, value.len()));
    return_flags_ms(out, key, flags, item, now, false, changes);
    if won {
        write_meta_flag(out, b'W', b"");
    }
    write_meta_end(out, with_value.then_some(value));
}

/// ma: `result` is the `McArith`'s (the number, the CAS, the deadline before, whether it
/// created the item).
pub(super) fn arith(
    key: MetaKey<'_>,
    flags: MetaFlags<'_>,
    result: (Status, &[u8]),
    now: u64,
    tally: &mut Tally,
    out: &mut Vec<u8>,
) {
    let incr = !matches!(flags.mode, Some(b'D' | b'-'));
    let (hit, miss) = if incr {
        (C::IncrHits, C::IncrMisses)
    } else {
        (C::DecrHits, C::DecrMisses)
    };
    match result {
        (Status::Ok, data) => {
            tally.add(hit, 1);
            let created = u64_at(data, 24) == 1;
            // memcached answers an item `N` created even when quiet.
            if flags.quiet() && !created {
                return;
            }
            let number = u64_at(data, 0);
            let meta = ItemMeta {
                flags: 0,
                cas: u64_at(data, 8),
                deadline: u64_at(data, 16),
            };
            let changes = TtlChanges {
                on_t: flags.ttl.map(|t| deadline(t, now)),
                on_n: flags
                    .vivify_ttl
                    .filter(|_| created)
                    .map(|t| deadline(t, now)),
            };
            let mut digits = Vec::new();
            write_number(&mut digits, number);
            digits.truncate(digits.len() - 2);
            let with_value = flags.has(b'v');
            if with_value {
                write_meta_value_header(out, digits.len());
            } else {
                write_meta_status(out, MetaStatus::Header);
            }
            let item = Some((&meta, digits.len()));
            return_flags_ms(out, key, flags, item, now, false, changes);
            write_meta_end(out, with_value.then_some(&digits[..]));
        }
        (Status::Error(e), _) => engine_error(out, e, false, tally),
        (status, _) => {
            let s = if status == Status::CasMismatch {
                MetaStatus::Exists
            } else {
                tally.add(miss, 1);
                MetaStatus::NotFound
            };
            write_meta_status(out, s);
            return_flags(out, key, flags, None, now);
            write_meta_end(out, None);
        }
    }
}
