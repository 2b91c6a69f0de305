//! One burst of OCSM datagrams (one for the plain path) planned into the shards' batches,
//! executed, and answered: the code every OCSM path shares, so they answer byte-for-byte the
//! same.
//!
//! ```text
//!  datagrams ──plan_all──> dispatch::Plan (one batch per shard for the whole burst)
//!            ──execute (the caller's way)──> results ──encode_all──> one reply per datagram
//! ```

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use directkv_engine::{Op, Status as EngineStatus};
use directkv_proto::ocsm::{
    decode_message, decode_request, encode_error, encode_header, ErrorCode, Header, OcsmLimits,
    Opcode, Status, HEADER_BYTES,
};
use directkv_sys::mmsg::MmsgRecv;
use tokio::sync::mpsc;

use crate::shard::dispatch::{execute_blocking, Plan};
use crate::shard::Job;
use crate::stats::ServerStats;

/// The datagrams of one burst (the receive buffers of `recvmmsg`, or one `recv_from` buffer).
pub(crate) trait Datagrams {
    fn count(&self) -> usize;
    fn datagram(&self, i: usize) -> &[u8];
}

impl Datagrams for MmsgRecv {
    fn count(&self) -> usize {
        self.received()
    }

    fn datagram(&self, i: usize) -> &[u8] {
        MmsgRecv::datagram(self, i)
    }
}

impl Datagrams for [u8] {
    fn count(&self) -> usize {
        1
    }

    fn datagram(&self, _: usize) -> &[u8] {
        self
    }
}

/// A planned datagram: its header and its messages' range in `Burst::slots`.
type DatagramPlan = Result<(Header, Range<usize>), (u32, ErrorCode)>;

/// One burst of datagrams planned, executed and answered; reused for every burst.
pub(crate) struct Burst {
    plan: Plan,
    limits: OcsmLimits,
    stats: Arc<ServerStats>,
    /// Per datagram: the reply bytes' range in `out` (empty = no reply).
    replies: Vec<Range<usize>>,
    /// Per datagram: its header and planned messages, or the refusal.
    plans: Vec<DatagramPlan>,
    /// Per planned message: its operation's index in `plan` and its offset in the datagram.
    slots: Vec<(usize, usize)>,
    out: Vec<u8>,
    /// A multi-unit value made contiguous (head and tail are apart on the wire).
    value: Vec<u8>,
}

impl Burst {
    pub(crate) fn new(shards: usize, limits: OcsmLimits, stats: Arc<ServerStats>) -> Burst {
        Burst {
            plan: Plan::new(shards),
            limits,
            stats,
            replies: Vec::new(),
            plans: Vec::new(),
            slots: Vec::new(),
            out: Vec::new(),
            value: Vec::new(),
        }
    }

    /// The plan of the last `plan_all`, for a caller that executes it itself.
    pub(crate) fn plan_mut(&mut self) -> &mut Plan {
        &mut self.plan
    }

    /// The reply to the `i`-th datagram of the last burst, if it gets one.
    pub(crate) fn reply(&self, i: usize) -> Option<&[u8]> {
        let r = self.replies.get(i)?.clone();
        (!r.is_empty()).then(|| &self.out[r])
    }

    /// Plans every datagram of a burst: their operations land in `plan`, per shard.
    pub(crate) fn plan_all(&mut self, d: &(impl Datagrams + ?Sized)) {
        self.plan.clear();
        self.plans.clear();
        self.slots.clear();
        for i in 0..d.count() {
            let plan = self.plan_datagram(d.datagram(i));
            self.plans.push(plan);
        }
    }

    /// Encodes every reply of a burst from the shards' results.
    pub(crate) fn encode_all(&mut self, d: &(impl Datagrams + ?Sized)) {
        self.out.clear();
        self.replies.clear();
        for i in 0..d.count() {
            let d = d.datagram(i);
            let start = self.out.len();
            self.encode_reply(i, d);
            // Anti-amplification, checked where it matters: never send more than was received.
            if self.out.len() - start > d.len() {
                debug_assert!(false, "OCSM reply larger than its request");
                self.out.truncate(start);
            }
            self.replies.push(start..self.out.len());
        }
        let o = &self.stats.ocsm;
        o.datagrams.fetch_add(d.count() as u64, Ordering::Relaxed);
        o.messages
            .fetch_add(self.slots.len() as u64, Ordering::Relaxed);
    }

    /// Plans, executes (sending every shard its batch and waiting) and encodes, from a thread
    /// outside the shards.
    pub(crate) fn answer_blocking(
        &mut self,
        d: &(impl Datagrams + ?Sized),
        peers: &[mpsc::Sender<Job>],
    ) {
        self.plan_all(d);
        if !self.plan.is_empty() {
            execute_blocking(peers, &mut self.plan);
        }
        self.encode_all(d);
    }

    fn plan_datagram(&mut self, d: &[u8]) -> DatagramPlan {
        let dg = decode_request(d, &self.limits).map_err(|e| {
            self.stats.ocsm.errors.fetch_add(1, Ordering::Relaxed);
            (e.sequence, e.code)
        })?;
        let first = self.slots.len();
        let mut offset = HEADER_BYTES;
        for m in dg.messages() {
            let value: &[u8] = if m.value_tail.is_empty() {
                m.value_head
            } else {
                self.value.clear();
                m.value_into(&mut self.value);
                &self.value
            };
            let op = match m.op().expect("decode_request checked the opcode") {
                Opcode::Insert => Op::put_nx(m.key, value),
                Opcode::Modify => Op::put_xx(m.key, value),
                Opcode::Delete => Op::delete(m.key),
                Opcode::Search => Op::get(m.key),
            };
            let i = self.plan.op(&op);
            self.slots.push((i, offset));
            offset += m.length as usize * dg.header.size.unit_bytes();
        }
        Ok((dg.header, first..self.slots.len()))
    }

    fn encode_reply(&mut self, i: usize, d: &[u8]) {
        let (header, slots) = match &self.plans[i] {
            Ok((h, r)) => (*h, r.clone()),
            Err((_, ErrorCode::ShortHeader)) => return,
            Err((seq, code)) => return encode_error(*seq, *code, &mut self.out),
        };
        encode_header(
            &Header {
                response: true,
                ..header
            },
            &mut self.out,
        );
        let size = header.size;
        for &(op, offset) in &self.slots[slots] {
            let Ok(Some((m, _))) = decode_message(&d[offset..], size) else {
                unreachable!("planned messages decode at their offsets");
            };
            let (status, data) = self.plan.result(op);
            let op = m.op().expect("checked");
            let status = match (status, op) {
                (EngineStatus::Ok, _) => Status::Ok,
                (EngineStatus::NotFound, _) => Status::NotFound,
                (EngineStatus::NotStored, Opcode::Insert) => Status::Exists,
                (EngineStatus::NotStored, _) => Status::NotFound,
                _ => Status::Failed,
            };
            // A search's reply may use as many units as the request did, no more.
            let (status, value, length) = if op == Opcode::Search && status == Status::Ok {
                let room = size.value_bytes(m.length);
                if data.len() > room {
                    (Status::Truncated, &data[..room], m.length)
                } else {
                    (status, data, 1)
                }
            } else {
                (status, &[][..], 1)
            };
            m.encode_reply(size, status, value, length, &mut self.out)
                .expect("a value that fits the request's units fits 255 units");
        }
    }
}
