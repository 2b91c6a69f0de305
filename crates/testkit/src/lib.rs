//! Test helpers shared by every crate of the workspace and by `fuzz/` (a dev-dependency only;
//! never published, never linked into the server or the client).
//!
//! Goals: one copy of each thing a test suite needs more than once, so a fix to a helper reaches
//! every test that uses it. Non-goals: assertions about a crate's behaviour (those stay in the
//! crate's own tests) and anything timed.
//!
//! | module    | feature  | what it holds |
//! |-----------|----------|---------------|
//! | `alloc`   | (always) | a counting global allocator and `assert_no_alloc` (STYLE habit 4) |
//! | `vectors` | (always) | the record parser of the `tests/vectors/*.txt` files, hex helpers |
//! | `raw`     | (always) | raw RESP replies: a frame splitter that does not interpret types, a client returning each reply's bytes |
//! | `peer`    | (always) | `require_peer`: a missing redis-server, memcached, ... skips, or fails under `DIRECTKV_REQUIRE_PEERS`/`CI` |
//! | `model`   | `model`  | SPEC section 1 applied one operation at a time to a `HashMap` |
//! | `mc_model` | `model` | memcache items (flags, CAS, deadline) over `model`, for the engine's memcache tests |
//! | `server`  | `server` | an in-process server on an ephemeral loopback port, metrics scraping, a tiny RESP client |
//!
//! Features keep a crate's tests from building what they do not use: the engine's tests need
//! the model but not the server.

pub mod alloc;
pub mod peer;
pub mod raw;
pub mod vectors;

#[cfg(feature = "model")]
pub mod model;

#[cfg(feature = "model")]
pub mod mc_model;

#[cfg(feature = "server")]
pub mod server;
