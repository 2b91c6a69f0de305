//! The client's errors: one enum, so a caller can tell "the server said no" from "the network
//! failed" from "this request could never be sent".
//!
//! ```text
//!   before anything is sent   KeyTooLong, ValueTooLarge, BatchTooLarge     (nothing happened)
//!   connecting                Connect, Timeout{Connect}, Auth, Protocol    (nothing happened)
//!   during a request          Timeout{Request}, ConnectionLost             (writes may or may not
//!                                                                           have been applied)
//!   server's answer           Server (a whole frame rejected), Op (one operation failed;
//!                                                                  single-operation methods only)
//!   anything else             Protocol (a malformed or unexpected reply)
//! ```
//!
//! Goals: every variant says what to do next (fix the input, retry, reconnect) and carries the
//! numbers needed to act on it. Non-goals: wrapping every `std::io::Error` kind separately.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use directkv_proto::native::status;

/// What timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// Opening a connection and its handshake (`ClientConfig::connect_timeout`).
    Connect,
    /// A request and its whole reply (`ClientConfig::request_timeout`).
    Request,
}

/// One operation's failure, as reported in its result (status `0x80 | code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpError {
    /// The engine's error code (1..=63), `status::ERR_*`.
    pub code: u8,
}

impl OpError {
    /// A short description, e.g. "division by zero".
    pub fn message(&self) -> &'static str {
        status::name(status::error(self.code))
    }
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (error code {})", self.message(), self.code)
    }
}

impl std::error::Error for OpError {}

/// Everything a client call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection could not be opened.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// A socket error outside a request (resolving the address, setting options).
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The connection broke while a request was on it. Writes in that request may or may not
    /// have been applied; read-only requests are retried once before this is returned. The
    /// next call opens a new connection.
    #[error("connection to shard {shard} lost during a request ({source}); its writes may or may not have been applied")]
    ConnectionLost {
        shard: u16,
        #[source]
        source: io::Error,
    },
    /// No complete answer within the configured time. The connection is dropped, because a
    /// late reply would otherwise be taken for the next request's.
    #[error("{kind:?} timed out after {after:?}")]
    Timeout { kind: TimeoutKind, after: Duration },
    /// The server's reply did not follow the protocol (or answered something not asked).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server rejected a whole frame with an ERROR frame (docs/protocol.md, "Errors"):
    /// its code (`ErrorCode`), message, the operation at fault when there is one (index within
    /// the frame), and whether the server closed the connection.
    #[error("server error {code}: {message}{}{}",
        op_index.map_or(String::new(), |i| format!(" (operation {i} of the frame)")),
        if *.closing { " (connection closed)" } else { "" })]
    Server {
        code: u8,
        message: String,
        op_index: Option<u16>,
        closing: bool,
    },
    /// The server wants a password, or refused the one given.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// A key is longer than the server's `key_len_max`; nothing was sent.
    #[error("key is {len} bytes, longer than the server's key_len_max {max}")]
    KeyTooLong { len: usize, max: usize },
    /// An argument is longer than the server's `value_len_max`; nothing was sent.
    #[error("value is {len} bytes, longer than the server's value_len_max {max}")]
    ValueTooLarge { len: usize, max: usize },
    /// A batch has more operations than `ClientConfig::batch_ops_max`; nothing was sent.
    #[error("batch of {ops} operations is above batch_ops_max {max}")]
    BatchTooLarge { ops: usize, max: usize },
    /// The single operation failed on the server (batches report this per operation instead).
    #[error("operation failed: {0}")]
    Op(#[from] OpError),
}

impl ClientError {
    /// True if the same call may succeed when simply retried (network trouble, not bad input).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. }
                | ClientError::Io(_)
                | ClientError::ConnectionLost { .. }
                | ClientError::Timeout { .. }
        )
    }
}
