//! OCSM (Open Compute Storage Message, seed 004) as a sans-IO codec: UDP datagrams of 32- or
//! 64-byte binary messages, in both directions.
//!
//! Goals: the seed's message layout exactly (its C struct), explicit little-endian integers, no
//! allocation and no panic while parsing, every malformed datagram mapped to one named
//! [`ErrorCode`], and replies that are never larger than their request (every UDP sender is
//! unauthenticated, so the server must not amplify). Non-goals: I/O, retransmission, long keys
//! and long values (the client API in `directkv-client` builds those on top).
//!
//! The seed fixes the message struct and says that a 6-byte header carries the message count,
//! the message type and (written by its test generator) a 24-bit sequence number in the first
//! three bytes. Opcode values, the header's bit layout and the response layout are not published:
//! the ones below are **ours** (docs/protocol.md, section OCSM).
//!
//! ```text
//!  datagram   [ header 6 ][ message ][ message ] ...            (count messages)
//!  header     0..3 sequence u24 LE | 3 type | 4..6 count u16 LE
//!             type: bit 7 response, bit 4 64-byte messages, bits 0..1 kind (1 update, 2 search)
//!             type 0xFF: error response, the count field holds the ErrorCode
//!  message    0..12 key (parameter[0..3]) | 12..U-8 value head (parameter[3..])
//!  (U = 32    U-8..U-4 sequence u32 LE | U-4 length | U-3 source | U-2 destination | U-1 opcode
//!   or 64)    then (length - 1) * U bytes of value tail
//! ```

use std::fmt;

/// Bytes of the datagram header.
pub const HEADER_BYTES: usize = 6;
/// Bytes of the key: the first 96 bits of the parameters.
pub const KEY_BYTES: usize = 12;
/// Largest UDP payload of a 1514-byte Ethernet frame (1514 - 14 Ethernet - 20 IPv4 - 8 UDP).
pub const DATAGRAM_BYTES_MAX_DEFAULT: usize = 1472;
/// Largest UDP payload over IPv4; no limit may exceed it.
pub const DATAGRAM_BYTES_MAX_UDP: usize = 65_507;
/// Largest sequence number the 24-bit header field holds.
pub const HEADER_SEQUENCE_MAX: u32 = (1 << 24) - 1;
/// Type byte of an error response.
pub const TYPE_ERROR: u8 = 0xFF;
const TYPE_RESPONSE: u8 = 0x80;
const TYPE_SIZE_64: u8 = 0x10;
const TYPE_KIND_MASK: u8 = 0x03;
const TYPE_KNOWN_BITS: u8 = TYPE_RESPONSE | TYPE_SIZE_64 | TYPE_KIND_MASK;

// The seed's figures: 45 32-byte or 22 64-byte messages in a 1514-byte frame.
const _: () = assert!((DATAGRAM_BYTES_MAX_DEFAULT - HEADER_BYTES) / 32 == 45);
const _: () = assert!((DATAGRAM_BYTES_MAX_DEFAULT - HEADER_BYTES) / 64 == 22);

/// The two message sizes of the seed: 32 bytes (`parameter[6]`, on-chip table) and 64 bytes
/// (`parameter[14]`, off-chip table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageSize {
    B32,
    B64,
}

impl MessageSize {
    /// Bytes of one message unit (the fixed part, and each extra unit).
    pub const fn unit_bytes(self) -> usize {
        match self {
            MessageSize::B32 => 32,
            MessageSize::B64 => 64,
        }
    }

    /// Value bytes inside the fixed part: 96 bits (32-byte) or 352 bits (64-byte).
    pub const fn value_head_bytes(self) -> usize {
        self.unit_bytes() - 8 - KEY_BYTES
    }

    /// Value bytes a message of `length` units carries.
    pub const fn value_bytes(self, length: u8) -> usize {
        self.value_head_bytes() + (length as usize).saturating_sub(1) * self.unit_bytes()
    }

    /// Units a message needs to carry `value_len` bytes (at least 1; None past 255 units).
    pub fn units_for(self, value_len: usize) -> Option<u8> {
        let extra = value_len.saturating_sub(self.value_head_bytes());
        u8::try_from(1 + extra.div_ceil(self.unit_bytes())).ok()
    }
}

