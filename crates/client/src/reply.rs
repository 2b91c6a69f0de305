//! Per-operation results of a batch, kept in one reusable buffer.
//!
//! ```text
//!   Replies { data: [ value 0 | value 3 | current 5 ... ]      one byte buffer for all data
//!             slots: [ (status, range) per op, in the order the ops were added ] }
//!   replies.get(i) -> Reply<'_>  borrows its bytes from `data`
//! ```
//!
//! Goals: a batch of N results costs no allocation per result (the benchmark reuses one
//! `Replies` for millions of operations); results are typed, so a caller matches on "not
//! found" or "cas mismatch" instead of decoding status bytes.
//! Non-goals: interpreting data (a u64 counter, a vector of f32): the caller knows the types.

use directkv_proto::native::status;

use crate::error::OpError;

/// The result of one operation, borrowing its data from `Replies`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// Success. The data is: GET the value; updates the original value (s2s of a missing key:
    /// zero of the delta's width); reduce the result; filter the matching elements; cas the
    /// value before; empty for put, delete and every no-return operation.
    Ok(&'a [u8]),
    /// The key does not exist (get, delete, put_xx never sees this: it says `NotStored`).
    NotFound,
    /// put_nx on an existing key or put_xx on a missing one.
    NotStored,
    /// cas found another value: the current one (empty when the key is missing).
    CasMismatch(&'a [u8]),
    /// The operation failed; the rest of the batch was executed.
    Error(OpError),
}

impl<'a> Reply<'a> {
    /// The reply of a wire status and its data.
    pub(crate) fn from_wire(status_byte: u8, data: &'a [u8]) -> Reply<'a> {
        match status_byte {
            status::OK => Reply::Ok(data),
            status::NOT_FOUND => Reply::NotFound,
            status::NOT_STORED => Reply::NotStored,
            status::CAS_MISMATCH => Reply::CasMismatch(data),
            s => Reply::Error(OpError {
                code: s & status::ERROR_CODE_MAX,
            }),
        }
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, Reply::Ok(_))
    }

    /// The data of a successful operation.
    pub fn value(&self) -> Option<&'a [u8]> {
        match *self {
            Reply::Ok(d) => Some(d),
            _ => None,
        }
    }

    /// An owned copy.
    pub fn to_owned(&self) -> OwnedReply {
        match *self {
            Reply::Ok(d) => OwnedReply::Ok(d.to_vec()),
            Reply::NotFound => OwnedReply::NotFound,
            Reply::NotStored => OwnedReply::NotStored,
            Reply::CasMismatch(d) => OwnedReply::CasMismatch(d.to_vec()),
            Reply::Error(e) => OwnedReply::Error(e),
        }
    }
}

/// `Reply` with its own bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedReply {
    Ok(Vec<u8>),
    NotFound,
    NotStored,
    CasMismatch(Vec<u8>),
    Error(OpError),
}

/// Where one result is: its status and its data's range in `Replies::data`.
#[derive(Debug, Clone, Copy)]
struct Slot {
    status: u8,
    start: usize,
    end: usize,
}

/// Status of a slot whose result has not arrived (never a wire status: bit 6 is reserved).
const STATUS_PENDING: u8 = 0x7F;

/// The results of a batch, in the order its operations were added.
#[derive(Debug, Default)]
pub struct Replies {
    data: Vec<u8>,
    slots: Vec<Slot>,
}

impl Replies {
    pub fn new() -> Replies {
        Replies::default()
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The result of the operation with index `i` (as returned when it was added).
    /// Panics if `i` is out of range, like slice indexing.
    pub fn get(&self, i: usize) -> Reply<'_> {
        let s = self.slots[i];
        debug_assert_ne!(s.status, STATUS_PENDING, "result {i} never arrived");
        Reply::from_wire(s.status, &self.data[s.start..s.end])
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Reply<'_>> + '_ {
        (0..self.slots.len()).map(|i| self.get(i))
    }

    /// Owned copies of every result.
    pub fn to_vec(&self) -> Vec<OwnedReply> {
        self.iter().map(|r| r.to_owned()).collect()
    }

    /// Empties the container for `n` results, keeping its memory.
    pub(crate) fn reset(&mut self, n: usize) {
        self.data.clear();
        self.slots.clear();
        self.slots.resize(
            n,
            Slot {
                status: STATUS_PENDING,
                start: 0,
                end: 0,
            },
        );
    }

    /// Records the result of operation `i`.
    pub(crate) fn set(&mut self, i: usize, status_byte: u8, data: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(data);
        self.slots[i] = Slot {
            status: status_byte,
            start,
            end: self.data.len(),
        };
    }
}
