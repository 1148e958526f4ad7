//! `lodt::convert` between every pair of formats.

mod convert;
mod convert_matrix;