/// What the messages of a datagram do: the seed allows only one kind per datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Insert, modify or delete.
    Update = 1,
    Search = 2,
}

/// Request opcodes (ours: the seed does not publish values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// Store a key that is not present (status `Exists` if it is).
    Insert = 0x01,
    /// Replace the value of a present key (status `NotFound` if absent).
    Modify = 0x02,
    Delete = 0x03,
    /// Return the value.
    Search = 0x04,
}

impl Opcode {
    pub fn from_code(c: u8) -> Option<Opcode> {
        match c {
            0x01 => Some(Opcode::Insert),
            0x02 => Some(Opcode::Modify),
            0x03 => Some(Opcode::Delete),
            0x04 => Some(Opcode::Search),
            _ => None,
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Opcode::Search => Kind::Search,
            _ => Kind::Update,
        }
    }
}

/// Per-message outcome, sent in a response message's opcode byte (ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    Ok = 0x80,
    NotFound = 0x81,
    /// Insert of a key that is present.
    Exists = 0x82,
    /// Search whose value is longer than the request's slot: the slot holds the value's start.
    Truncated = 0x83,
    /// The store could not do it (out of memory, value too large for the server).
    Failed = 0x84,
}

impl Status {
    pub fn from_code(c: u8) -> Option<Status> {
        match c {
            0x80 => Some(Status::Ok),
            0x81 => Some(Status::NotFound),
            0x82 => Some(Status::Exists),
            0x83 => Some(Status::Truncated),
            0x84 => Some(Status::Failed),
            _ => None,
        }
    }
}

/// Why a datagram was refused; sent as the count field of an error response (ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    /// Shorter than the 6-byte header (never answered: there is no sequence to echo).
    ShortHeader = 1,
    /// Unknown type byte, or a response where a request was expected (and vice versa).
    BadType = 2,
    /// Zero messages, or more than fit the datagram limit.
    BadCount = 3,
    /// The datagram ends inside a message.
    Truncated = 4,
    /// Bytes after the last message.
    TrailingBytes = 5,
    /// A message with `length` 0.
    BadLength = 6,
    /// A message opcode that is not one of ours.
    UnknownOpcode = 7,
    /// A search in an update datagram or an update in a search datagram.
    Mixed = 8,
    /// Larger than the datagram limit.
    TooLarge = 9,
}

impl ErrorCode {
    pub fn from_code(c: u16) -> Option<ErrorCode> {
        use ErrorCode::*;
        [
            ShortHeader,
            BadType,
            BadCount,
            Truncated,
            TrailingBytes,
            BadLength,
            UnknownOpcode,
            Mixed,
            TooLarge,
        ]
        .into_iter()
        .find(|e| *e as u16 == c)
    }
}

/// A refused datagram: the code, the datagram's sequence (0 before the header is read) and the
/// index of the offending message, if one is to blame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OcsmError {
    pub code: ErrorCode,
    pub sequence: u32,
    pub message: Option<u16>,
}

impl fmt::Display for OcsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.code {
            ErrorCode::ShortHeader => "datagram shorter than the 6-byte header",
            ErrorCode::BadType => "unknown message type",
            ErrorCode::BadCount => "message count is zero or exceeds the datagram limit",
            ErrorCode::Truncated => "datagram ends inside a message",
            ErrorCode::TrailingBytes => "bytes after the last message",
            ErrorCode::BadLength => "message length 0",
            ErrorCode::UnknownOpcode => "unknown opcode",
            ErrorCode::Mixed => "updates and searches mixed in one datagram",
            ErrorCode::TooLarge => "datagram larger than the limit",
        };
        write!(f, "OCSM datagram {}: {what}", self.sequence)?;
        if let Some(m) = self.message {
            write!(f, " (message {m})")?;
        }
        Ok(())
    }
}

impl std::error::Error for OcsmError {}

/// The limits a side enforces on the datagrams it decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OcsmLimits {
    /// Largest datagram, header included.
    pub datagram_bytes_max: usize,
}

