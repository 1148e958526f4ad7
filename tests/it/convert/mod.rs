//! `lodt::convert` between every pair of formats.

#[allow(clippy::module_inception)] // the former tests/convert.rs
mod convert;
mod convert_matrix;
mod layouts;
mod mds_files;
mod parquet_dir;
