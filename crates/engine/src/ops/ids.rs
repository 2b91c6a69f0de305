//! Function ids: the fixed numbers of the wire protocol, their kinds and names. A leaf that both
//! the built-in functions (`builtin.rs`) and the user function registry (`registry.rs`) import,
//! so neither imports the other for them.
//!
//! ```text
//!   0..      update functions   (add, sub, ..., div)
//!   32..     reduce functions   (sum, min, max, count, count_nonzero)
//!   64..     filter functions   (eq, ne, lt, le, gt, ge, nonzero)
//!   1024..   user functions, registered in a `FunctionRegistry`
//! ```
//!
//! Adding a built-in means an id and a row of `BUILTINS` here, and its kernel in `builtin.rs`.

/// Which public operation a function can be used with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionKind {
    /// `update_scalar2scalar`, `update_scalar2vector`, `update_vector2vector`.
    Update,
    /// `reduce`.
    Reduce,
    /// `filter`.
    Filter,
}

// Update functions: scalar2scalar, scalar2vector, vector2vector.
pub const FN_ADD: u16 = 0;
pub const FN_SUB: u16 = 1;
pub const FN_MUL: u16 = 2;
pub const FN_MIN: u16 = 3;
pub const FN_MAX: u16 = 4;
pub const FN_AND: u16 = 5;
pub const FN_OR: u16 = 6;
pub const FN_XOR: u16 = 7;
/// Set: the result is the delta.
pub const FN_SWAP: u16 = 8;
/// Two parameters: the delta is `expected ++ new`; an element equal to `expected` becomes `new`.
pub const FN_CAS: u16 = 9;
pub const FN_SAT_ADD: u16 = 10;
pub const FN_SAT_SUB: u16 = 11;
/// Integer division by zero is `DivisionByZero`; floats follow IEEE 754.
pub const FN_DIV: u16 = 12;

// Reduce functions.
pub const FN_SUM: u16 = 32;
pub const FN_RMIN: u16 = 33;
pub const FN_RMAX: u16 = 34;
/// Sigma and result are u64 LE whatever the element type.
pub const FN_COUNT: u16 = 35;
/// Sigma and result are u64 LE whatever the element type.
pub const FN_COUNT_NONZERO: u16 = 36;

// Filter functions.
pub const FN_EQ: u16 = 64;
pub const FN_NE: u16 = 65;
pub const FN_LT: u16 = 66;
pub const FN_LE: u16 = 67;
pub const FN_GT: u16 = 68;
pub const FN_GE: u16 = 69;
pub const FN_NONZERO: u16 = 70;

/// Ids from here up belong to the `FunctionRegistry`; ids below are built-in or unassigned.
pub const USER_FUNCTION_ID_MIN: u16 = 1024;

/// Every built-in: id, kind, name. Names are unique within a kind only (reduce has "min", too).
const BUILTINS: [(u16, FunctionKind, &str); 25] = [
    (FN_ADD, FunctionKind::Update, "add"),
    (FN_SUB, FunctionKind::Update, "sub"),
    (FN_MUL, FunctionKind::Update, "mul"),
    (FN_MIN, FunctionKind::Update, "min"),
    (FN_MAX, FunctionKind::Update, "max"),
    (FN_AND, FunctionKind::Update, "and"),
    (FN_OR, FunctionKind::Update, "or"),
    (FN_XOR, FunctionKind::Update, "xor"),
    (FN_SWAP, FunctionKind::Update, "swap"),
    (FN_CAS, FunctionKind::Update, "cas"),
    (FN_SAT_ADD, FunctionKind::Update, "sat_add"),
    (FN_SAT_SUB, FunctionKind::Update, "sat_sub"),
    (FN_DIV, FunctionKind::Update, "div"),
    (FN_SUM, FunctionKind::Reduce, "sum"),
    (FN_RMIN, FunctionKind::Reduce, "min"),
    (FN_RMAX, FunctionKind::Reduce, "max"),
    (FN_COUNT, FunctionKind::Reduce, "count"),
    (FN_COUNT_NONZERO, FunctionKind::Reduce, "count_nonzero"),
    (FN_EQ, FunctionKind::Filter, "eq"),
    (FN_NE, FunctionKind::Filter, "ne"),
    (FN_LT, FunctionKind::Filter, "lt"),
    (FN_LE, FunctionKind::Filter, "le"),
    (FN_GT, FunctionKind::Filter, "gt"),
    (FN_GE, FunctionKind::Filter, "ge"),
    (FN_NONZERO, FunctionKind::Filter, "nonzero"),
];

/// The kind of built-in `id`, or `None` if no built-in has that id.
pub fn builtin_kind(id: u16) -> Option<FunctionKind> {
    match id {
        FN_ADD..=FN_DIV => Some(FunctionKind::Update),
        FN_SUM..=FN_COUNT_NONZERO => Some(FunctionKind::Reduce),
        FN_EQ..=FN_NONZERO => Some(FunctionKind::Filter),
        _ => None,
    }
}

/// The name of built-in `id` ("add", "sum", "eq", ...).
pub fn builtin_name(id: u16) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(i, _, _)| *i == id)
        .map(|(_, _, name)| *name)
}

/// The id of the built-in of `kind` called `name`; "set" is accepted for swap.
pub fn builtin_by_name(kind: FunctionKind, name: &str) -> Option<u16> {
    if kind == FunctionKind::Update && name == "set" {
        return Some(FN_SWAP);
    }
    BUILTINS
        .iter()
        .find(|(_, k, n)| *k == kind && *n == name)
        .map(|(id, _, _)| *id)
}

/// Number of elements in one delta of update function `func`: 2 for cas, else 1.
pub const fn delta_elems(func: u16) -> usize {
    if func == FN_CAS {
        2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_round_trip() {
        for (id, kind, name) in BUILTINS {
            assert_eq!(builtin_kind(id), Some(kind), "{name}");
            assert_eq!(builtin_name(id), Some(name));
            assert_eq!(builtin_by_name(kind, name), Some(id));
        }
        let listed = |id| BUILTINS.iter().any(|(i, _, _)| *i == id);
        for id in 0..USER_FUNCTION_ID_MIN {
            assert_eq!(builtin_kind(id).is_some(), listed(id), "id {id}");
        }
        assert_eq!(builtin_by_name(FunctionKind::Reduce, "min"), Some(FN_RMIN));
        assert_eq!(builtin_by_name(FunctionKind::Update, "min"), Some(FN_MIN));
        assert_eq!(builtin_by_name(FunctionKind::Update, "set"), Some(FN_SWAP));
        assert_eq!(builtin_by_name(FunctionKind::Reduce, "add"), None);
        assert_eq!(builtin_by_name(FunctionKind::Filter, "sum"), None);
        assert_eq!(builtin_name(USER_FUNCTION_ID_MIN), None);
        assert_eq!(delta_elems(FN_CAS), 2);
        assert_eq!(delta_elems(FN_ADD), 1);
    }
}
