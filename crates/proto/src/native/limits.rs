//! The native protocol's limits, named, with their defaults.
//!
//! Every length on the wire is checked against one of these where it enters, before anything is
//! allocated or trusted. The server sends its limits in the HELLO reply, so a client encodes with
//! the same numbers the server decodes with.

/// Largest UDP payload over IPv4 (65535 - 8 byte UDP header - 20 byte IP header).
pub const UDP_PAYLOAD_MAX: u32 = 65_507;

/// Default `frame_len_max`: room for four 1 MiB values plus the headers of a full frame.
pub const FRAME_LEN_MAX_DEFAULT: u32 = 4 * 1024 * 1024 + 64 * 1024;
/// `frame_len_max` before HELLO on a server with a password: a HELLO frame (a password and a
/// client name of at most 255 bytes each) is far smaller.
pub const UNAUTHENTICATED_FRAME_LEN_MAX: u32 = 4 << 10;
/// Default `frame_ops_max`.
pub const FRAME_OPS_MAX_DEFAULT: u16 = 4096;
/// Default `key_len_max` (the engine's default; the wire field is one byte).
pub const KEY_LEN_MAX_DEFAULT: u8 = 250;
/// Default `value_len_max` (the engine's default).
pub const VALUE_LEN_MAX_DEFAULT: u32 = 1024 * 1024;

/// Limits one side enforces on frames it decodes and encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeLimits {
    /// Largest frame in bytes, header included, in either direction. A response that would be
    /// larger is split into several frames (flag MORE).
    pub frame_len_max: u32,
    /// Most operations in one frame (request, or each part of a response).
    pub frame_ops_max: u16,
    /// Longest key in bytes.
    pub key_len_max: u8,
    /// Longest argument (each of a cas's two) or response data in bytes.
    pub value_len_max: u32,
}

impl NativeLimits {
    pub const DEFAULT: NativeLimits = NativeLimits {
        frame_len_max: FRAME_LEN_MAX_DEFAULT,
        frame_ops_max: FRAME_OPS_MAX_DEFAULT,
        key_len_max: KEY_LEN_MAX_DEFAULT,
        value_len_max: VALUE_LEN_MAX_DEFAULT,
    };

    /// Limits for re-parsing a batch that was already checked against the real ones (the
    /// iterators of `OpBatch` and `ResponseBatch`).
    pub(crate) const UNCHECKED: NativeLimits = NativeLimits {
        frame_len_max: u32::MAX,
        frame_ops_max: u16::MAX,
        key_len_max: u8::MAX,
        value_len_max: u32::MAX,
    };

    /// The limits on a TCP connection that has not yet authenticated with HELLO while the
    /// server requires a password: frames of at most `UNAUTHENTICATED_FRAME_LEN_MAX` bytes, so
    /// an unauthenticated client cannot make the server buffer a large frame (issue 19 item 4).
    pub const fn unauthenticated(self) -> NativeLimits {
        let frame_len_max = if self.frame_len_max < UNAUTHENTICATED_FRAME_LEN_MAX {
            self.frame_len_max
        } else {
            UNAUTHENTICATED_FRAME_LEN_MAX
        };
        NativeLimits {
            frame_len_max,
            ..self
        }
    }

    /// The same limits with frames capped to one UDP datagram.
    pub const fn for_udp(self) -> NativeLimits {
        let frame_len_max = if self.frame_len_max < UDP_PAYLOAD_MAX {
            self.frame_len_max
        } else {
            UDP_PAYLOAD_MAX
        };
        NativeLimits {
            frame_len_max,
            ..self
        }
    }
}

impl Default for NativeLimits {
    fn default() -> NativeLimits {
        NativeLimits::DEFAULT
    }
}

// A full-size value must fit in a frame of its own, in both directions (a request op costs at
// most 1 + 3 + 1 + 255 + 5 bytes besides its argument; a response op 1 + 5).
const _: () = assert!(
    VALUE_LEN_MAX_DEFAULT as usize + 14 + 265 <= FRAME_LEN_MAX_DEFAULT as usize,
    "the default frame must hold a full-size value"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_caps_only_the_frame_length() {
        let udp = NativeLimits::DEFAULT.for_udp();
        assert_eq!(udp.frame_len_max, UDP_PAYLOAD_MAX);
        assert_eq!(udp.key_len_max, KEY_LEN_MAX_DEFAULT);
        let small = NativeLimits {
            frame_len_max: 1500,
            ..NativeLimits::DEFAULT
        };
        assert_eq!(small.for_udp().frame_len_max, 1500);
        assert_eq!(NativeLimits::default(), NativeLimits::DEFAULT);
    }
}
