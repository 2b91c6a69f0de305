//! Atomic and vector operations: element types, built-in functions by id, user functions.
pub mod builtin;
pub mod elem;
pub(crate) mod kernel;
pub mod registry;

pub use builtin::*;
pub use elem::ElemType;
pub use registry::{FunctionKind, FunctionRegistry, RegistryError, UserFunction};
