//! WATCH: the keys connections watch, per shard, and the one write hook that marks their
//! transactions dirty (issue 20 item 4). A transaction whose watched key changed between WATCH
//! and EXEC (a write by anyone, the watching client included, a delete, a FLUSHALL) is not run:
//! EXEC answers a null array.
//!
//! ```text
//!   connection (any shard)            Tables: one Table per shard
//!     WATCH k ──shard_of(k)──lock──>  Table { watched: count, keys: k -> [Watcher, ...] }
//!                                         ^
//!   ShardCtx::execute(ops) ──touched──────┘ only when `watched` > 0: for every write that
//!                                           changed its key, each watcher of it turns dirty
//!   EXEC: every shard of the transaction's keys and of its watched keys is parked
//!         (shard/atomic.rs), then Watcher::is_dirty decides: no write can slip in between
//! ```
//!
//! Why a table per shard behind a mutex rather than a message to the key's shard: WATCH is
//! answered once the key is in the table, so any write that runs on that shard after the reply
//! sees it, with no extra round trip. The shard's own thread takes the lock only while some
//! key of that shard is watched (`watched` > 0), so a server where nobody watches pays one
//! atomic load per executed batch.
//!
//! Which writes count: an operation that is not a read (get, reduce, filter) and whose status
//! is `Ok`, i.e. that changed its key, as Redis signals a key only when it was modified: a DEL
//! of a missing key, a SET NX on an existing one or an INCR of a non-number leave watchers
//! alone. Expiry counts too, as in Redis 7: the engine reports every key it removed for its
//! deadline (a lookup that found it expired, or the sweep: `Engine::reclaimed_keys`) and the
//! same two doors hand them to [`Table::expired`]. A watched key that is past its deadline
//! but not yet removed is removed by EXEC itself: `resp/multi.rs` looks every watched key up
//! before it decides (and WATCH does before it watches, so that a key already expired at
//! WATCH does not abort the transaction when it is reclaimed, as in Redis). A flush marks every watcher of the shard dirty (Redis marks only the watched keys
//! that existed; directkv errs on the side of an aborted transaction, which a client retries).
//!
//! Non-goals: watching in other protocols (native, OCSM) – they have no transactions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use directkv_engine::{Op, Results, Status};

/// What a watched key costs in its shard's table besides its bytes (the map's slot, a vector
/// of one `Arc`, allocator rounding): an estimate, for the accounting of client memory.
const TABLE_ENTRY_BYTES: usize = 96;

/// One connection's watch: dirty once any key it watches was changed.
#[derive(Debug, Default)]
pub(crate) struct Watcher {
    dirty: AtomicBool,
}

impl Watcher {
    /// Whether a watched key changed since the watch began. Read by EXEC while every shard
    /// of its watched keys is parked: their writes happened-before the park's answer.
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    fn touch(&self) {
        self.dirty.store(true, Ordering::Release);
    }
}

/// The watched keys of every shard of a server.
pub(crate) struct Tables {
    shards: Vec<Table>,
}

/// Every watched key of a shard and who watches it.
type KeyWatchers = HashMap<Box<[u8]>, Vec<Arc<Watcher>>>;

/// The watched keys of one shard.
#[derive(Default)]
pub(crate) struct Table {
    /// Entries (key, watcher) in `keys`; 0 lets the write path skip the lock.
    watched: AtomicUsize,
    keys: Mutex<KeyWatchers>,
}

impl Tables {
    pub(crate) fn new(shards: usize) -> Tables {
        Tables {
            shards: (0..shards).map(|_| Table::default()).collect(),
        }
    }

    pub(crate) fn shard(&self, s: usize) -> &Table {
        &self.shards[s]
    }
}

