//! Key expiry (issue 20 item 1): what the deadline operations do to one key, and the lag
//! histogram of reclaimed keys.
//!
//! ```text
//!  time      ONE input: `Engine::set_now(ms)` before a batch (the server passes the wall
//!            clock, ms since the Unix epoch; tests pass what they like)
//!  deadline  absolute ms, kept with the key: in its record's header (`index/record.rs`),
//!            or after its value when it is inline (`index/bucket.rs`, whose slot code says
//!            so); the GET and PUT fast paths leave such keys to the general path
//!  lazy      every lookup of the pipeline (`Pipeline::lookup_live`) removes a key whose
//!            deadline is at or before `now` and reports it missing: no operation sees it
//!  active    `Engine::expire_step(cursor, buckets)` walks main buckets with their chains
//!            and removes the expired keys: a resumable cursor over the index, so one pass
//!            reclaims every key that was expired when the pass began
//! ```
//!
//! Semantics are Redis 7's: a plain put clears the deadline, KEEPTTL keeps it; append, incr
//! and the atomic and vector updates keep it; a cas keeps it too (it changes the value of a
//! key, like an update); a deadline set at or before `now` deletes the key. The engine stays
//! deterministic given its operations and `now`.

use crate::index::record::NO_DEADLINE;
use crate::op::{cond, parse_expire_args, Op, OpKind, Status, KEEP_DEADLINE};

pub(crate) use crate::apply::Effect;

/// Whether a deadline has passed at `now`.
#[inline(always)]
pub(crate) fn expired(deadline: u64, now: u64) -> bool {
    deadline != NO_DEADLINE && deadline <= now
}

/// The deadline operations (`PutExpire`, `Expire`, `Persist`, `Ttl`, `GetEx`) on the current
/// value `cur` whose deadline is `*dl` (`NO_DEADLINE` when `cur` is None); `*dl` becomes the
/// key's new deadline. Arguments were checked by `apply::validate_value`.
#[inline]
pub(crate) fn apply_expiry(
    op: &Op,
    cur: Option<&[u8]>,
    dl: &mut u64,
    now: u64,
    out: &mut Vec<u8>,
) -> (Status, Effect) {
    let reply = !op.no_return;
    match op.kind {
        OpKind::PutExpire => {
            let Some((d, c)) = parse_expire_args(op.arg2) else {
                return (Status::Error(crate::OpError::BadDeadline), Effect::Keep);
            };
            if (c & cond::NX != 0 && cur.is_some()) || (c & cond::XX != 0 && cur.is_none()) {
                return (Status::NotStored, Effect::Keep);
            }
            let new = match (d, cur) {
                (KEEP_DEADLINE, Some(_)) => *dl,
                (KEEP_DEADLINE, None) => NO_DEADLINE,
                (d, _) => d,
            };
            if expired(new, now) {
                return (Status::Ok, delete_if(cur.is_some()));
            }
            *dl = new;
            (Status::Ok, Effect::SetArg)
        }
        OpKind::Expire => {
            let Some(_) = cur else {
                return (Status::NotFound, Effect::Keep);
            };
            let Some((d, c)) = parse_expire_args(op.arg) else {
                return (Status::Error(crate::OpError::BadDeadline), Effect::Keep);
            };
            // Every condition bit set must hold; a key without a deadline counts as one
            // infinitely far away for GT and LT.
            let has = *dl != NO_DEADLINE;
            let holds = |bit: u8, ok: bool| c & bit == 0 || ok;
            let ok = holds(cond::NX, !has)
                && holds(cond::XX, has)
                && holds(cond::GT, has && d > *dl)
                && holds(cond::LT, !has || d < *dl);
            if !ok {
                return (Status::NotStored, Effect::Keep);
            }
            if expired(d, now) {
                return (Status::Ok, Effect::Delete);
            }
            *dl = d;
            (Status::Ok, Effect::Touch)
        }
        OpKind::Persist => match cur {
            None => (Status::NotFound, Effect::Keep),
            Some(_) if *dl == NO_DEADLINE => (Status::NotStored, Effect::Keep),
            Some(_) => {
                *dl = NO_DEADLINE;
                (Status::Ok, Effect::Touch)
            }
        },
        OpKind::Ttl => match cur {
            None => (Status::NotFound, Effect::Keep),
            Some(_) => {
                if reply {
                    let left = if *dl == NO_DEADLINE { 0 } else { *dl - now };
                    out.extend_from_slice(&dl.to_le_bytes());
                    out.extend_from_slice(&left.to_le_bytes());
                }
                (Status::Ok, Effect::Keep)
            }
        },
        OpKind::GetEx => {
            let Some(v) = cur else {
                return (Status::NotFound, Effect::Keep);
            };
            if reply {
                crate::op::push_small(out, v);
            }
            let Ok(d) = <[u8; 8]>::try_from(op.arg) else {
                return (Status::Ok, Effect::Keep);
            };
            let d = u64::from_le_bytes(d);
            if d == NO_DEADLINE && *dl == NO_DEADLINE {
                return (Status::Ok, Effect::Keep);
            }
            if expired(d, now) {
                return (Status::Ok, Effect::Delete);
            }
            *dl = d;
            (Status::Ok, Effect::Touch)
        }
        k => unreachable!("{k:?} is not a deadline operation"),
    }
}

