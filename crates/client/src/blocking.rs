//! The blocking client: the async client driven by a current-thread tokio runtime it owns,
//! as reqwest's blocking client does.
//!
//! ```text
//!   BlockingClient { rt: current-thread runtime, inner: Client }
//!     method(..)  ==  rt.block_on(inner.method(..))        on the caller's thread
//! ```
//!
//! Goals: the same methods, batches, time-outs and errors as `Client`, with no thread of its
//! own. Non-goals: calling it from inside an async runtime (tokio refuses to block there; use
//! `Client`).

use std::ops::{Deref, DerefMut};

use directkv_proto::native::{ElemCode, NativeLimits, ShardMap};
use tokio::runtime::Runtime;

use crate::batch::Batch;
use crate::client::{CasOutcome, Client};
use crate::config::ClientConfig;
use crate::error::ClientError;
use crate::reply::Replies;

/// A blocking directkv client.
pub struct BlockingClient {
    rt: Runtime,
    inner: Client,
}

/// Generates blocking wrappers of `Client`'s single-operation methods.
macro_rules! blocking_methods {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty; )*) => {
        $(
            $(#[$doc])*
            pub fn $name(&mut self, $($arg: $ty),*) -> Result<$ret, ClientError> {
                self.rt.block_on(self.inner.$name($($arg),*))
            }
        )*
    };
}

impl BlockingClient {
    /// Connects like `Client::connect`, on a runtime of its own.
    pub fn connect(addr: &str, config: ClientConfig) -> Result<BlockingClient, ClientError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let inner = rt.block_on(Client::connect(addr, config))?;
        Ok(BlockingClient { rt, inner })
    }

    pub fn limits(&self) -> &NativeLimits {
        self.inner.limits()
    }

    pub fn shard_map(&self) -> &ShardMap {
        self.inner.shard_map()
    }

    pub fn server_name(&self) -> &str {
        self.inner.server_name()
    }

    pub fn shard_of(&self, key: &[u8]) -> u16 {
        self.inner.shard_of(key)
    }

    /// Starts a batch; add operations through it (it dereferences to `Batch`), then
    /// `execute`.
    pub fn batch(&mut self) -> BlockingBatch<'_> {
        BlockingBatch {
            rt: &self.rt,
            inner: self.inner.batch(),
        }
    }

    blocking_methods! {
        /// The value of `key`, `None` if it does not exist.
        fn get(key: &[u8]) -> Option<Vec<u8>>;
        /// True if `key` exists.
        fn exists(key: &[u8]) -> bool;
        /// Inserts or replaces.
        fn put(key: &[u8], value: &[u8]) -> ();
        /// Inserts only if missing; true if stored.
        fn put_nx(key: &[u8], value: &[u8]) -> bool;
        /// Replaces only if present; true if stored.
        fn put_xx(key: &[u8], value: &[u8]) -> bool;
        /// Deletes `key`; true if it existed.
        fn delete(key: &[u8]) -> bool;
        /// Writes `new` if the value equals `expected`.
        fn cas(key: &[u8], expected: &[u8], new: &[u8]) -> CasOutcome;
        /// `cas` with its status only; true if swapped.
        fn cas_no_return(key: &[u8], expected: &[u8], new: &[u8]) -> bool;
        /// `v = func(v, delta)`; the original value.
        fn update_s2s(key: &[u8], func: u16, elem: ElemCode, delta: &[u8]) -> Vec<u8>;
        fn update_s2s_no_return(key: &[u8], func: u16, elem: ElemCode, delta: &[u8]) -> ();
        /// `e = func(e, delta)` per element; the original vector.
        fn update_s2v(key: &[u8], func: u16, elem: ElemCode, delta: &[u8]) -> Option<Vec<u8>>;
        fn update_s2v_no_return(key: &[u8], func: u16, elem: ElemCode, delta: &[u8]) -> bool;
        /// `e[i] = func(e[i], deltas[i])`; the original vector.
        fn update_v2v(key: &[u8], func: u16, elem: ElemCode, deltas: &[u8]) -> Option<Vec<u8>>;
        fn update_v2v_no_return(key: &[u8], func: u16, elem: ElemCode, deltas: &[u8]) -> bool;
        /// Folds the vector from `sigma`.
        fn reduce(key: &[u8], func: u16, elem: ElemCode, sigma: &[u8]) -> Option<Vec<u8>>;
        /// The elements `e` with `func(e, param)`.
        fn filter(key: &[u8], func: u16, elem: ElemCode, param: &[u8]) -> Option<Vec<u8>>;
        /// Adds to a u64 counter; the value before.
        fn add_u64(key: &[u8], delta: u64) -> u64;
        fn add_u64_no_return(key: &[u8], delta: u64) -> ();
        /// Appends to the value; the new length.
        fn append(key: &[u8], value: &[u8]) -> u64;
        /// Adds to a decimal integer string; the new value.
        fn incr_by(key: &[u8], delta: i64) -> i64;
        /// Adds to a decimal float string; the new value.
        fn incr_by_float(key: &[u8], delta: f64) -> f64;
    }
}

/// A batch of a `BlockingClient`: every `Batch` method to add operations, and a blocking
/// `execute`.
pub struct BlockingBatch<'c> {
    rt: &'c Runtime,
    inner: Batch<'c>,
}

impl BlockingBatch<'_> {
    /// Sends every operation and waits for all results.
    pub fn execute(self) -> Result<Replies, ClientError> {
        self.rt.block_on(self.inner.execute())
    }

    /// `execute` into a `Replies` the caller reuses.
    pub fn execute_into(self, replies: &mut Replies) -> Result<(), ClientError> {
        self.rt.block_on(self.inner.execute_into(replies))
    }
}

impl<'c> Deref for BlockingBatch<'c> {
    type Target = Batch<'c>;
    fn deref(&self) -> &Batch<'c> {
        &self.inner
    }
}

impl<'c> DerefMut for BlockingBatch<'c> {
    fn deref_mut(&mut self) -> &mut Batch<'c> {
        &mut self.inner
    }
}
