//! String and counter commands: GET SET GETSET GETDEL DEL EXISTS MGET MSET INCR INCRBY DECR
//! DECRBY INCRBYFLOAT STRLEN APPEND.
//!
//! MSET, and a DEL or an MGET whose keys are on several shards, are atomic plans
//! (`shard/atomic.rs`): cut from the batch of commands around them, MSET stores all its keys or
//! none (every argument checked against the limits first, then memory on every shard), and no
//! MGET sees an MSET or a DEL half applied.

use directkv_engine::{Op, OpError};
use directkv_proto::resp::{self, RespWriter, Version};

use super::{arity, error, expiry, op_error_text, parse_int, Planned};
use crate::config::ServerConfig;
use crate::resp::reply::{Pending, Recipe};
use crate::shard::dispatch::shard_of;
use crate::shard::{atomic, ShardCtx};

pub fn plan(p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) -> Option<Planned> {
    let n = a.len();
    Some(match name {
        b"get" if n == 2 => {
            let op = p.op(&Op::get(a[1]));
            p.recipes.push(Recipe::Bulk { op });
            Planned::Queued
        }
        b"set" if n >= 3 => set(p, v, a),
        b"getset" if n == 3 => {
            let op = p.op(&Op::get(a[1]));
            p.op(&Op::put(a[1], a[2]));
            p.recipes.push(Recipe::Bulk { op });
            Planned::Queued
        }
        b"setnx" if n == 3 => {
            // SET key value NX with Redis's older reply: :1 stored, :0 the key exists.
            let op = p.op(&Op::put_nx(a[1], a[2]));
            p.recipes.push(Recipe::Flag { op });
            Planned::Queued
        }
        b"getdel" if n == 2 => {
            let op = p.op(&Op::get(a[1]));
            p.op(&Op::delete(a[1]));
            p.recipes.push(Recipe::Bulk { op });
            Planned::Queued
        }
        b"del" | b"unlink" if n >= 3 && on_several_shards(p, &a[1..]) => Planned::Atomic,
        b"del" | b"unlink" if n >= 2 => {
            plan_del(p, &a[1..]);
            Planned::Queued
        }
        b"exists" if n >= 2 => {
            let first = p.next_op();
            for k in &a[1..] {
                p.op(&Op::get(k).no_return());
            }
            p.recipes.push(Recipe::CountFound { first, n: n - 1 });
            Planned::Queued
        }
        b"mget" if n >= 3 && on_several_shards(p, &a[1..]) => Planned::Atomic,
        b"mget" if n >= 2 => {
            plan_mget(p, &a[1..]);
            Planned::Queued
        }
        b"mset" if n >= 3 && n % 2 == 1 => Planned::Atomic,
        b"incr" | b"decr" if n == 2 => incr(p, a[1], if name == b"incr" { 1 } else { -1 }),
        b"incrby" | b"decrby" if n == 3 => match parse_int(a[2]) {
            Some(d) if name == b"incrby" => incr(p, a[1], d),
            Some(d) => match d.checked_neg() {
                Some(d) => incr(p, a[1], d),
                None => error(p, v, resp::err_decrement_overflow()),
            },
            None => error(p, v, resp::err_not_integer()),
        },
        b"incrbyfloat" if n == 3 => {
            // The engine's parser: an infinite increment passes, and the sum then fails.
            match directkv_engine::strings::parse_f64(a[2]) {
                Some(d) => {
                    let op = p.op(&Op::incr_by_float(a[1], &d.to_le_bytes()));
                    p.recipes.push(Recipe::Data { op });
                    Planned::Queued
                }
                None => error(p, v, resp::err_not_float()),
            }
        }
        b"strlen" if n == 2 => {
            let op = p.op(&Op::get(a[1]));
            p.recipes.push(Recipe::Len { op });
            Planned::Queued
        }
        b"append" if n == 3 => {
            let op = p.op(&Op::append(a[1], a[2]));
            p.recipes.push(Recipe::U64 { op });
            Planned::Queued
        }
        b"get" | b"set" | b"setnx" | b"getset" | b"getdel" | b"del" | b"unlink" | b"exists"
        | b"mget" | b"mset" | b"incr" | b"decr" | b"incrby" | b"decrby" | b"incrbyfloat"
        | b"strlen" | b"append" => arity(p, v, name),
        _ => return None,
    })
}

fn incr(p: &mut Pending, key: &[u8], delta: i64) -> Planned {
    let op = p.op(&Op::incr_by(key, &delta.to_le_bytes()));
    p.recipes.push(Recipe::DecimalInt { op });
    Planned::Queued
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL], options parsed
/// as Redis 7 does (`expiry::parse_options`).
fn set(p: &mut Pending, v: Version, a: &[&[u8]]) -> Planned {
    let Ok(o) = expiry::parse_options(&a[3..], true) else {
        return error(p, v, resp::err_syntax());
    };
    let (nx, xx, get) = (o.nx, o.xx, o.get);
    let deadline = match o.expire {
        Some((time, unit, relative)) => match expiry::deadline_ms(time, unit, relative, "set") {
            Ok(d) => Some(d),
            Err(e) => return error(p, v, &e),
        },
        None if o.keepttl => Some(directkv_engine::KEEP_DEADLINE),
        None => None,
    };
    let c = if nx {
        directkv_engine::cond::NX
    } else if xx {
        directkv_engine::cond::XX
    } else {
        directkv_engine::cond::ANY
    };
    let args = deadline.map(|d| directkv_engine::expire_args(d, c));
    let put = if let Some(args) = &args {
        Op::put_expire(a[1], a[2], args)
    } else if nx {
        Op::put_nx(a[1], a[2])
    } else if xx {
        Op::put_xx(a[1], a[2])
    } else {
        Op::put(a[1], a[2])
    };
    if get {
        let op = p.op(&Op::get(a[1]));
        p.op(&put);
        p.recipes.push(Recipe::Bulk { op });
    } else {
        let op = p.op(&put);
        p.recipes.push(if nx || xx {
            Recipe::OkOrNull { op }
        } else {
            Recipe::Ok { op }
        });
    }
    Planned::Queued
}

