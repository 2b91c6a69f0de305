//! Opening one connection: TCP connect, HELLO (password, client name, limits, shard map) and,
//! when the shard has no port of its own, ATTACH to bind the connection to that shard's thread.
//!
//! ```text
//!   client                                   server (main port)
//!     ── HELLO(password, name) ─────────────>  authenticate, answer from whichever shard
//!     <────────── HELLO_REPLY(limits, map) ──  accepted the connection
//!     ── ATTACH(shard) ─────────────────────>  the connection moves to shard's thread
//!     <──────────────── ATTACH_REPLY(shard) ──
//!     ── HELLO again (only with a password) ─>  the new thread authenticates the connection
//!     <────────────────────── HELLO_REPLY ────  itself, so the client proves it once more
//! ```
//!
//! Goals: every step bounded by the connect time-out (by the caller); an authentication
//! problem comes back as `ClientError::Auth`, a server that changed its shard map as a
//! protocol error rather than silently misrouted keys.
//! Non-goals: the data path (`round.rs`). These functions are called once per connection.

use std::net::SocketAddr;

use directkv_proto::native::{
    decode_response, encode_request_frame, ErrorCode, ErrorReply, Hello, HelloReply, NativeLimits,
    Request, RequestFrame, Response, HASH_XXH3_64,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::ClientConfig;
use crate::error::ClientError;

/// Request ids of the handshake frames (the data path has its own counter; ids only need to
/// match within one exchange).
const HELLO_REQUEST_ID: u32 = 1;
const ATTACH_REQUEST_ID: u32 = 2;
/// Bytes read at a time during the handshake: replies are small.
const HANDSHAKE_READ_BYTES: usize = 4096;

/// Maps an ERROR frame to the client's error.
pub(crate) fn server_error(e: &ErrorReply<'_>) -> ClientError {
    let auth = [ErrorCode::AuthRequired.code(), ErrorCode::AuthFailed.code()];
    if auth.contains(&e.code) {
        ClientError::Auth(e.message.to_string())
    } else {
        ClientError::Server {
            code: e.code,
            message: e.message.to_string(),
            op_index: e.op_index,
            closing: e.closing,
        }
    }
}

/// Opens a TCP connection with Nagle off (every frame is a complete request).
pub(crate) async fn open(addr: SocketAddr) -> Result<TcpStream, ClientError> {
    let s = TcpStream::connect(addr)
        .await
        .map_err(|source| ClientError::Connect { addr, source })?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Sends one control frame and reads the one reply, which `on_reply` interprets.
async fn exchange<T>(
    s: &mut TcpStream,
    frame: &RequestFrame<'_>,
    on_reply: impl FnOnce(Response<'_>) -> Result<T, ClientError>,
    closed_means: impl FnOnce() -> ClientError,
) -> Result<T, ClientError> {
    let limits = NativeLimits::DEFAULT;
    let mut out = Vec::new();
    encode_request_frame(frame, &limits, &mut out)
        .map_err(|e| ClientError::Protocol(format!("cannot encode handshake: {e}")))?;
    s.write_all(&out).await?;
    let mut buf = Vec::with_capacity(HANDSHAKE_READ_BYTES);
    loop {
        match decode_response(&buf, &limits) {
            Ok(Some((reply, n))) => {
                if n != buf.len() {
                    return Err(ClientError::Protocol(
                        "bytes after the handshake reply".into(),
                    ));
                }
                if let Response::Error(e) = &reply.body {
                    return Err(server_error(e));
                }
                if reply.request_id != frame.request_id {
                    return Err(ClientError::Protocol(format!(
                        "handshake reply for request {} instead of {}",
                        reply.request_id, frame.request_id
                    )));
                }
                return on_reply(reply.body);
            }
            Ok(None) => {}
            Err(e) => return Err(ClientError::Protocol(e.to_string())),
        }
        let mut chunk = [0u8; HANDSHAKE_READ_BYTES];
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(closed_means());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// HELLO: returns the server's limits and shard map.
pub(crate) async fn hello(
    s: &mut TcpStream,
    cfg: &ClientConfig,
) -> Result<HelloReply, ClientError> {
    let password = cfg.password.as_deref().unwrap_or("").as_bytes();
    let frame = RequestFrame {
        request_id: HELLO_REQUEST_ID,
        body: Request::Hello(Hello {
            password,
            client_name: cfg.client_name.as_bytes(),
        }),
    };
    let has_password = !password.is_empty();
    let reply = exchange(
        s,
        &frame,
        |r| match r {
            Response::Hello(h) => Ok(h),
            other => Err(ClientError::Protocol(format!(
                "expected HELLO_REPLY, got {other:?}"
            ))),
        },
        || {
            // A server that closes right after HELLO refused it; without a password the
            // likeliest reason is that it requires one.
            ClientError::Auth(if has_password {
                "server closed the connection after HELLO (wrong password?)".into()
            } else {
                "server closed the connection after HELLO (password required?)".into()
            })
        },
    )
    .await?;
    if reply.shard_map.hash != HASH_XXH3_64 {
        return Err(ClientError::Protocol(format!(
            "unknown shard hash id {} (this client knows xxh3-64, id {HASH_XXH3_64})",
            reply.shard_map.hash
        )));
    }
    if reply.shard_map.ports.is_empty() {
        return Err(ClientError::Protocol("shard map without shards".into()));
    }
    let limits = usable_limits(reply.limits, cfg.frame_len_ceiling)?;
    Ok(HelloReply { limits, ..reply })
}

/// Smallest `frame_len_max` a server may announce: a header and one operation with a short key.
const FRAME_LEN_MIN: u32 = 64;

/// The server's announced limits, checked (a frame must hold at least one operation) and held
/// to the client's ceiling.
pub(crate) fn usable_limits(l: NativeLimits, ceiling: u32) -> Result<NativeLimits, ClientError> {
    if l.frame_ops_max == 0 || l.key_len_max == 0 || l.frame_len_max < FRAME_LEN_MIN {
        return Err(ClientError::Protocol(format!(
            "server announced unusable limits: frame_len_max {}, frame_ops_max {}, key_len_max {}",
            l.frame_len_max, l.frame_ops_max, l.key_len_max
        )));
    }
    let frame_len_max = l.frame_len_max.min(ceiling.max(FRAME_LEN_MIN));
    Ok(NativeLimits {
        frame_len_max,
        value_len_max: l.value_len_max.min(frame_len_max),
        ..l
    })
}

/// ATTACH: binds the connection to `shard`'s thread.
pub(crate) async fn attach(s: &mut TcpStream, shard: u16) -> Result<(), ClientError> {
    let frame = RequestFrame {
        request_id: ATTACH_REQUEST_ID,
        body: Request::Attach(shard),
    };
    exchange(
        s,
        &frame,
        |r| match r {
            Response::Attach(got) if got == shard => Ok(()),
            Response::Attach(got) => Err(ClientError::Protocol(format!(
                "ATTACH {shard} answered with shard {got}"
            ))),
            other => Err(ClientError::Protocol(format!(
                "expected ATTACH_REPLY, got {other:?}"
            ))),
        },
        || ClientError::Protocol("server closed the connection after ATTACH".into()),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_limits_are_checked_and_held_to_the_ceiling() {
        let d = NativeLimits::DEFAULT;
        assert_eq!(usable_limits(d, 64 << 20).unwrap(), d);
        let huge = NativeLimits {
            frame_len_max: u32::MAX,
            value_len_max: u32::MAX,
            ..d
        };
        let held = usable_limits(huge, 1 << 20).unwrap();
        assert_eq!(held.frame_len_max, 1 << 20);
        assert_eq!(held.value_len_max, 1 << 20);
        for bad in [
            NativeLimits {
                frame_ops_max: 0,
                ..d
            },
            NativeLimits {
                key_len_max: 0,
                ..d
            },
            NativeLimits {
                frame_len_max: 10,
                ..d
            },
        ] {
            let err = usable_limits(bad, 64 << 20).unwrap_err();
            assert!(matches!(err, ClientError::Protocol(_)), "{err:?}");
        }
    }
}