impl OcsmLimits {
    pub const DEFAULT: OcsmLimits = OcsmLimits {
        datagram_bytes_max: DATAGRAM_BYTES_MAX_DEFAULT,
    };

    /// Most messages of `size` in one datagram (45 and 22 with the default limit).
    pub const fn messages_per_datagram_max(&self, size: MessageSize) -> usize {
        (self.datagram_bytes_max.saturating_sub(HEADER_BYTES)) / size.unit_bytes()
    }
}

impl Default for OcsmLimits {
    fn default() -> OcsmLimits {
        OcsmLimits::DEFAULT
    }
}

/// The 6-byte datagram header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// 24-bit datagram sequence number (the generator's; echoed in the response).
    pub sequence: u32,
    pub response: bool,
    pub size: MessageSize,
    pub kind: Kind,
    pub count: u16,
}

impl Header {
    fn type_byte(&self) -> u8 {
        let mut t = self.kind as u8;
        if self.size == MessageSize::B64 {
            t |= TYPE_SIZE_64;
        }
        if self.response {
            t |= TYPE_RESPONSE;
        }
        t
    }
}

/// One message as on the wire. `value_head` is the value inside the fixed part (12 or 44
/// bytes), `value_tail` the `(length - 1)` extra units; both borrow the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// The fixed unit as on the wire (`unit_bytes` long; the fields below are read from it).
    pub unit: &'a [u8],
    pub key: &'a [u8; KEY_BYTES],
    pub value_head: &'a [u8],
    pub value_tail: &'a [u8],
    pub sequence: u32,
    pub length: u8,
    pub source: u8,
    pub destination: u8,
    /// An [`Opcode`] in requests, a [`Status`] in responses.
    pub opcode: u8,
}

impl Message<'_> {
    /// Request opcode (always `Some` in a datagram `decode_request` accepted).
    pub fn op(&self) -> Option<Opcode> {
        Opcode::from_code(self.opcode)
    }

    /// Response status (always `Some` in a datagram `decode_response` accepted).
    pub fn status(&self) -> Option<Status> {
        Status::from_code(self.opcode)
    }

    /// Total value bytes (head and tail).
    pub fn value_len(&self) -> usize {
        self.value_head.len() + self.value_tail.len()
    }

    /// Appends the whole value (head then tail) to `out`.
    pub fn value_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.value_head);
        out.extend_from_slice(self.value_tail);
    }

    /// Appends the reply to this request message: its key and sequence, source and
    /// destination swapped, `status` in the opcode byte, and `value` (empty for updates)
    /// zero-padded to at least `length` units. `None` (nothing written) if the value needs
    /// more than 255 units. Same bytes as [`encode_message`] with those fields; the one-unit
    /// case copies the request's unit and patches it (no field-by-field assembly).
    pub fn encode_reply(
        &self,
        size: MessageSize,
        status: Status,
        value: &[u8],
        length: u8,
        out: &mut Vec<u8>,
    ) -> Option<usize> {
        let u = size.unit_bytes();
        if value.len() <= size.value_head_bytes() && length <= 1 && self.unit.len() == u {
            let start = out.len();
            out.extend_from_slice(self.unit);
            let w = &mut out[start..];
            let end = KEY_BYTES + value.len();
            w[KEY_BYTES..end].copy_from_slice(value);
            w[end..u - 8].fill(0);
            w[u - 4] = 1;
            w[u - 3] = self.destination;
            w[u - 2] = self.source;
            w[u - 1] = status as u8;
            return Some(u);
        }
        encode_message(
            size,
            &MessageOut {
                key: *self.key,
                value,
                sequence: self.sequence,
                length,
                source: self.destination,
                destination: self.source,
                opcode: status as u8,
            },
            out,
        )
    }
}

/// A datagram that passed every check; its messages iterate without further failure.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    pub header: Header,
    body: &'a [u8],
}

impl<'a> Datagram<'a> {
    pub fn messages(&self) -> Messages<'a> {
        Messages {
            size: self.header.size,
            rest: self.body,
        }
    }
}

