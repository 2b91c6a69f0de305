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
use std::time::Duration;

use directkv_proto::native::{ElemCode, NativeLimits, ShardMap};
use tokio::runtime::Runtime;

use crate::batch::Batch;
use crate::client::{CasOutcome, Client};
use crate::config::ClientConfig;
use crate::error::ClientError;
use crate::keyspace::{Scan, Ttl};
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
        /// Puts with a deadline in ms since the Unix epoch.
        fn put_with_deadline(key: &[u8], value: &[u8], deadline_ms: u64) -> ();
        /// Puts to expire `ttl` from now.
        fn put_with_ttl(key: &[u8], value: &[u8], ttl: Duration) -> ();
        /// Puts with a deadline under `cond::NX`, `XX` or `ANY`; true if stored.
        fn put_with_deadline_if(key: &[u8], value: &[u8], deadline_ms: u64, condition: u8) -> bool;
        /// Replaces the value, keeping the deadline.
        fn put_keep_deadline(key: &[u8], value: &[u8]) -> ();
        /// Sets an existing key's deadline under `condition`; true if set.
        fn expire(key: &[u8], deadline_ms: u64, condition: u8) -> bool;
        /// Removes the deadline; true if there was one.
        fn persist(key: &[u8]) -> bool;
        /// The deadline and the time left.
        fn ttl(key: &[u8]) -> Ttl;
        /// The type name of the value, `None` if missing.
        fn type_of(key: &[u8]) -> Option<String>;
        /// One page of a scan: the next cursor (0: done) and the keys.
        fn scan_step(cursor: u64, prefix: &[u8], count: u32) -> (u64, Vec<Vec<u8>>);
    }

    /// The keys starting with `prefix`, about `count` fetched a page: every key present for
    /// the whole iteration comes at least once; expired keys never.
    pub fn scan(&mut self, prefix: &[u8], count: u32) -> BlockingScan<'_> {
        BlockingScan {
            client: self,
            scan: Scan::new(prefix, count),
            page: Vec::new().into_iter(),
        }
    }
}

/// The keys of a scan, fetched page by page as the iteration goes (`BlockingClient::scan`).
pub struct BlockingScan<'c> {
    client: &'c mut BlockingClient,
    scan: Scan,
    page: std::vec::IntoIter<Vec<u8>>,
}

impl BlockingScan<'_> {
    /// Where the next page starts (to resume with `Scan::resume` later).
    pub fn cursor(&self) -> u64 {
        self.scan.cursor()
    }
}

impl Iterator for BlockingScan<'_> {
    type Item = Result<Vec<u8>, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(key) = self.page.next() {
                return Some(Ok(key));
            }
            let c = &mut *self.client;
            match c.rt.block_on(self.scan.next_page(&mut c.inner)) {
                Ok(Some(keys)) => self.page = keys.into_iter(),
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
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
