//! The memcache items' reference model (issue 21 item 3): a `HashMap` of items with their value,
//! client flags, CAS unique and deadline, and the engine's CAS counter, with memcached 1.6's
//! rules written here without the engine's code. The other operation kinds go through
//! [`crate::model::apply`] for the value; what they do to an item's meta and deadline is added
//! here: one that changes or deletes the value drops the meta (a plain put also its deadline).
//!
//! Time is fixed (`now`): an item whose deadline is at or before it is never stored. Deadline
//! operations (PutExpire, Expire, Persist, Ttl, GetEx) are not modelled.

use std::collections::HashMap;

use directkv_engine::mc::{ArithArgs, StoreArgs, StoreMode};
use directkv_engine::{OpError, OpKind, Status, NO_DEADLINE};

use crate::model::{self, Eff, Limits, OwnedOp};

/// One item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub value: Vec<u8>,
    pub flags: u32,
    /// 0: no meta (written by a RESP or native operation).
    pub cas: u64,
    pub deadline: u64,
}

/// The items and the CAS counter, which every operation advances by one (the engine numbers
/// a batch's operations in request order, and a memcache write takes its operation's number).
#[derive(Debug, Clone)]
pub struct McModel {
    pub items: HashMap<Vec<u8>, Item>,
    pub cas_next: u64,
    /// The number of the operation being applied.
    op_cas: u64,
    pub now: u64,
    pub limits: Limits,
}