/// Iterator over the messages of a checked datagram.
pub struct Messages<'a> {
    size: MessageSize,
    rest: &'a [u8],
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;

    fn next(&mut self) -> Option<Message<'a>> {
        let (m, n) = decode_message(self.rest, self.size).ok()??;
        self.rest = &self.rest[n..];
        Some(m)
    }
}

/// A decoded response datagram: messages, or the error the server answered with.
#[derive(Debug, Clone, Copy)]
pub enum Response<'a> {
    Messages(Datagram<'a>),
    Error { sequence: u32, code: ErrorCode },
}

fn u32_le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Reads the header; `Ok(None)` if `buf` is shorter than 6 bytes. Error responses are reported
/// as `BadType` here (use [`decode_response`] for them).
pub fn decode_header(buf: &[u8]) -> Result<Option<Header>, OcsmError> {
    let Some(h) = buf.get(..HEADER_BYTES) else {
        return Ok(None);
    };
    let sequence = u32::from_le_bytes([h[0], h[1], h[2], 0]);
    let t = h[3];
    let err = |code| OcsmError {
        code,
        sequence,
        message: None,
    };
    let kind = match t & TYPE_KIND_MASK {
        1 => Kind::Update,
        2 => Kind::Search,
        _ => return Err(err(ErrorCode::BadType)),
    };
    if t & !TYPE_KNOWN_BITS != 0 {
        return Err(err(ErrorCode::BadType));
    }
    Ok(Some(Header {
        sequence,
        response: t & TYPE_RESPONSE != 0,
        size: if t & TYPE_SIZE_64 != 0 {
            MessageSize::B64
        } else {
            MessageSize::B32
        },
        kind,
        count: u16::from_le_bytes([h[4], h[5]]),
    }))
}

/// Decodes one message at the front of `buf`: `Ok(Some((message, bytes used)))`, `Ok(None)`
/// if `buf` ends inside it, `Err` (`BadLength`, message index 0) for length 0.
pub fn decode_message(
    buf: &[u8],
    size: MessageSize,
) -> Result<Option<(Message<'_>, usize)>, OcsmError> {
    let u = size.unit_bytes();
    let Some(fixed) = buf.get(..u) else {
        return Ok(None);
    };
    let length = fixed[u - 4];
    if length == 0 {
        return Err(OcsmError {
            code: ErrorCode::BadLength,
            sequence: 0,
            message: Some(0),
        });
    }
    let total = length as usize * u;
    let Some(whole) = buf.get(..total) else {
        return Ok(None);
    };
    let key: &[u8; KEY_BYTES] = fixed[..KEY_BYTES].try_into().expect("12 bytes");
    Ok(Some((
        Message {
            unit: fixed,
            key,
            value_head: &fixed[KEY_BYTES..u - 8],
            value_tail: &whole[u..],
            sequence: u32_le(&fixed[u - 8..]),
            length,
            source: fixed[u - 3],
            destination: fixed[u - 2],
            opcode: fixed[u - 1],
        },
        total,
    )))
}

/// Checks a whole datagram: header, count, every message's length and opcode, nothing left over.
fn check<'a>(
    buf: &'a [u8],
    limits: &OcsmLimits,
    response: bool,
    opcode_ok: impl Fn(u8, Kind) -> Result<(), ErrorCode>,
) -> Result<Datagram<'a>, OcsmError> {
    let header = decode_header(buf)?.ok_or(OcsmError {
        code: ErrorCode::ShortHeader,
        sequence: 0,
        message: None,
    })?;
    let err = |code, message| OcsmError {
        code,
        sequence: header.sequence,
        message,
    };
    if header.response != response {
        return Err(err(ErrorCode::BadType, None));
    }
    if buf.len() > limits.datagram_bytes_max {
        return Err(err(ErrorCode::TooLarge, None));
    }
    let count = header.count as usize;
    if count == 0 || count > limits.messages_per_datagram_max(header.size) {
        return Err(err(ErrorCode::BadCount, None));
    }
    let body = &buf[HEADER_BYTES..];
    let mut rest = body;
    for i in 0..count {
        let index = Some(i as u16);
        match decode_message(rest, header.size) {
            Ok(Some((m, n))) => {
                opcode_ok(m.opcode, header.kind).map_err(|c| err(c, index))?;
                rest = &rest[n..];
            }
            Ok(None) => return Err(err(ErrorCode::Truncated, index)),
            Err(e) => return Err(err(e.code, index)),
        }
    }
    if !rest.is_empty() {
        return Err(err(ErrorCode::TrailingBytes, None));
    }
    Ok(Datagram { header, body })
}

