//! User-defined functions, looked up by function id.
//!
//! What: the `UserFunction` trait that an embedder implements to add an update, reduce or filter
//! function, and the `FunctionRegistry` that maps ids (>= `USER_FUNCTION_ID_MIN`) to them. The
//! registry is filled at server start and then only read, so shards share it behind an `Arc`.
//!
//! Goals: adding a function never means editing the engine; ids below `USER_FUNCTION_ID_MIN` stay
//! reserved for built-ins, so a registration can never shadow one.
//! Non-goals: unregistering or replacing functions while serving, sandboxing (WebAssembly later),
//! and speed parity with built-ins (a user function costs one virtual call per element).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::elem::ElemType;
use super::ids::{builtin_kind, FunctionKind, USER_FUNCTION_ID_MIN};
use crate::error::OpError;

/// A function registered under an id by the embedder. Implement the one method that matches
/// `kind()`; the engine never calls the others.
pub trait UserFunction: Send + Sync {
    /// Human-readable name, for logs and `Debug`.
    fn name(&self) -> &str;

    /// Which operation this function serves; checked before any method is called.
    fn kind(&self) -> FunctionKind;

    /// Update: compute one element, `out = f(cur, delta)`. `cur`, `delta` and `out` are each
    /// `elem.width()` bytes (user functions do not take two-parameter deltas like cas).
    fn update(
        &self,
        elem: ElemType,
        cur: &[u8],
        delta: &[u8],
        out: &mut [u8],
    ) -> Result<(), OpError> {
        let _ = (elem, cur, delta, out);
        Err(OpError::UserFunction(
            "update is not implemented by this function",
        ))
    }

    /// Reduce: fold one element `e` (`elem.width()` bytes) into `acc`, which starts as the
    /// caller's sigma and keeps its length, so an accumulator may be wider than an element.
    fn reduce(&self, elem: ElemType, acc: &mut [u8], e: &[u8]) -> Result<(), OpError> {
        let _ = (elem, acc, e);
        Err(OpError::UserFunction(
            "reduce is not implemented by this function",
        ))
    }

    /// Filter: does element `e` (`elem.width()` bytes) pass, given the caller's `param` as sent?
    fn filter(&self, elem: ElemType, e: &[u8], param: &[u8]) -> Result<bool, OpError> {
        let _ = (elem, e, param);
        Err(OpError::UserFunction(
            "filter is not implemented by this function",
        ))
    }
}

/// Why a function could not be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("function id {id} is reserved for built-ins (user ids start at {min})")]
    IdReserved { id: u16, min: u16 },
    #[error("function id {0} is already registered")]
    IdTaken(u16),
}

/// User functions by id. Cloning shares the functions (each is an `Arc`).
#[derive(Default, Clone)]
pub struct FunctionRegistry {
    functions: HashMap<u16, Arc<dyn UserFunction>>,
}

impl FunctionRegistry {
    /// An empty registry: only built-ins are available.
    pub fn new() -> FunctionRegistry {
        FunctionRegistry::default()
    }

    /// Register `function` under `id`, which must be a user id and not yet taken.
    pub fn register(
        &mut self,
        id: u16,
        function: Arc<dyn UserFunction>,
    ) -> Result<(), RegistryError> {
        if id < USER_FUNCTION_ID_MIN {
            return Err(RegistryError::IdReserved {
                id,
                min: USER_FUNCTION_ID_MIN,
            });
        }
        if self.functions.contains_key(&id) {
            return Err(RegistryError::IdTaken(id));
        }
        self.functions.insert(id, function);
        Ok(())
    }

    /// The user function registered under `id`, if any (never a built-in).
    pub fn get(&self, id: u16) -> Option<&Arc<dyn UserFunction>> {
        self.functions.get(&id)
    }

    /// The kind of function `id`, built-in or user; `None` if no function has that id.
    pub fn kind_of(&self, id: u16) -> Option<FunctionKind> {
        if id < USER_FUNCTION_ID_MIN {
            builtin_kind(id)
        } else {
            self.get(id).map(|function| function.kind())
        }
    }

    /// Number of registered user functions.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// True when no user function is registered.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }
}