fn u64_at(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

fn gone(deadline: u64, now: u64) -> bool {
    deadline != NO_DEADLINE && deadline <= now
}

/// The number memcached's incr/decr reads from a value (C's strtoull, then memcached's checks).
fn number(v: &[u8]) -> Option<u64> {
    // Written as a scan of the text, independently of the engine's loop.
    let mut i = 0;
    while i < v.len() && b" \t\n\x0b\x0c\r".contains(&v[i]) {
        i += 1;
    }
    let negative = v.get(i) == Some(&b'-');
    if matches!(v.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let start = i;
    while i < v.len() && v[i].is_ascii_digit() {
        i += 1;
    }
    if i == start {
        return None;
    }
    if i < v.len() && !b" \t\n\x0b\x0c\r\0".contains(&v[i]) {
        return None;
    }
    let digits = std::str::from_utf8(&v[start..i]).expect("ascii digits");
    let n: u64 = digits.parse().ok()?;
    if negative {
        let n = 0u64.wrapping_sub(n);
        return (n < 1 << 63).then_some(n);
    }
    Some(n)
}

impl McModel {
    pub fn new(limits: Limits, now: u64) -> McModel {
        McModel {
            items: HashMap::new(),
            cas_next: 1,
            op_cas: 0,
            now,
            limits,
        }
    }

    fn take(&mut self, given: u64) -> u64 {
        if given != 0 {
            given
        } else {
            self.op_cas
        }
    }

    /// Applies `op`: its status and reply data (none for an error).
    pub fn apply(&mut self, op: &OwnedOp) -> (Status, Vec<u8>) {
        self.op_cas = self.cas_next;
        self.cas_next += 1;
        // The engine stores the empty key (Redis allows it); memcached's protocol cannot send
        // one, so the server never asks.
        if op.key.len() > self.limits.key_len_max {
            let e = OpError::KeyTooLong {
                len: op.key.len(),
                max: self.limits.key_len_max,
            };
            return (Status::Error(e), vec![]);
        }
        let r = match op.kind {
            OpKind::McGet
            | OpKind::McStore
            | OpKind::McDelete
            | OpKind::McArith
            | OpKind::McTouch => self.mc(op),
            _ => self.other(op),
        };
        match r {
            Ok((s, mut d)) => {
                if op.no_return {
                    d.clear();
                }
                (s, d)
            }
            Err(e) => (Status::Error(e), vec![]),
        }
    }

    fn other(&mut self, op: &OwnedOp) -> Result<(Status, Vec<u8>), OpError> {
        let old = self.items.get(&op.key).cloned();
        let out = model::apply(old.as_ref().map(|i| &i.value[..]), op, self.limits);
        if let Status::Error(e) = out.status {
            return Err(e);
        }
        match out.eff {
            Eff::Keep => {}
            Eff::Delete => {
                self.items.remove(&op.key);
            }
            Eff::Set(value) => {
                let plain_put = matches!(op.kind, OpKind::Put | OpKind::PutNx | OpKind::PutXx);
                let deadline = match &old {
                    Some(i) if !plain_put => i.deadline,
                    _ => NO_DEADLINE,
                };
                self.items.insert(
                    op.key.clone(),
                    Item {
                        value,
                        flags: 0,
                        cas: 0,
                        deadline,
                    },
                );
            }
        }
        Ok((out.status, out.reply))
    }

    fn mc(&mut self, op: &OwnedOp) -> Result<(Status, Vec<u8>), OpError> {
        let now = self.now;
        let key = op.key.clone();
        let old = self.items.get(&key).cloned();
        match op.kind {
            OpKind::McGet => {
                let Some(mut it) = old else {
                    return Ok((Status::NotFound, vec![]));
                };
                if op.arg.len() == 8 {
                    it.deadline = u64_at(&op.arg);
                }
                if op.arg2 == [1] && it.cas == 0 {
                    it.cas = self.take(0);
                }
                let mut reply = it.value.clone();
                reply.extend_from_slice(&it.flags.to_le_bytes());
                reply.extend_from_slice(&it.cas.to_le_bytes());
                reply.extend_from_slice(&it.deadline.to_le_bytes());
                if gone(it.deadline, now) {
                    self.items.remove(&key);
                } else {
                    self.items.insert(key, it);
                }
                Ok((Status::Ok, reply))
            }
            OpKind::McStore => {
                if op.arg.len() > self.limits.value_len_max {
                    return Err(OpError::ValueTooLarge {
                        len: op.arg.len(),
                        max: self.limits.value_len_max,
                    });
                }
                let a = StoreArgs::decode(&op.arg2).ok_or(OpError::BadMcArgs)?;
                let concat = matches!(a.mode, StoreMode::Append | StoreMode::Prepend);
                match &old {
                    None if concat || a.mode == StoreMode::Replace => {
                        return Ok((Status::NotStored, vec![]))
                    }
                    None if a.compare_cas != 0 => return Ok((Status::NotFound, vec![])),
                    Some(_) if a.mode == StoreMode::Add => return Ok((Status::NotStored, vec![])),
                    Some(i) if a.compare_cas != 0 && i.cas != a.compare_cas => {
                        return Ok((Status::CasMismatch, vec![]))
                    }
                    _ => {}
                }
                if let (true, Some(i)) = (concat, &old) {
                    let value = if a.mode == StoreMode::Append {
                        [&i.value[..], &op.arg[..]].concat()
                    } else {
                        [&op.arg[..], &i.value[..]].concat()
                    };
                    if value.len() > self.limits.value_len_max {
                        return Err(OpError::ValueTooLarge {
                            len: value.len(),
                            max: self.limits.value_len_max,
                        });
                    }
                    let cas = self.take(a.new_cas);
                    let it = Item {
                        value,
                        cas,
                        ..i.clone()
                    };
                    self.items.insert(key, it);
                    return Ok((Status::Ok, cas.to_le_bytes().to_vec()));
                }
                let cas = self.take(a.new_cas);
                if gone(a.deadline, now) {
                    self.items.remove(&key);
                } else {
                    let it = Item {
                        value: op.arg.clone(),
                        flags: a.flags,
                        cas,
                        deadline: a.deadline,
                    };
                    self.items.insert(key, it);
                }
                Ok((Status::Ok, cas.to_le_bytes().to_vec()))
            }
            OpKind::McDelete => match old {
                None => Ok((Status::NotFound, vec![])),
                Some(i) if op.arg.len() == 8 && u64_at(&op.arg) != i.cas => {
                    Ok((Status::CasMismatch, vec![]))
                }
                Some(_) => {
                    self.items.remove(&key);
                    Ok((Status::Ok, vec![]))
                }
            },
            OpKind::McArith => {
                let a = ArithArgs::decode(&op.arg2).ok_or(OpError::BadMcArgs)?;
                let Some(i) = old else {
                    let Some((initial, deadline)) = a.create else {
                        return Ok((Status::NotFound, vec![]));
                    };
                    let cas = self.take(a.new_cas);
                    if !gone(deadline, now) {
                        let it = Item {
                            value: initial.to_string().into_bytes(),
                            flags: 0,
                            cas,
                            deadline,
                        };
                        self.items.insert(key, it);
                    }
                    let mut reply = initial.to_le_bytes().to_vec();
                    reply.extend_from_slice(&cas.to_le_bytes());
                    reply.extend_from_slice(&NO_DEADLINE.to_le_bytes());
                    reply.extend_from_slice(&1u64.to_le_bytes());
                    return Ok((Status::Ok, reply));
                };
                if a.compare_cas != 0 && a.compare_cas != i.cas {
                    return Ok((Status::CasMismatch, vec![]));
                }
                let n = number(&i.value).ok_or(OpError::NotAnInteger)?;
                let n = match (a.incr, n.checked_sub(a.delta)) {
                    (true, _) => n.wrapping_add(a.delta),
                    (false, Some(d)) => d,
                    (false, None) => 0,
                };
                let mut text = n.to_string();
                while text.len() < i.value.len() {
                    text.push(' ');
                }
                let cas = self.take(a.new_cas);
                let before = i.deadline;
                let it = Item {
                    value: text.into_bytes(),
                    cas,
                    deadline: a.touch.unwrap_or(i.deadline),
                    ..i
                };
                if gone(it.deadline, now) {
                    self.items.remove(&key);
                } else {
                    self.items.insert(key, it);
                }
                let mut reply = n.to_le_bytes().to_vec();
                reply.extend_from_slice(&cas.to_le_bytes());
                reply.extend_from_slice(&before.to_le_bytes());
                reply.extend_from_slice(&0u64.to_le_bytes());
                Ok((Status::Ok, reply))
            }
            OpKind::McTouch => {
                let Some(mut i) = old else {
                    return Ok((Status::NotFound, vec![]));
                };
                let reply = i.cas.to_le_bytes().to_vec();
                i.deadline = u64_at(&op.arg);
                if gone(i.deadline, now) {
                    self.items.remove(&key);
                } else {
                    self.items.insert(key, i);
                }
                Ok((Status::Ok, reply))
            }
            k => unreachable!("{k:?}"),
        }
    }
}
