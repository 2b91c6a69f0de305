//! The native protocol over UDP on the server's port number: one frame per datagram, answered
//! with one datagram. A blocking thread receives, sends each shard its operations over the
//! shard queues, and replies.
//!
//! No password: a datagram has no connection to hold an AUTH, so `lib.rs` serves this only
//! while `ServerConfig::udp_enabled` (by default: a loopback address without `requirepass`;
//! with a password only by the operator's explicit `udp` + `udp_insecure`).
//!
//! Anti-amplification: UDP senders are never authenticated, so a reply is never larger than
//! its request. The shards produce at most a datagram's worth of results for it (`Plan`'s
//! results cap), so the thread never holds more than that. Results whose data would not fit
//! get the status `ERR_REPLY_TOO_LARGE` and no data, each operation after them keeping room for
//! its status byte, so the reply always fits (clients that want large values over UDP send
//! large batches, or use TCP). An error frame that would be larger than the datagram it
//! answers has its message cut to fit; one that cannot fit at all is not sent.

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use directkv_engine::{OpError, Status};
use directkv_proto::native::{
    self, encode_response, encode_response_frame, response_op_len, ErrorCode, ErrorReply,
    NativeLimits, Request, Response, ResponseFrame, ResponseOp, HEADER_LEN, UDP_PAYLOAD_MAX,
};
use tokio::sync::{mpsc, watch};

use super::conn::{plan_op, planned_bytes, Slot};
use super::scan::Scans;
use crate::shard::dispatch::{execute_blocking, Plan};
use crate::shard::panics;
use crate::shard::Job;
use crate::stats::ServerStats;

/// How often the receive loop checks for shutdown.
const STOP_POLL: Duration = Duration::from_millis(200);
/// Bytes of a response frame besides its results (header and op count).
const RESPONSE_OVERHEAD_BYTES: usize = HEADER_LEN + 2;

pub(crate) fn serve(
    sock: UdpSocket,
    peers: Arc<Vec<mpsc::Sender<Job>>>,
    limits: NativeLimits,
    stats: Arc<ServerStats>,
    stop: watch::Receiver<bool>,
    store: Option<Arc<crate::persistence::Store>>,
) {
    let _ = sock.set_read_timeout(Some(STOP_POLL));
    let limits = limits.for_udp();
    let mut buf = vec![0u8; UDP_PAYLOAD_MAX as usize];
    let mut out = Vec::with_capacity(UDP_PAYLOAD_MAX as usize);
    let mut plan = Plan::new(peers.len());
    let mut scans = Scans::default();
    while !*stop.borrow() {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        out.clear();
        let answered = panics::contain_blocking("UDP datagram", &stats, || {
            answer(
                &buf[..n],
                &peers,
                &limits,
                (&mut plan, &mut scans),
                &mut out,
            )
        });
        if answered.is_none() {
            out.clear();
        }
        debug_assert!(out.len() <= n, "a UDP reply larger than its request");
        if !out.is_empty() && out.len() <= n && crate::ocsm::durable_blocking(&store) {
            let _ = sock.send_to(&out, from);
        }
    }
}

/// Encodes an error frame no larger than `max` bytes: its message is cut (at a character
/// boundary) to fit, and nothing is written when even an empty message would not.
fn error_within(
    request_id: u32,
    e: ErrorReply<'_>,
    max: usize,
    limits: &NativeLimits,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    let mut message = e.message;
    loop {
        let frame = ResponseFrame {
            request_id,
            body: Response::Error(ErrorReply { message, ..e }),
        };
        let ok = encode_response_frame(&frame, limits, out).is_ok();
        let len = out.len() - start;
        if ok && len <= max {
            return;
        }
        out.truncate(start);
        if !ok || message.is_empty() {
            return;
        }
        let mut cut = message.len().saturating_sub(len - max);
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message = &message[..cut];
    }
}

