//! Datasets: the writer, the loader, packing, mixtures, the spec's vectors and writers killed
//! mid-write.

mod dataset_crash;
mod dataset_index;
mod dataset_loader;
mod dataset_mixture;
mod dataset_mixture_pack;
mod dataset_pack;
mod dataset_pack_equal;
mod dataset_pack_truncate;
mod dataset_vectors;
mod dataset_versions;
mod dataset_writer;
mod loader_cursor;
mod loader_grown;
mod loader_locality;
mod loader_one_type;
mod loader_prefetch_cap;
mod loader_recycling;
mod mixture_evolve;
mod state_check;
