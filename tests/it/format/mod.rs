//! `.lodt` files: round trips, format 2.0, the spec's test vectors, hostile and damaged files,
//! gathers, pipes and the writer's bytes.

mod checked_reads;
mod fifo_inputs;
mod format_gather;
mod format_hostile;
mod format_reliability;
mod format_roundtrip;
mod format_v2;
mod format_v2_hostile;
mod format_vectors;
mod format_writer_bytes;
mod many_tensors;