impl Table {
    /// The write hook: called by `ShardCtx::execute` after every batch.
    #[inline]
    pub(crate) fn touched(&self, ops: &[Op<'_>], results: &Results) {
        if self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        self.touched_slow(ops, results);
    }

    #[inline(never)]
    fn touched_slow(&self, ops: &[Op<'_>], results: &Results) {
        let keys = self.lock();
        for (i, op) in ops.iter().enumerate() {
            if !op.acknowledges_a_write() || results.status(i) != Status::Ok {
                continue;
            }
            if let Some(watchers) = keys.get(op.key) {
                watchers.iter().for_each(|w| w.touch());
            }
        }
    }

    /// The expiry hook: called by `ShardCtx::execute` and `ShardCtx::sweep_step` with the keys
    /// the engine removed because their deadline had passed (`Engine::reclaimed_keys`).
    #[inline]
    pub(crate) fn expired<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        if self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut keys = keys.peekable();
        if keys.peek().is_none() {
            return;
        }
        let table = self.lock();
        for key in keys {
            if let Some(watchers) = table.get(key) {
                watchers.iter().for_each(|w| w.touch());
            }
        }
    }

    /// The flush hook: every key of the shard is gone.
    pub(crate) fn flushed(&self) {
        if self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        for watchers in self.lock().values() {
            watchers.iter().for_each(|w| w.touch());
        }
    }

    /// A panic while the lock was held cannot leave the map half changed (each change is one
    /// insert or remove), so a poisoned lock is used as it is.
    fn lock(&self) -> MutexGuard<'_, KeyWatchers> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, key: &[u8], w: &Arc<Watcher>) {
        let mut keys = self.lock();
        keys.entry(key.into()).or_default().push(w.clone());
        self.watched.fetch_add(1, Ordering::Release);
    }

    fn remove(&self, key: &[u8], w: &Arc<Watcher>) {
        let mut keys = self.lock();
        let Some(watchers) = keys.get_mut(key) else {
            return;
        };
        let Some(at) = watchers.iter().position(|x| Arc::ptr_eq(x, w)) else {
            return;
        };
        watchers.swap_remove(at);
        if watchers.is_empty() {
            keys.remove(key);
        }
        self.watched.fetch_sub(1, Ordering::Release);
    }

    /// Entries in the table (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.watched.load(Ordering::Acquire)
    }
}

/// One connection's watched keys; dropping it (the connection closed) unwatches them all.
pub(crate) struct Watches {
    tables: Arc<Tables>,
    watcher: Arc<Watcher>,
    /// (shard, key) of every watched key, each once.
    keys: Vec<(usize, Box<[u8]>)>,
    key_bytes: usize,
}

impl Watches {
    pub(crate) fn new(tables: Arc<Tables>) -> Watches {
        Watches {
            tables,
            watcher: Arc::default(),
            keys: Vec::new(),
            key_bytes: 0,
        }
    }

    /// Watches `key` of shard `shard` (again watching a watched key changes nothing).
    pub(crate) fn watch(&mut self, shard: usize, key: &[u8]) {
        if self.keys.iter().any(|(_, k)| &**k == key) {
            return;
        }
        self.tables.shard(shard).add(key, &self.watcher);
        self.keys.push((shard, key.into()));
        self.key_bytes += key.len();
    }

    /// Keys watched.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The flag a change of a watched key sets (for EXEC to read while the shards are held).
    pub(crate) fn watcher(&self) -> Arc<Watcher> {
        self.watcher.clone()
    }

    /// Whether a watched key changed since it was watched.
    #[cfg(test)]
    fn is_dirty(&self) -> bool {
        self.watcher.is_dirty()
    }

