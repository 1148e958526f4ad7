//! The LoD model: Paddle's acceptance values, properties, zero-width and empty tensors, and
//! slices that share their parent's bytes.

mod core_zero_copy;
mod lod_acceptance;
mod lod_props;
mod zero_width_and_empty;