/// Decodes a request datagram (what the server receives). No allocation.
pub fn decode_request<'a>(buf: &'a [u8], limits: &OcsmLimits) -> Result<Datagram<'a>, OcsmError> {
    check(buf, limits, false, |code, kind| {
        match Opcode::from_code(code) {
            None => Err(ErrorCode::UnknownOpcode),
            Some(op) if op.kind() != kind => Err(ErrorCode::Mixed),
            Some(_) => Ok(()),
        }
    })
}

/// Decodes a response datagram (what the client receives). No allocation.
pub fn decode_response<'a>(buf: &'a [u8], limits: &OcsmLimits) -> Result<Response<'a>, OcsmError> {
    if buf.len() >= HEADER_BYTES && buf[3] == TYPE_ERROR {
        let sequence = u32::from_le_bytes([buf[0], buf[1], buf[2], 0]);
        let code = ErrorCode::from_code(u16::from_le_bytes([buf[4], buf[5]]));
        return match (code, buf.len()) {
            (Some(code), HEADER_BYTES) => Ok(Response::Error { sequence, code }),
            _ => Err(OcsmError {
                code: ErrorCode::BadType,
                sequence,
                message: None,
            }),
        };
    }
    check(buf, limits, true, |code, _| match Status::from_code(code) {
        None => Err(ErrorCode::UnknownOpcode),
        Some(_) => Ok(()),
    })
    .map(Response::Messages)
}

/// Appends a header. `sequence` is truncated to 24 bits.
pub fn encode_header(h: &Header, out: &mut Vec<u8>) {
    let s = (h.sequence & HEADER_SEQUENCE_MAX).to_le_bytes();
    out.extend_from_slice(&[s[0], s[1], s[2], h.type_byte()]);
    out.extend_from_slice(&h.count.to_le_bytes());
}

/// Appends the 6-byte error response for a refused datagram.
pub fn encode_error(sequence: u32, code: ErrorCode, out: &mut Vec<u8>) {
    let s = (sequence & HEADER_SEQUENCE_MAX).to_le_bytes();
    out.extend_from_slice(&[s[0], s[1], s[2], TYPE_ERROR]);
    out.extend_from_slice(&(code as u16).to_le_bytes());
}

/// The fields of a message to encode; the value is written head first, then tail units,
/// zero-padded to `length` units.
#[derive(Debug, Clone, Copy)]
pub struct MessageOut<'a> {
    pub key: [u8; KEY_BYTES],
    pub value: &'a [u8],
    pub sequence: u32,
    /// Units to send; raised to what `value` needs (so 0 or 1 means "as few as possible").
    /// A search sets it above 1 to make room for a long value in the reply.
    pub length: u8,
    pub source: u8,
    pub destination: u8,
    pub opcode: u8,
}

/// Appends one message; `None` (nothing written) if the value needs more than 255 units.
pub fn encode_message(size: MessageSize, m: &MessageOut<'_>, out: &mut Vec<u8>) -> Option<usize> {
    let length = size.units_for(m.value.len())?.max(m.length);
    let u = size.unit_bytes();
    let start = out.len();
    let head = size.value_head_bytes().min(m.value.len());
    if length == 1 {
        // The common case, one unit: assembled on the stack and appended with one copy.
        let mut unit = [0u8; 64];
        unit[..KEY_BYTES].copy_from_slice(&m.key);
        unit[KEY_BYTES..KEY_BYTES + head].copy_from_slice(&m.value[..head]);
        unit[u - 8..u - 4].copy_from_slice(&m.sequence.to_le_bytes());
        unit[u - 4..u].copy_from_slice(&[length, m.source, m.destination, m.opcode]);
        // Constant lengths, so the copy is a few moves rather than a call.
        match size {
            MessageSize::B32 => out.extend_from_slice(&unit[..32]),
            MessageSize::B64 => out.extend_from_slice(&unit),
        }
        return Some(u);
    }
    out.extend_from_slice(&m.key);
    out.extend_from_slice(&m.value[..head]);
    out.resize(start + u - 8, 0);
    out.extend_from_slice(&m.sequence.to_le_bytes());
    out.extend_from_slice(&[length, m.source, m.destination, m.opcode]);
    out.extend_from_slice(&m.value[head..]);
    out.resize(start + length as usize * u, 0);
    Some(out.len() - start)
}