    /// The watched keys.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.keys.iter().map(|(_, k)| &**k)
    }

    /// The shards that own a watched key (each may appear several times).
    pub(crate) fn shards(&self) -> impl Iterator<Item = usize> + '_ {
        self.keys.iter().map(|(s, _)| *s)
    }

    /// Forgets every watched key, and starts clean (UNWATCH, EXEC, DISCARD).
    pub(crate) fn clear(&mut self) {
        for (s, key) in self.keys.drain(..) {
            self.tables.shard(s).remove(&key, &self.watcher);
        }
        self.key_bytes = 0;
        if self.watcher.is_dirty() {
            // Still in tables? No: every entry was just removed, so a fresh flag is safe.
            self.watcher = Arc::default();
        }
    }

    /// Bytes held for the watched keys, for the accounting of client memory: this list and
    /// the shard tables' copies, with an estimate of a table entry's overhead.
    pub(crate) fn capacity_bytes(&self) -> usize {
        2 * self.key_bytes
            + self.keys.capacity() * size_of::<(usize, Box<[u8]>)>()
            + self.keys.len() * TABLE_ENTRY_BYTES
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use directkv_engine::{Engine, EngineConfig};

    /// Runs `ops` on `e` and hands them to the hook, as `ShardCtx::execute` does.
    fn run(e: &mut Engine, t: &Table, ops: &[Op<'_>]) {
        let mut r = Results::default();
        e.execute(ops, &mut r);
        t.touched(ops, &r);
        t.expired(e.reclaimed_keys());
    }

    #[test]
    fn a_change_marks_only_its_watchers_and_reads_mark_none() {
        let mut e = Engine::new(EngineConfig::with_memory(
            directkv_engine::engine::MEMORY_BYTES_MIN,
        ))
        .unwrap();
        let tables = Arc::new(Tables::new(2));
        let mut a = Watches::new(tables.clone());
        let mut b = Watches::new(tables.clone());
        a.watch(0, b"k");
        b.watch(0, b"other");
        let t = tables.shard(0);
        run(&mut e, t, &[Op::put(b"k", b"v")]);
        assert!(a.is_dirty(), "a put changes the key");
        a.clear();
        a.watch(0, b"k");
        run(&mut e, t, &[Op::get(b"k")]);
        run(&mut e, t, &[Op::delete(b"missing"), Op::put_nx(b"k", b"w")]);
        run(&mut e, t, &[Op::incr_by(b"k", &1i64.to_le_bytes())]);
        assert!(
            !a.is_dirty(),
            "a read, a no-op delete, a refused NX and a failed INCR"
        );
        run(&mut e, t, &[Op::delete(b"k")]);
        assert!(a.is_dirty());
        assert!(!b.is_dirty());
        tables.shard(0).flushed();
        assert!(b.is_dirty());
    }

    #[test]
    fn expiry_marks_watchers_whether_a_lookup_or_the_sweep_removes_the_key() {
        let mut e = Engine::new(EngineConfig::with_memory(
            directkv_engine::engine::MEMORY_BYTES_MIN,
        ))
        .unwrap();
        let tables = Arc::new(Tables::new(1));
        let t = tables.shard(0);
        e.set_now(1_000);
        let at = |ms: u64| directkv_engine::expire_args(ms, directkv_engine::cond::ANY);
        let (a2, a3) = (at(2_000), at(3_000));
        run(&mut e, t, &[Op::put_expire(b"lazy", b"v", &a2)]);
        run(&mut e, t, &[Op::put_expire(b"swept", b"v", &a3)]);
        run(&mut e, t, &[Op::put_expire(b"other", b"v", &a2)]);
        let mut lazy = Watches::new(tables.clone());
        let mut swept = Watches::new(tables.clone());
        lazy.watch(0, b"lazy");
        swept.watch(0, b"swept");
        e.set_now(2_500);
        run(&mut e, t, &[Op::get(b"other"), Op::get(b"swept")]);
        assert!(!lazy.is_dirty() && !swept.is_dirty(), "another key expired");
        run(&mut e, t, &[Op::get(b"lazy").no_return()]);
        assert!(lazy.is_dirty(), "a lookup removed the expired key");
        assert!(!swept.is_dirty());
        e.set_now(3_000);
        let mut cursor = 0;
        loop {
            cursor = e.expire_step(cursor, 64).0;
            t.expired(e.reclaimed_keys());
            if cursor == 0 {
                break;
            }
        }
        assert!(swept.is_dirty(), "the sweep removed the expired key");
    }

    #[test]
    fn clear_and_drop_leave_the_tables_empty() {
        let tables = Arc::new(Tables::new(2));
        let mut a = Watches::new(tables.clone());
        a.watch(0, b"k");
        a.watch(0, b"k");
        a.watch(1, b"j");
        assert_eq!((tables.shard(0).len(), tables.shard(1).len()), (1, 1));
        a.clear();
        assert_eq!((tables.shard(0).len(), tables.shard(1).len()), (0, 0));
        {
            let mut b = Watches::new(tables.clone());
            b.watch(1, b"j");
            let mut c = Watches::new(tables.clone());
            c.watch(1, b"j");
            assert_eq!(tables.shard(1).len(), 2);
        }
        assert_eq!(tables.shard(1).len(), 0);
    }
}
