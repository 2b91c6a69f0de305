//! A read's worth of commands turned into engine operations, grouped by shard, and the recipe
//! for each command's reply.
//!
//! ```text
//!  commands ──plan──> Pending { per-shard OwnedBatch, op locations, reply recipes }
//!           ──execute (local engine + peers)──> per-shard Results ──recipes──> RESP bytes
//! ```

use directkv_engine::{ElemType, Engine, Op, OpError, Results, Status};

use crate::batch::{shard_of, OwnedBatch};

/// How a command's reply is made from the results of its operations (`first`, `n`: indices in
/// the pending operation list).
#[derive(Debug, Clone)]
pub enum Recipe {
    /// Bytes already encoded (PING, errors found while parsing arguments, ...).
    Immediate { start: usize, end: usize },
    /// `+OK` (or the operation's error).
    Ok { op: usize },
    /// The value, or null.
    Bulk { op: usize },
    /// `+OK`, or null when a conditional put did not apply.
    OkOrNull { op: usize },
    /// The number of operations that found their key (DEL, EXISTS).
    CountFound { first: usize, n: usize },
    /// An array of values or nulls (MGET).
    Values { first: usize, n: usize },
    /// `+OK` after several puts (MSET).
    AllOk { first: usize, n: usize },
    /// A decimal-string result as an integer (INCR family).
    DecimalInt { op: usize },
    /// The data as a bulk string (INCRBYFLOAT).
    Data { op: usize },
    /// A u64 LE result as an integer (APPEND).
    U64 { op: usize },
    /// The length of the value, 0 if missing (STRLEN).
    Len { op: usize },
    /// One element decoded as a number (DKV.UPDATE, DKV.REDUCE).
    Number { op: usize, elem: ElemType },
    /// Elements decoded as numbers (DKV.VGET, DKV.UPDATEV, DKV.FILTER).
    Numbers { op: usize, elem: ElemType },
    /// `[1|0, current value]` (DKV.CAS).
    Cas { op: usize },
}

#[derive(Default)]
pub struct Pending {
    pub batches: Vec<OwnedBatch>,
    /// Per shard: the results of its last executed batch (`None`: the shard did not answer).
    /// Kept between plans so their buffers are reused; only the shards that had operations
    /// in this plan are read.
    pub results: Vec<Option<Results>>,
    /// (shard, index in that shard's batch) of every operation, in plan order.
    pub locs: Vec<(usize, usize)>,
    pub recipes: Vec<Recipe>,
    pub immediate: Vec<u8>,
}

impl Pending {
    pub fn new(shards: usize) -> Pending {
        Pending {
            batches: (0..shards).map(|_| OwnedBatch::default()).collect(),
            results: (0..shards).map(|_| None).collect(),
            ..Default::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.recipes.is_empty()
    }

    pub fn clear(&mut self) {
        self.batches.iter_mut().for_each(OwnedBatch::clear);
        self.locs.clear();
        self.recipes.clear();
        self.immediate.clear();
    }

    /// Adds an operation; returns its index in the plan.
    pub fn op(&mut self, op: &Op) -> usize {
        let shard = shard_of(op.key, self.batches.len());
        let i = self.batches[shard].push(op);
        self.locs.push((shard, i));
        self.locs.len() - 1
    }

    pub fn next_op(&self) -> usize {
        self.locs.len()
    }

    /// Adds a reply encoded now; `write` appends its bytes.
    pub fn immediate(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.immediate.len();
        write(&mut self.immediate);
        self.recipes.push(Recipe::Immediate {
            start,
            end: self.immediate.len(),
        });
    }

    /// Takes shard `s`'s batch and a results buffer to run it into (the last one, reused).
    pub fn take_for_execution(&mut self, s: usize) -> (OwnedBatch, Results) {
        (
            std::mem::take(&mut self.batches[s]),
            self.results[s].take().unwrap_or_default(),
        )
    }

    /// Puts back what `take_for_execution` took, with the results filled in.
    pub fn executed(&mut self, s: usize, batch: OwnedBatch, results: Results) {
        self.batches[s] = batch;
        self.results[s] = Some(results);
    }

    /// Runs shard `s`'s batch on `engine` (the caller owns that shard).
    pub fn execute_local(&mut self, s: usize, engine: &mut Engine) {
        let mut r = self.results[s].take().unwrap_or_default();
        engine.execute(&self.batches[s].ops(), &mut r);
        self.results[s] = Some(r);
    }

    /// Status and data of planned operation `op`, once its shard's batch ran.
    pub fn result(&self, op: usize) -> (Status, &[u8]) {
        let (s, i) = self.locs[op];
        match &self.results[s] {
            Some(r) => (r.status(i), r.data(i)),
            None => (
                Status::Error(OpError::UserFunction("shard unavailable")),
                &[],
            ),
        }
    }
}
