//! Arrow and Parquet: round trips, zero copy, pyarrow's files and reader, requested schemas,
//! and hostile foreign input.

mod arrow_edge;
mod arrow_fixtures;
mod arrow_mmap;
pub(crate) mod arrow_pyarrow;
mod arrow_requested;
mod arrow_roundtrip;
mod arrow_zero_copy;
mod foreign_hostile;
mod parquet_decode_budget;
