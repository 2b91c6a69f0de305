//! The memcache operations' arguments and results (issue 21 item 3): typed encoders and
//! decoders for `OpKind::McGet`, `McStore`, `McDelete`, `McArith` and `McTouch`.
//!
//! ```text
//!  McGet     arg  = [] | [deadline u64]        (gat/gats/mg T: the new deadline)
//!            arg2 = [] | [want_cas u8]         (1: give a meta-less entry meta now)
//!            Ok: value ++ [flags u32][cas u64][deadline u64]   (`split_get`)
//!  McStore   arg  = the data, arg2 = StoreArgs::encode()  (29 bytes)
//!            Ok: [cas u64]; NotStored; CasMismatch; NotFound (compare_cas on a missing key)
//!  McDelete  arg  = [] | [compare_cas u64]     Ok; NotFound; CasMismatch
//!  McArith   arg2 = ArithArgs::encode()  (51 bytes)
//!            Ok: [value u64][cas u64][deadline before u64][created u64: 0|1]
//!            NotFound; CasMismatch; Error(NotAnInteger)
//!  McTouch   arg  = [deadline u64]             Ok: [cas u64]; NotFound
//! ```
//!
//! All integers little-endian; deadlines are absolute milliseconds since the Unix epoch as
//! everywhere in the engine (`NO_DEADLINE` = none); a CAS of 0 means "none" (an entry
//! without item meta has no CAS, so no CAS a client holds matches it).
//!
//! Item meta: the 32-bit client flags and the 64-bit CAS unique memcached keeps per item.
//! Entries written by the other op kinds carry none; a write by one of them that changes the
//! value drops it (so the CAS a client holds stops matching: "every modification changes the
//! CAS unique"). How it is stored: `index/record.rs`.

/// Bytes of the trailer `McGet` appends after the value: flags, cas, deadline.
pub const GET_TRAILER_BYTES: usize = 4 + 8 + 8;
/// Bytes of [`StoreArgs::encode`].
pub const STORE_ARGS_BYTES: usize = 1 + 4 + 8 + 8 + 8;
/// Bytes of [`ArithArgs::encode`].
pub const ARITH_ARGS_BYTES: usize = 1 + 8 + 8 + 8 + 1 + 8 + 8 + 1 + 8;

/// An item's memcache view: its client flags, CAS unique (0 = none) and deadline
/// (`NO_DEADLINE` = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ItemMeta {
    pub flags: u32,
    pub cas: u64,
    pub deadline: u64,
}

/// Splits `McGet`'s Ok data into the value and its meta; None if `data` is shorter than the
/// trailer.
#[inline]
pub fn split_get(data: &[u8]) -> Option<(&[u8], ItemMeta)> {
    let at = data.len().checked_sub(GET_TRAILER_BYTES)?;
    let (value, t) = data.split_at(at);
    Some((
        value,
        ItemMeta {
            flags: u32::from_le_bytes(t[0..4].try_into().ok()?),
            cas: u64::from_le_bytes(t[4..12].try_into().ok()?),
            deadline: u64::from_le_bytes(t[12..20].try_into().ok()?),
        },
    ))
}

/// Appends `McGet`'s trailer for `meta` to `out`.
#[inline(always)]
pub(crate) fn push_trailer(out: &mut Vec<u8>, meta: ItemMeta) {
    // One copy of a fixed-size array: three appends cost three capacity checks.
    let mut t = [0u8; GET_TRAILER_BYTES];
    t[0..4].copy_from_slice(&meta.flags.to_le_bytes());
    t[4..12].copy_from_slice(&meta.cas.to_le_bytes());
    t[12..20].copy_from_slice(&meta.deadline.to_le_bytes());
    out.extend_from_slice(&t);
}

/// `McGet`'s `arg`: touch the deadline to `deadline` (`NO_DEADLINE` removes it).
pub fn touch_arg(deadline: u64) -> [u8; 8] {
    deadline.to_le_bytes()
}

/// `McGet`'s `arg2`.
pub const WANT_CAS: [u8; 1] = [1];

/// How `McStore` stores (memcached's set, add, replace, append, prepend; cas is `Set` with
/// a `compare_cas`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StoreMode {
    Set = 0,
    /// Only if the key is missing.
    Add = 1,
    /// Only if the key exists.
    Replace = 2,
    /// Only if the key exists: the data goes after its value (flags and deadline kept).
    Append = 3,
    /// Only if the key exists: the data goes before its value (flags and deadline kept).
    Prepend = 4,
}

impl StoreMode {
    pub fn from_code(c: u8) -> Option<StoreMode> {
        Some(match c {
            0 => StoreMode::Set,
            1 => StoreMode::Add,
            2 => StoreMode::Replace,
            3 => StoreMode::Append,
            4 => StoreMode::Prepend,
            _ => return None,
        })
    }
}

/// `McStore`'s `arg2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreArgs {
    pub mode: StoreMode,
    pub flags: u32,
    /// `NO_DEADLINE`: none; at or before `now`: the item is stored expired (gone at once).
    pub deadline: u64,
    /// 0: none; else the entry's CAS must equal it.
    pub compare_cas: u64,
    /// 0: take the engine's next CAS; else this one (meta `ms` E flag).
    pub new_cas: u64,
}

impl StoreArgs {
    /// A plain `set` with these flags and deadline.
    pub fn set(flags: u32, deadline: u64) -> StoreArgs {
        StoreArgs {
            mode: StoreMode::Set,
            flags,
            deadline,
            compare_cas: 0,
            new_cas: 0,
        }
    }