/// Key bytes for a 96-bit key given as the seed's three `u32` parameters (little-endian).
pub fn key_from_parameters(p: [u32; 3]) -> [u8; KEY_BYTES] {
    let mut k = [0u8; KEY_BYTES];
    for (i, w) in p.iter().enumerate() {
        k[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(key: u8) -> MessageOut<'static> {
        MessageOut {
            key: [key; 12],
            value: &[],
            sequence: key as u32,
            length: 1,
            source: 1,
            destination: 2,
            opcode: Opcode::Search as u8,
        }
    }

    #[test]
    fn seed_arithmetic_holds() {
        let l = OcsmLimits::DEFAULT;
        assert_eq!(l.messages_per_datagram_max(MessageSize::B32), 45);
        assert_eq!(l.messages_per_datagram_max(MessageSize::B64), 22);
        assert_eq!(MessageSize::B32.value_head_bytes() * 8, 96);
        assert_eq!(MessageSize::B64.value_head_bytes() * 8, 352);
        assert_eq!(MessageSize::B32.units_for(12), Some(1));
        assert_eq!(MessageSize::B32.units_for(13), Some(2));
        assert_eq!(MessageSize::B32.units_for(44), Some(2));
        assert_eq!(MessageSize::B32.units_for(45), Some(3));
    }

    #[test]
    fn full_datagram_of_searches_round_trips() {
        let mut d = Vec::new();
        let h = Header {
            sequence: 0x12_3456,
            response: false,
            size: MessageSize::B32,
            kind: Kind::Search,
            count: 45,
        };
        encode_header(&h, &mut d);
        for k in 0..45 {
            encode_message(MessageSize::B32, &search(k), &mut d).unwrap();
        }
        assert_eq!(d.len(), 6 + 45 * 32);
        let got = decode_request(&d, &OcsmLimits::DEFAULT).unwrap();
        assert_eq!(got.header, h);
        let keys: Vec<u8> = got.messages().map(|m| m.key[0]).collect();
        assert_eq!(keys, (0..45).collect::<Vec<u8>>());
    }

    #[test]
    fn mixed_and_malformed_datagrams_get_their_codes() {
        let lim = OcsmLimits::DEFAULT;
        let mut d = Vec::new();
        encode_header(
            &Header {
                sequence: 7,
                response: false,
                size: MessageSize::B32,
                kind: Kind::Search,
                count: 2,
            },
            &mut d,
        );
        encode_message(MessageSize::B32, &search(1), &mut d).unwrap();
        let mut ins = search(2);
        ins.opcode = Opcode::Insert as u8;
        encode_message(MessageSize::B32, &ins, &mut d).unwrap();
        let e = decode_request(&d, &lim).unwrap_err();
        assert_eq!(
            (e.code, e.sequence, e.message),
            (ErrorCode::Mixed, 7, Some(1))
        );
        assert_eq!(
            decode_request(&d[..d.len() - 1], &lim).unwrap_err().code,
            ErrorCode::Truncated
        );
        assert_eq!(
            decode_request(&d[..5], &lim).unwrap_err().code,
            ErrorCode::ShortHeader
        );
        let mut long = d.clone();
        long.push(0);
        assert_eq!(
            decode_request(&long, &lim).unwrap_err().code,
            ErrorCode::Mixed,
            "the first bad message is reported before trailing bytes"
        );
    }
}