fn answer(
    datagram: &[u8],
    peers: &[mpsc::Sender<Job>],
    limits: &NativeLimits,
    (p, scans): (&mut Plan, &mut Scans),
    out: &mut Vec<u8>,
) {
    let frame = match native::decode_request_datagram(datagram, limits) {
        Ok(f) => f,
        Err(e) => {
            error_within(e.request_id, e.reply(), datagram.len(), limits, out);
            return;
        }
    };
    let id = frame.request_id;
    match frame.body {
        Request::Ping(payload) => {
            let _ = encode_response_frame(
                &ResponseFrame {
                    request_id: id,
                    body: Response::Pong(payload),
                },
                limits,
                out,
            );
        }
        // HELLO and ATTACH are TCP-only: a connection-less sender cannot hold either.
        Request::Hello(_) | Request::Attach(_) => {}
        Request::Ops(batch) => {
            p.clear();
            scans.clear();
            let mut slots: Vec<Slot> = batch.iter().map(|op| plan_op(p, &op)).collect();
            // The shards copy no more data than the reply could carry.
            p.set_results_cap(datagram.len());
            execute_blocking(peers, p);
            // A scan's keys are held to what the reply can still carry (each operation keeps
            // room for its status byte and a data length); the loop below refuses the rest.
            let room = datagram
                .len()
                .saturating_sub(RESPONSE_OVERHEAD_BYTES + 4 * slots.len());
            let planned = planned_bytes(&slots, p);
            for (slot, op) in slots.iter_mut().zip(batch.iter()) {
                if let Slot::Scan(k) = slot {
                    let left = room.saturating_sub(planned + scans.data_bytes());
                    *k = scans.run_blocking(
                        peers,
                        op.key,
                        op.arg,
                        left,
                        limits.value_len_max as usize,
                        op.is_no_return(),
                    );
                }
            }
            let mut budget = datagram.len().saturating_sub(RESPONSE_OVERHEAD_BYTES);
            let too_large = Status::Error(OpError::ReplyTooLarge {
                max: datagram.len(),
            })
            .code();
            let mut ops = Vec::with_capacity(slots.len());
            for (k, slot) in slots.iter().enumerate() {
                // Every operation after this one needs at least its status byte.
                let later = slots.len() - k - 1;
                let ResponseOp { status, data } = slot.reply(p, scans);
                let (status, data) = if response_op_len(data.len()) + later <= budget {
                    (status, data)
                } else {
                    (too_large, &[][..])
                };
                budget = budget.saturating_sub(response_op_len(data.len()));
                ops.push(ResponseOp { status, data });
            }
            let start = out.len();
            let _ = encode_response(id, &ops, limits, out);
            if out.len() - start > datagram.len() {
                // Cannot happen while every request operation is at least as long as a bare
                // status; kept so that the rule holds whatever the encoding becomes.
                out.truncate(start);
                let e = ErrorReply {
                    code: ErrorCode::ValueTooLarge.code(),
                    closing: false,
                    op_index: None,
                    message: "the reply would be larger than the request datagram; use TCP",
                };
                error_within(id, e, datagram.len(), limits, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_frames_are_cut_to_the_request_size_or_not_sent() {
        let limits = NativeLimits::DEFAULT.for_udp();
        let e = ErrorReply {
            code: ErrorCode::Truncated.code(),
            closing: false,
            op_index: None,
            message: "a message far longer than the datagram it answers, é at the end",
        };
        for max in [17usize, 18, 30, 40, 200] {
            let mut out = Vec::new();
            error_within(5, e, max, &limits, &mut out);
            assert!(!out.is_empty() && out.len() <= max, "{max}: {}", out.len());
            let f = native::decode_response_datagram(&out, &limits).unwrap();
            assert!(matches!(f.body, Response::Error(r) if e.message.starts_with(r.message)));
        }
        let mut out = Vec::new();
        error_within(5, e, 16, &limits, &mut out);
        assert!(out.is_empty(), "an error frame has at least 17 bytes");
    }
}