    pub fn encode(&self) -> [u8; STORE_ARGS_BYTES] {
        let mut a = [0u8; STORE_ARGS_BYTES];
        a[0] = self.mode as u8;
        a[1..5].copy_from_slice(&self.flags.to_le_bytes());
        a[5..13].copy_from_slice(&self.deadline.to_le_bytes());
        a[13..21].copy_from_slice(&self.compare_cas.to_le_bytes());
        a[21..29].copy_from_slice(&self.new_cas.to_le_bytes());
        a
    }

    /// None if `a` is not `STORE_ARGS_BYTES` long or the mode is unknown.
    pub fn decode(a: &[u8]) -> Option<StoreArgs> {
        if a.len() != STORE_ARGS_BYTES {
            return None;
        }
        Some(StoreArgs {
            mode: StoreMode::from_code(a[0])?,
            flags: u32::from_le_bytes(a[1..5].try_into().ok()?),
            deadline: u64::from_le_bytes(a[5..13].try_into().ok()?),
            compare_cas: u64::from_le_bytes(a[13..21].try_into().ok()?),
            new_cas: u64::from_le_bytes(a[21..29].try_into().ok()?),
        })
    }
}

/// `McArith`'s `arg2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArithArgs {
    /// incr (true) or decr.
    pub incr: bool,
    pub delta: u64,
    /// 0: none; else the entry's CAS must equal it.
    pub compare_cas: u64,
    /// 0: take the engine's next CAS; else this one.
    pub new_cas: u64,
    /// Create a missing key with (initial value, deadline) (meta `ma` N/J), flags 0.
    pub create: Option<(u64, u64)>,
    /// Give an existing item this deadline when the arithmetic succeeds (meta `ma` T); a
    /// created item takes `create`'s deadline.
    pub touch: Option<u64>,
}

impl ArithArgs {
    /// A plain `incr` (or `decr`) by `delta`.
    pub fn new(incr: bool, delta: u64) -> ArithArgs {
        ArithArgs {
            incr,
            delta,
            compare_cas: 0,
            new_cas: 0,
            create: None,
            touch: None,
        }
    }

    pub fn encode(&self) -> [u8; ARITH_ARGS_BYTES] {
        let mut a = [0u8; ARITH_ARGS_BYTES];
        a[0] = self.incr as u8;
        a[1..9].copy_from_slice(&self.delta.to_le_bytes());
        a[9..17].copy_from_slice(&self.compare_cas.to_le_bytes());
        a[17..25].copy_from_slice(&self.new_cas.to_le_bytes());
        if let Some((initial, deadline)) = self.create {
            a[25] = 1;
            a[26..34].copy_from_slice(&initial.to_le_bytes());
            a[34..42].copy_from_slice(&deadline.to_le_bytes());
        }
        if let Some(deadline) = self.touch {
            a[42] = 1;
            a[43..51].copy_from_slice(&deadline.to_le_bytes());
        }
        a
    }

    /// None if `a` is not `ARITH_ARGS_BYTES` long or a flag byte is not 0 or 1.
    pub fn decode(a: &[u8]) -> Option<ArithArgs> {
        if a.len() != ARITH_ARGS_BYTES || a[0] > 1 || a[25] > 1 || a[42] > 1 {
            return None;
        }
        let u = |r: std::ops::Range<usize>| u64::from_le_bytes(a[r].try_into().expect("8 bytes"));
        Some(ArithArgs {
            incr: a[0] == 1,
            delta: u(1..9),
            compare_cas: u(9..17),
            new_cas: u(17..25),
            create: (a[25] == 1).then(|| (u(26..34), u(34..42))),
            touch: (a[42] == 1).then(|| u(43..51)),
        })
    }
}

/// A `McDelete` / `McTouch` argument of one u64 (compare_cas, deadline).
pub fn u64_arg(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Decodes an optional 8-byte argument: empty = None; Some(None) if malformed.
pub(crate) fn opt_u64(a: &[u8]) -> Option<Option<u64>> {
    match a.len() {
        0 => Some(None),
        8 => Some(Some(u64::from_le_bytes(a.try_into().ok()?))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_roundtrip() {
        let s = StoreArgs {
            mode: StoreMode::Prepend,
            flags: 0xDEAD_BEEF,
            deadline: 1_800_000_000_000,
            compare_cas: 7,
            new_cas: u64::MAX,
        };
        assert_eq!(StoreArgs::decode(&s.encode()), Some(s));
        let mut bad = s.encode();
        bad[0] = 5;
        assert_eq!(StoreArgs::decode(&bad), None);
        assert_eq!(StoreArgs::decode(&bad[..28]), None);
        for (create, touch) in [
            (None, None),
            (Some((0, 0)), Some(1)),
            (Some((u64::MAX, 5)), None),
        ] {
            let a = ArithArgs {
                incr: false,
                delta: 3,
                compare_cas: 9,
                new_cas: 0,
                create,
                touch,
            };
            assert_eq!(ArithArgs::decode(&a.encode()), Some(a));
        }
        let mut v = b"abc".to_vec();
        push_trailer(
            &mut v,
            ItemMeta {
                flags: 5,
                cas: 6,
                deadline: 7,
            },
        );
        let (value, m) = split_get(&v).unwrap();
        assert_eq!((value, m.flags, m.cas, m.deadline), (&b"abc"[..], 5, 6, 7));
        assert!(split_get(&v[..19]).is_none());
    }
}