/// Whether `keys` belong to more than one shard.
fn on_several_shards(p: &Pending, keys: &[&[u8]]) -> bool {
    let shards = p.plan.batches.len();
    if shards == 1 {
        return false;
    }
    let first = shard_of(keys[0], shards);
    keys[1..].iter().any(|k| shard_of(k, shards) != first)
}

/// Runs MSET, or a DEL or MGET over several shards (`plan` answered `Planned::Atomic`), into
/// the empty `p`.
pub(crate) async fn atomic(ctx: &ShardCtx, p: &mut Pending, v: Version, name: &[u8], a: &[&[u8]]) {
    match name {
        b"mset" => mset(ctx, p, v, a).await,
        b"del" | b"unlink" => del(ctx, p, a).await,
        b"mget" => {
            plan_mget(p, &a[1..]);
            atomic::read(ctx, &mut p.plan).await;
        }
        _ => unreachable!("{} is not an atomic command", String::from_utf8_lossy(name)),
    }
}

/// Plans MGET's reads and its reply (also inside a transaction: `resp/multi.rs`).
pub(crate) fn plan_mget(p: &mut Pending, keys: &[&[u8]]) {
    let first = p.next_op();
    for k in keys {
        p.op(&Op::get(k));
    }
    p.recipes.push(Recipe::Values {
        first,
        n: keys.len(),
    });
}

/// Plans DEL's (or UNLINK's) deletes and its reply (also inside a transaction).
pub(crate) fn plan_del(p: &mut Pending, keys: &[&[u8]]) {
    let first = p.next_op();
    for k in keys {
        p.op(&Op::delete(k));
    }
    p.recipes.push(Recipe::CountFound {
        first,
        n: keys.len(),
    });
}

/// Plans MSET's puts and its reply, after checking every pair against the limits (also
/// inside a transaction); `Err`: the first limit broken, with nothing planned.
pub(crate) fn plan_mset(p: &mut Pending, cfg: &ServerConfig, a: &[&[u8]]) -> Result<(), OpError> {
    let pairs = a[1..].chunks_exact(2);
    if let Some(e) = pairs.clone().find_map(|kv| limit_error(cfg, kv[0], kv[1])) {
        return Err(e);
    }
    let first = p.next_op();
    for kv in pairs {
        p.op(&Op::put(kv[0], kv[1]));
    }
    p.recipes.push(Recipe::AllOk {
        first,
        n: (a.len() - 1) / 2,
    });
    Ok(())
}

/// DEL key [key ...] over several shards: every key deleted at once. A key over the limits
/// cannot be stored, so it counts as missing, as in a DEL run as one batch.
async fn del(ctx: &ShardCtx, p: &mut Pending, a: &[&[u8]]) {
    let first = p.next_op();
    for k in &a[1..] {
        if limit_error(&ctx.cfg, k, &[]).is_none() {
            p.op(&Op::delete(k));
        }
    }
    let n = p.next_op() - first;
    // Deletes allocate nothing and their keys passed the limits: the plan cannot be refused
    // but for a shard that is gone, whose keys then count as not found, as in any batch.
    let _ = atomic::execute(ctx, &mut p.plan).await;
    p.recipes.push(Recipe::CountFound { first, n });
}

/// MSET key value [key value ...]: every pair checked against the limits before any is
/// planned, then all stored or none (`shard/atomic.rs`).
async fn mset(ctx: &ShardCtx, p: &mut Pending, v: Version, a: &[&[u8]]) {
    if let Err(e) = plan_mset(p, &ctx.cfg, a) {
        ctx.stats
            .atomic_refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        refuse(p, v, &e);
        return;
    }
    if let Err(e) = atomic::execute(ctx, &mut p.plan).await {
        // The reply is the refusal alone: the planned `AllOk` gives way to it.
        p.recipes.pop();
        refuse(p, v, &e);
    }
}

fn refuse(p: &mut Pending, v: Version, e: &OpError) {
    let text = op_error_text(e);
    p.immediate(|o| RespWriter::new(o, v).error(&text));
}

/// The error a SET of `key` and `value` would get for a limit (the engine's own check, made
/// before anything is planned). The empty key is a key, as in Redis.
pub(crate) fn limit_error(cfg: &ServerConfig, key: &[u8], value: &[u8]) -> Option<OpError> {
    if key.len() > cfg.key_len_max {
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
