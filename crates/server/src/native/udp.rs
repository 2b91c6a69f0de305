//! The native protocol over UDP on the server's port number: one frame per datagram, answered
//! with one datagram. A blocking thread receives, sends each shard its operations over the
//! shard queues, and replies.
//!
//! No password: a datagram has no connection to hold an AUTH, so `lib.rs` serves this only
//! while `ServerConfig::udp_enabled` (by default: a loopback address without `requirepass`;
//! with a password only by the operator's explicit `udp` + `udp_insecure`).
//!
//! Anti-amplification: UDP senders are never authenticated, so a reply is never larger than
//! its request. Results whose data would not fit get the status "value too large" and no data
//! (clients that want large values over UDP send large batches, or use TCP).

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use directkv_engine::{OpError, Status};
use directkv_proto::native::{
    self, encode_response, encode_response_frame, response_op_len, NativeLimits, Request, Response,
    ResponseFrame, ResponseOp, HEADER_LEN, UDP_PAYLOAD_MAX,
};
use tokio::sync::{mpsc, watch};

use super::conn::{plan_op, Slot};
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
) {
    let _ = sock.set_read_timeout(Some(STOP_POLL));
    let limits = limits.for_udp();
    let mut buf = vec![0u8; UDP_PAYLOAD_MAX as usize];
    let mut out = Vec::with_capacity(UDP_PAYLOAD_MAX as usize);
    let mut plan = Plan::new(peers.len());
    while !*stop.borrow() {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        out.clear();
        let answered = panics::contain_blocking("UDP datagram", &stats, || {
            answer(&buf[..n], &peers, &limits, &mut plan, &mut out)
        });
        if answered.is_none() {
            out.clear();
        }
        if !out.is_empty() && out.len() <= n {
            let _ = sock.send_to(&out, from);
        }
    }
}

fn answer(
    datagram: &[u8],
    peers: &[mpsc::Sender<Job>],
    limits: &NativeLimits,
    p: &mut Plan,
    out: &mut Vec<u8>,
) {
    let frame = match native::decode_request_datagram(datagram, limits) {
        Ok(f) => f,
        Err(e) => {
            let _ = encode_response_frame(
                &ResponseFrame {
                    request_id: e.request_id,
                    body: Response::Error(e.reply()),
                },
                limits,
                out,
            );
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
            let slots: Vec<Slot> = batch.iter().map(|op| plan_op(p, &op)).collect();
            execute_blocking(peers, p);
            let mut budget = datagram.len().saturating_sub(RESPONSE_OVERHEAD_BYTES);
            let too_large = Status::Error(OpError::ValueTooLarge { len: 0, max: 0 }).code();
            let mut ops = Vec::with_capacity(slots.len());
            for slot in &slots {
                let (status, data) = match *slot {
                    Slot::Failed(code) => (code, &[][..]),
                    Slot::Planned(i) => {
                        let (status, data) = p.result(i);
                        (status.code(), data)
                    }
                };
                let (status, data) = if response_op_len(data.len()) <= budget {
                    (status, data)
                } else {
                    (too_large, &[][..])
                };
                budget = budget.saturating_sub(response_op_len(data.len()));
                ops.push(ResponseOp { status, data });
            }
            let _ = encode_response(id, &ops, limits, out);
        }
    }
}
