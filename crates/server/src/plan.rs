//! A read's worth of commands turned into engine operations, grouped by shard, and the recipe
//! for each command's reply.
//!
//! ```text
//!  commands ──plan──> Pending { per-shard OwnedBatch, op locations, reply recipes }
//!           ──execute (local engine + peers)──> per-shard Results ──recipes──> RESP bytes
//! ```

use directkv_engine::{ElemType, Op, OpError, Results, Status};

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
    /// (shard, index in that shard's batch) of every operation, in plan order.
    pub locs: Vec<(usize, usize)>,
    pub recipes: Vec<Recipe>,
    pub immediate: Vec<u8>,
}

impl Pending {
    pub fn new(shards: usize) -> Pending {
        Pending {
            batches: (0..shards).map(|_| OwnedBatch::default()).collect(),
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
}

/// Results of every shard, indexed by shard.
pub struct Outcome {
    pub per_shard: Vec<Option<Results>>,
}

impl Outcome {
    pub fn get(&self, p: &Pending, op: usize) -> (Status, &[u8]) {
        let (s, i) = p.locs[op];
        match &self.per_shard[s] {
            Some(r) => (r.status(i), r.data(i)),
            None => (
                Status::Error(OpError::UserFunction("shard unavailable")),
                &[],
            ),
        }
    }
}
