//! The tests of the `lodt` command, in one test binary (one link instead of
//! one per file), a module per former test file; run one with a filter, e.g.
//! `cargo test -p lodt-cli --test it cli_convert`. They run the `lodt` binary
//! as a child process; `concurrent_append` also re-runs this test binary as
//! its writers (its `child` test).

#[path = "../../../tests/dataset_util/mod.rs"]
mod dataset_util;
#[path = "../../../tests/remote_util/mod.rs"]
mod remote_util;

mod cli;
mod cli_bounded;
mod cli_convert;
mod cli_convert_options;
mod cli_dataset;
mod cli_fifo;
mod cli_hostile_names;
mod cli_inspect;
mod cli_remote;
mod cli_versions;
mod concurrent_append;
mod file_size_limit;
mod foreign_cli;
mod newcomer;
mod range_source;
mod safe_writes;
