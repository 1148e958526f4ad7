//! Packing (`spec/DATASET.md` section 7.4): a consumer's sequences grouped
//! best-fit into bins of a row (token) budget, optionally `R` bins of `L`
//! rows per mini-batch, and the variable-length views training kernels take
//! (`cu_seqlens`, `max_seqlen`, `position_ids`).
//!
//! Packing is a stage over a consumer's stream of sequences (what a
//! [`Loader`](super::Loader) without packing delivers, read in windows of
//! `buffer` sequences): it reads a window as one mini-batch, packs it, and
//! keeps the state of the stream at the window's start, so that resuming
//! reads that window again. A [`Loader`](super::Loader) packs when its
//! [`LoaderOptions::packing`](super::LoaderOptions::packing) says so.
//!
//! | file | what |
//! |------|------|
//! | `plan.rs` | best-fit decreasing, a window's bins and carry, the check of a saved window |
//! | `window.rs` | the stage: windows read from the stream, packed, gathered, resumed |
//! | `equal.rs` | equal mini-batch counts per consumer (section 7.4, "Equal counts") |
//! | `elastic.rs` | resuming packing on another number of consumers |
//! | `truncate.rs` | cutting sequences longer than a bin |
//! | `batch.rs` | [`PackedBatch`] and the varlen views (`cu_seqlens`, …) |
//!
//! Why an option of its own and not a third [`Batching`](super::Batching) variant (or an
//! option of [`Batching::Rows`](super::Batching::Rows)): `Rows` groups sequences *in order* and
//! its state is a count of sequences, which packing cannot keep (it reorders
//! within a window, and its position is a window, a carry and a count of
//! mini-batches: a version-2 state). As a stage over a stream of windows it
//! leaves the loader's order, partitions and prefetch thread untouched, and
//! any source that yields windows of whole sequences with ids, a state at
//! each window's start that resumes there, and random access by id (for the
//! carry) can be packed the same way.

mod batch;
mod elastic;
mod equal;
mod plan;
mod truncate;
mod window;

pub use batch::{BINS_KEY, PackedBatch, Varlen, row_cu_seqlens, varlen};
pub use plan::best_fit;
pub use truncate::TRUNCATED_KEY;
pub(crate) use window::Packer;

use super::error::{DatasetError, Result};
use super::feed::Feed;
use super::options::{LoaderOptions, PackOptions};
use super::state::{Base, LoaderState, check_state};

/// The base (frontier and skip list of `feed`'s epoch order) that leaves
/// exactly the sequences the consumers of `state`, a complete packing
/// state saved with `pack`, did not deliver.
pub(crate) fn undelivered_base(
    feed: &Feed,
    options: &LoaderOptions,
    state: &LoaderState,
    pack: &PackOptions,
) -> Result<Base> {
    let (tensor, name) = window::resolve(feed, pack)?;
    let Some(p) = &state.packing else {
        return Err(DatasetError::BadState {
            reason: "the state is not a packing loader's (it has no `packing`)".into(),
        });
    };
    let mine = (
        pack.capacity,
        pack.rows,
        pack.buffer,
        name.as_str(),
        pack.truncate,
    );
    if p.options() != mine {
        return Err(DatasetError::BadState {
            reason: format!(
                "it was saved with packing (capacity, rows, buffer, tensor, truncate) {:?}, the options say {mine:?}",
                p.options()
            ),
        });
    }
    check_state(feed, options, state)?;
    let plain = elastic::unpack_state(feed, state, p, pack, tensor)?;
    Ok(Base {
        frontier: plain.frontier,
        skip: plain.skip,
    })
}