fn delete_if(present: bool) -> Effect {
    if present {
        Effect::Delete
    } else {
        Effect::Keep
    }
}

/// Checks the deadline arguments of an operation before it enters the pipeline.
pub(crate) fn validate_args(op: &Op) -> Result<(), crate::OpError> {
    let ok = match op.kind {
        OpKind::PutExpire => parse_expire_args(op.arg2).is_some(),
        OpKind::Expire => parse_expire_args(op.arg).is_some(),
        OpKind::GetEx => op.arg.is_empty() || op.arg.len() == 8,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(crate::OpError::BadDeadline)
    }
}

/// Buckets of [`LagHistogram`]: bucket 0 holds lags of 0 ms, bucket b >= 1 lags in
/// [2^(b-1), 2^b) ms; the last one everything longer.
pub const LAG_BUCKETS: usize = 40;

/// How late expired keys were reclaimed (deadline to removal, in ms), lazily or by the sweep:
/// power-of-two buckets, so quantiles are upper bounds within a factor of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LagHistogram {
    pub counts: [u64; LAG_BUCKETS],
    pub max_ms: u64,
}

impl Default for LagHistogram {
    fn default() -> Self {
        LagHistogram {
            counts: [0; LAG_BUCKETS],
            max_ms: 0,
        }
    }
}

impl LagHistogram {
    pub fn record(&mut self, lag_ms: u64) {
        let b = (64 - lag_ms.leading_zeros() as usize).min(LAG_BUCKETS - 1);
        self.counts[b] += 1;
        self.max_ms = self.max_ms.max(lag_ms);
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Lags shorter than `ms`, a power of two (a cumulative bucket, as Prometheus has them).
    pub fn count_below_ms(&self, ms: u64) -> u64 {
        debug_assert!(ms.is_power_of_two());
        let k = (ms.trailing_zeros() as usize).min(LAG_BUCKETS - 1);
        self.counts[..=k].iter().sum()
    }

    /// Adds another histogram (several shards into one).
    pub fn merge(&mut self, o: &LagHistogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.max_ms = self.max_ms.max(o.max_ms);
    }

    /// Upper bound of the lag at quantile `q` (0..=1) in ms, capped at the maximum seen;
    /// 0 when nothing expired.
    pub fn quantile_ms(&self, q: f64) -> u64 {
        let n = self.total();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let upper = if b == 0 { 0 } else { (1u64 << b) - 1 };
                return upper.min(self.max_ms);
            }
        }
        self.max_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::expire_args;

    #[test]
    fn lag_quantiles_bound_the_lags() {
        let mut h = LagHistogram::default();
        assert_eq!(h.quantile_ms(0.5), 0);
        for lag in [0, 1, 3, 5, 100, 1000] {
            h.record(lag);
        }
        assert_eq!(h.total(), 6);
        assert_eq!(h.max_ms, 1000);
        assert!(h.quantile_ms(0.5) >= 3 && h.quantile_ms(0.5) < 8);
        assert_eq!(h.quantile_ms(1.0), 1000);
        assert_eq!(
            (
                h.count_below_ms(1),
                h.count_below_ms(2),
                h.count_below_ms(4)
            ),
            (1, 2, 3)
        );
        assert_eq!(h.count_below_ms(1024), 6);
        h.record(u64::MAX);
        assert_eq!(h.counts[LAG_BUCKETS - 1], 1);
    }

    #[test]
    fn expire_conditions_follow_redis() {
        let now = 1000;
        let run = |dl: u64, d: u64, c: u8| {
            let args = expire_args(d, c);
            let op = Op::expire(b"k", &args);
            let mut dl = dl;
            let (s, e) = apply_expiry(&op, Some(b"v"), &mut dl, now, &mut Vec::new());
            (s, e, dl)
        };
        // NX: only without a deadline; XX: only with one.
        assert_eq!(run(0, 5000, cond::NX), (Status::Ok, Effect::Touch, 5000));
        assert_eq!(run(3000, 5000, cond::NX).0, Status::NotStored);
        assert_eq!(run(0, 5000, cond::XX).0, Status::NotStored);
        // GT: a key without a deadline is infinitely far, so never later; LT always earlier.
        assert_eq!(run(0, 5000, cond::GT).0, Status::NotStored);
        assert_eq!(run(3000, 5000, cond::GT).0, Status::Ok);
        assert_eq!(run(3000, 2000, cond::GT).0, Status::NotStored);
        assert_eq!(run(0, 5000, cond::LT).0, Status::Ok);
        assert_eq!(run(3000, 5000, cond::LT).0, Status::NotStored);
        // A deadline at or before now deletes the key, once the condition holds.
        assert_eq!(run(0, 1000, cond::ANY), (Status::Ok, Effect::Delete, 0));
        assert_eq!(run(3000, 10, cond::GT).0, Status::NotStored);
        // XX with LT: a deadline, and an earlier one; equal deadlines pass neither GT nor LT.
        assert_eq!(run(0, 2000, cond::XX | cond::LT).0, Status::NotStored);
        assert_eq!(run(3000, 2000, cond::XX | cond::LT).0, Status::Ok);
        assert_eq!(run(3000, 3000, cond::GT).0, Status::NotStored);
        assert_eq!(run(3000, 3000, cond::LT).0, Status::NotStored);
    }
}
