//! Megatron indexed datasets: the layout byte for byte, round trips,
//! zero-copy reads, conversion, and hostile index files.
mod megatron_files;
mod megatron_hostile;
