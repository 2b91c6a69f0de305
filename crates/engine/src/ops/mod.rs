//! Atomic and vector operations: element types, function ids, built-in functions, user functions.
mod builtin;
mod elem;
mod ids;
pub(crate) mod kernel;
pub(crate) mod range;
mod registry;

pub use builtin::*;
pub use elem::*;
pub use ids::*;
pub use registry::{FunctionRegistry, RegistryError, UserFunction};
