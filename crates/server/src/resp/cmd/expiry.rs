//! Key expiry commands (issue 20 item 1): EXPIRE PEXPIRE EXPIREAT PEXPIREAT TTL PTTL
//! EXPIRETIME PEXPIRETIME PERSIST SETEX PSETEX GETEX, and the expiry options SET shares
//! ([`parse_options`], [`deadline_ms`]).
//!
//! ```text
//!  command ──> engine op            reply recipe
//!  EXPIRE*     Expire (deadline,    Flag         :1 set (a past deadline deletes), :0 not
//!              NX/XX/GT/LT bits)                 (condition failed, or no key)
//!  TTL ...     Ttl                  Deadline     -2 no key, -1 no deadline, time left or
//!                                                deadline in s (rounded) or ms
//!  PERSIST     Persist              Flag
//!  SETEX       PutExpire            Ok
//!  GETEX       GetEx                Bulk (or NullOrImmediate for a bad time: Redis looks
//!                                   the key up before it checks the time)
//! ```
//!
//! Deadlines are absolute milliseconds since the Unix epoch, computed here from the wall clock
//! for the relative forms (EX, PX, EXPIRE, PEXPIRE), as Redis does with its command time.
//! Option parsing and error texts follow Redis 7.0 (`parseExtendedStringArgumentsOrReply`,
//! `getExpireMillisecondsOrReply`, `expireGenericCommand`); the differential test compares the
//! replies byte for byte.

use directkv_engine::{cond, expire_args, Op, KEEP_DEADLINE, NO_DEADLINE};
use directkv_proto::resp::{self, Version};

use super::{arity, error, parse_int, Planned};
use crate::resp::reply::{Pending, Recipe};
use crate::shard::expiry::now_ms;

pub fn plan(p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) -> Option<Planned> {
    let n = a.len();
    Some(match name {
        b"expire" | b"pexpire" | b"expireat" | b"pexpireat" if n >= 3 => expire(p, v, name, a),
        b"ttl" | b"pttl" | b"expiretime" | b"pexpiretime" if n == 2 => {
            let op = p.op(&Op::ttl(a[1]));
            p.recipes.push(Recipe::Deadline {
                op,
                absolute: name.ends_with(b"expiretime"),
                ms: name[0] == b'p',
            });
            Planned::Queued
        }
        b"persist" if n == 2 => {
            let op = p.op(&Op::persist(a[1]));
            p.recipes.push(Recipe::Flag { op });
            Planned::Queued
        }
        b"setex" | b"psetex" if n == 4 => {
            let unit = if name == b"setex" { Unit::S } else { Unit::Ms };
            let cmd = if name == b"setex" { "setex" } else { "psetex" };
            match deadline_ms(a[2], unit, true, cmd) {
                Ok(d) => {
                    let args = expire_args(d, cond::ANY);
                    let op = p.op(&Op::put_expire(a[1], a[3], &args));
                    p.recipes.push(Recipe::Ok { op });
                    Planned::Queued
                }
                Err(e) => error(p, v, &e),
            }
        }
        b"getex" if n >= 2 => getex(p, v, a),
        b"expire" | b"pexpire" | b"expireat" | b"pexpireat" | b"ttl" | b"pttl" | b"expiretime"
        | b"pexpiretime" | b"persist" | b"setex" | b"psetex" | b"getex" => arity(p, v, name),
        _ => return None,
    })
}

/// EXPIRE key time [NX | XX | GT | LT] and its three siblings.
fn expire(p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) -> Planned {
    let mut c = cond::ANY;
    for opt in &a[3..] {
        c |= match opt.to_ascii_lowercase().as_slice() {
            b"nx" => cond::NX,
            b"xx" => cond::XX,
            b"gt" => cond::GT,
            b"lt" => cond::LT,
            _ => {
                // The option's own bytes, as Redis quotes them (`error_bytes` trims line
                // breaks at the end and turns the others into spaces, as Redis does).
                let mut text = b"ERR Unsupported option ".to_vec();
                text.extend_from_slice(opt);
                p.immediate(|o| directkv_proto::resp::RespWriter::new(o, v).error_bytes(&text));
                return Planned::Queued;
            }
        };
    }
    if c & cond::NX != 0 && c & (cond::XX | cond::GT | cond::LT) != 0 {
        return error(
            p,
            v,
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        );
    }
    if c & cond::GT != 0 && c & cond::LT != 0 {
        return error(
            p,
            v,
            "ERR GT and LT options at the same time are not compatible",
        );
    }
    let Some(when) = parse_int(a[2]) else {
        return error(p, v, resp::err_not_integer());
    };
    let cmd = String::from_utf8_lossy(name);
    let invalid = || format!("ERR invalid expire time in '{cmd}' command");
    // Redis's arithmetic: seconds to ms, then the base time, refusing only an overflow; a
    // deadline at or before now (negative ones too) deletes the key.
    let when = if name == b"expire" || name == b"expireat" {
        match when.checked_mul(1000) {
            Some(w) => w,
            None => return error(p, v, &invalid()),
        }
    } else {
        when
    };
    let base = if name == b"expire" || name == b"pexpire" {
        now_ms() as i64
    } else {
        0
    };
    let Some(when) = when.checked_add(base) else {
        return error(p, v, &invalid());
    };
    let args = expire_args(when.max(1) as u64, c);
    let op = p.op(&Op::expire(a[1], &args));
    p.recipes.push(Recipe::Flag { op });
    Planned::Queued
}

/// GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST].
fn getex(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let o = match parse_options(&a[2..], false) {
        Ok(o) => o,
        Err(()) => return error(p, v, resp::err_syntax()),
    };
    let arg: Vec<u8> = match o.expire {
        Some((time, unit, relative)) => match deadline_ms(time, unit, relative, "getex") {
            Ok(d) => d.to_le_bytes().to_vec(),
            Err(e) => {
                // Redis answers a missing key before it checks the time.
                let op = p.op(&Op::get(a[1]).no_return());
                p.null_or_error(op, v, &e);
                return Planned::Queued;
            }
        },
        None if o.persist => NO_DEADLINE.to_le_bytes().to_vec(),
        None => Vec::new(),
    };
    let op = p.op(&Op::get_ex(a[1], &arg));
    p.recipes.push(Recipe::Bulk { op });
    Planned::Queued
}

/// Unit of an expire time argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    S,
    Ms,
}

/// The options of SET (`set: true`) or GETEX, parsed as Redis 7 does: each option is accepted
/// only where it does not conflict with one already seen (a repeated EX is allowed, the last
/// wins); anything else is a syntax error.
#[derive(Debug, Default)]
pub(crate) struct Options<'a> {
    pub(crate) nx: bool,
    pub(crate) xx: bool,
    pub(crate) get: bool,
    pub(crate) keepttl: bool,
    pub(crate) persist: bool,
    /// The time argument, its unit, and whether it is relative (EX, PX) or absolute.
    pub(crate) expire: Option<(&'a [u8], Unit, bool)>,
}

pub(crate) fn parse_options<'a>(opts: &[&'a [u8]], set: bool) -> Result<Options<'a>, ()> {
    let mut o = Options::default();
    // Which of EX, PX, EXAT, PXAT was given (one kind only, repeated at will).
    let mut kind: Option<&'static str> = None;
    let mut j = 0;
    while j < opts.len() {
        let opt = opts[j].to_ascii_lowercase();
        let next = opts.get(j + 1).copied();
        let time_kind = match opt.as_slice() {
            b"ex" => Some(("ex", Unit::S, true)),
            b"px" => Some(("px", Unit::Ms, true)),
            b"exat" => Some(("exat", Unit::S, false)),
            b"pxat" => Some(("pxat", Unit::Ms, false)),
            _ => None,
        };
        match opt.as_slice() {
            b"nx" if set && !o.xx => o.nx = true,
            b"xx" if set && !o.nx => o.xx = true,
            b"get" if set => o.get = true,
            b"keepttl" if set && !o.persist && kind.is_none() => o.keepttl = true,
            b"persist" if !set && kind.is_none() && !o.keepttl => o.persist = true,
            _ => match (time_kind, next) {
                (Some((k, unit, relative)), Some(time))
                    if !o.keepttl && !o.persist && kind.is_none_or(|seen| seen == k) =>
                {
                    kind = Some(k);
                    o.expire = Some((time, unit, relative));
                    j += 1;
                }
                _ => return Err(()),
            },
        }
        j += 1;
    }
    Ok(o)
}

/// The absolute deadline of an expire time argument, as Redis's `getExpireMillisecondsOrReply`
/// checks it (`cmd` names the command in the error): an integer, positive, in range once
/// converted to ms and, when `relative`, added to now.
pub(crate) fn deadline_ms(
    time: &[u8],
    unit: Unit,
    relative: bool,
    cmd: &str,
) -> Result<u64, String> {
    let invalid = || format!("ERR invalid expire time in '{cmd}' command");
    let t = parse_int(time).ok_or_else(|| resp::err_not_integer().to_string())?;
    if t <= 0 {
        return Err(invalid());
    }
    let ms = match unit {
        Unit::S => t.checked_mul(1000).ok_or_else(invalid)?,
        Unit::Ms => t,
    };
    let at = if relative {
        ms.checked_add(now_ms() as i64).ok_or_else(invalid)?
    } else {
        ms
    };
    debug_assert!(at > 0 && at as u64 != KEEP_DEADLINE);
    Ok(at as u64)
}
