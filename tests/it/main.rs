//! The integration tests of the `lodt` crate, in one test binary: one link
//! of arrow, parquet (and object_store) for all of them instead of one per
//! file. A folder per concern, a module per former test file; run one with a
//! filter, e.g. `cargo test -p lodt --test it format_vectors`.
//!
//! The tests of a binary run on parallel threads of one process, so a test
//! that changes something process-wide lives in a binary of its own:
//! `tests/append_readers.rs` (the `lodt::format::hooks`),
//! `tests/dataset_memory.rs` (an allocator that counts every thread) and
//! `tests/remote_http.rs` (`fork`). The allocator of this binary counts per
//! thread ([`tracking`]), which the other tests do not notice.

#[path = "../common/mod.rs"]
mod common;
#[path = "../dataset_util/mod.rs"]
mod dataset_util;
#[cfg(feature = "remote")]
#[path = "../remote_util/mod.rs"]
mod remote_util;
mod tracking;

mod arrow;
mod convert;
mod dataset;
mod format;
mod lod;
mod megatron;
mod paddle;
mod remote;
