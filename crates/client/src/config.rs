//! Client settings: every limit and time-out has a name and a default.
//!
//! The wire limits (key, value, frame sizes) are not here: the server announces them in its
//! HELLO reply and the client encodes with exactly those numbers, after checking that they are
//! usable and no larger than `frame_len_ceiling` (a server cannot make the client buffer more).

use std::time::Duration;

/// Default time to open a connection and finish its handshake.
pub const CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);
/// Default time for a request (all frames of a batch, on every shard) and its whole reply.
pub const REQUEST_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// Default most operations in one batch. A batch is split into frames of the server's
/// `frame_ops_max` anyway; this bounds the memory one call may hold (staged operations and
/// their replies).
pub const BATCH_OPS_MAX_DEFAULT: usize = 1 << 20;
/// Default client name sent in HELLO (visible to the server's logs).
pub const CLIENT_NAME_DEFAULT: &str = "directkv-client";
/// Bytes the receive buffer of a connection starts with; it grows to the largest frame seen.
pub const READ_BUFFER_BYTES_DEFAULT: usize = 64 << 10;

/// Default largest frame the client accepts to read or write, whatever the server announces
/// (the server's own default is about 4 MiB).
pub const FRAME_LEN_CEILING_DEFAULT: u32 = 64 << 20;

/// How a `Client` connects and behaves.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Sent in HELLO; `None` for a server without `requirepass`. At most 255 bytes.
    pub password: Option<String>,
    /// Sent in HELLO. At most 255 bytes.
    pub client_name: String,
    /// Time to open one connection and finish HELLO (and ATTACH).
    pub connect_timeout: Duration,
    /// Time for a whole request; `None` waits for ever. A read-only request resent after a
    /// broken connection gets this time again.
    pub request_timeout: Option<Duration>,
    /// Most operations in one batch.
    pub batch_ops_max: usize,
    /// Retry a request once, on a fresh connection, when the connection broke under it and
    /// every operation in it on that connection was read-only (get, reduce, filter). Writes
    /// are never retried: the client cannot know whether the server applied them.
    pub retry_read_only: bool,
    /// Initial receive buffer per connection.
    pub read_buffer_bytes: usize,
    /// Largest frame this client reads or writes: a server announcing a larger
    /// `frame_len_max` (or `value_len_max`) is held to this one.
    pub frame_len_ceiling: u32,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            password: None,
            client_name: CLIENT_NAME_DEFAULT.to_string(),
            connect_timeout: CONNECT_TIMEOUT_DEFAULT,
            request_timeout: Some(REQUEST_TIMEOUT_DEFAULT),
            batch_ops_max: BATCH_OPS_MAX_DEFAULT,
            retry_read_only: true,
            read_buffer_bytes: READ_BUFFER_BYTES_DEFAULT,
            frame_len_ceiling: FRAME_LEN_CEILING_DEFAULT,
        }
    }
}

impl ClientConfig {
    /// The default configuration with a password.
    pub fn with_password(password: impl Into<String>) -> ClientConfig {
        ClientConfig {
            password: Some(password.into()),
            ..ClientConfig::default()
        }
    }
}