impl fmt::Debug for FunctionRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Sorted so that the output is stable across runs (HashMap order is random).
        let mut entries: Vec<(u16, &str)> = self
            .functions
            .iter()
            .map(|(id, function)| (*id, function.name()))
            .collect();
        entries.sort_unstable_by_key(|(id, _)| *id);
        f.debug_map().entries(entries).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ids::{FN_ADD, FN_EQ, FN_SUM};

    struct Named(&'static str, FunctionKind);

    impl UserFunction for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn kind(&self) -> FunctionKind {
            self.1
        }
    }

    fn named(name: &'static str, kind: FunctionKind) -> Arc<dyn UserFunction> {
        Arc::new(Named(name, kind))
    }

    #[test]
    fn register_and_get() {
        let mut reg = FunctionRegistry::new();
        assert!(reg.is_empty());
        reg.register(USER_FUNCTION_ID_MIN, named("clamp", FunctionKind::Update))
            .unwrap();
        reg.register(2000, named("product", FunctionKind::Reduce))
            .unwrap();
        assert_eq!(reg.len(), 2);
        assert_eq!(reg.get(USER_FUNCTION_ID_MIN).unwrap().name(), "clamp");
        assert_eq!(reg.get(2000).unwrap().name(), "product");
        assert!(reg.get(2001).is_none());
        assert!(
            reg.get(FN_ADD).is_none(),
            "built-ins are not in the registry"
        );
    }

    #[test]
    fn rejects_reserved_ids() {
        let mut reg = FunctionRegistry::new();
        for id in [0, FN_ADD, FN_SUM, FN_EQ, 500, USER_FUNCTION_ID_MIN - 1] {
            let err = reg
                .register(id, named("x", FunctionKind::Update))
                .unwrap_err();
            assert_eq!(
                err,
                RegistryError::IdReserved {
                    id,
                    min: USER_FUNCTION_ID_MIN
                }
            );
        }
        assert!(reg.is_empty());
    }

    #[test]
    fn rejects_duplicates_and_keeps_the_first() {
        let mut reg = FunctionRegistry::new();
        reg.register(1500, named("first", FunctionKind::Filter))
            .unwrap();
        let err = reg
            .register(1500, named("second", FunctionKind::Update))
            .unwrap_err();
        assert_eq!(err, RegistryError::IdTaken(1500));
        assert_eq!(reg.get(1500).unwrap().name(), "first");
        assert_eq!(reg.kind_of(1500), Some(FunctionKind::Filter));
    }

    #[test]
    fn kind_of_covers_builtins_and_user_functions() {
        let mut reg = FunctionRegistry::new();
        reg.register(1024, named("is_even", FunctionKind::Filter))
            .unwrap();
        assert_eq!(reg.kind_of(FN_ADD), Some(FunctionKind::Update));
        assert_eq!(reg.kind_of(FN_SUM), Some(FunctionKind::Reduce));
        assert_eq!(reg.kind_of(FN_EQ), Some(FunctionKind::Filter));
        assert_eq!(reg.kind_of(1024), Some(FunctionKind::Filter));
        assert_eq!(reg.kind_of(13), None);
        assert_eq!(reg.kind_of(1025), None);
    }

    #[test]
    fn default_methods_report_not_implemented() {
        let f = Named("filter_only", FunctionKind::Filter);
        let mut out = [0u8; 1];
        let mut acc = [0u8; 1];
        assert!(matches!(
            f.update(ElemType::U8, &[1], &[2], &mut out),
            Err(OpError::UserFunction(_))
        ));
        assert!(matches!(
            f.reduce(ElemType::U8, &mut acc, &[1]),
            Err(OpError::UserFunction(_))
        ));
        assert!(matches!(
            f.filter(ElemType::U8, &[1], &[]),
            Err(OpError::UserFunction(_))
        ));
    }

    #[test]
    fn debug_lists_ids_in_order() {
        let mut reg = FunctionRegistry::new();
        reg.register(3000, named("b", FunctionKind::Reduce))
            .unwrap();
        reg.register(1024, named("a", FunctionKind::Update))
            .unwrap();
        assert_eq!(format!("{reg:?}"), r#"{1024: "a", 3000: "b"}"#);
        let shared = reg.clone();
        assert_eq!(shared.len(), 2);
    }
}
