//! The integration tests of this crate as one binary (`tests/it`), one module per former
//! `tests/NAME.rs`. In this commit each module is included by `#[path]` so that its own
//! `mod common;` still resolves, and every file is moved unchanged; the next commit shares
//! the helpers from here.

#[path = "native_hostile.rs"]
mod native_hostile;
#[path = "native_no_alloc.rs"]
mod native_no_alloc;
#[path = "native_props.rs"]
mod native_props;
#[path = "native_vectors.rs"]
mod native_vectors;
#[path = "ocsm_props.rs"]
mod ocsm_props;
#[path = "ocsm_vectors.rs"]
mod ocsm_vectors;
#[path = "resp_props.rs"]
mod resp_props;
#[path = "resp_resume.rs"]
mod resp_resume;
#[path = "resp_vectors.rs"]
mod resp_vectors;
