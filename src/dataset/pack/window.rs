//! The packing stage over a consumer's stream: reads a window of `buffer`
//! sequences as one mini-batch, packs it, and keeps the stream's state at
//! the window's start, so that resuming reads that window again.

use super::super::error::{DatasetError, Result};
use super::super::feed::Feed;
use super::super::options::{Batching, LoaderOptions, PackOptions};
use super::super::state::{
    LoaderState, PackState, PackWindow, STATE_VERSION, Subject, check_state, check_version,
};
use super::super::stream::{MiniBatch, Stream};
use super::batch::{BINS_KEY, PackedBatch, row_counts};
use super::plan::{check_window, plan_window};
use crate::batch::Batch;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Sequences held as one batch: a window's carry, or its new sequences.
struct Part {
    ids: Vec<u64>,
    batch: Batch,
}

/// The packing stage (see the module docs): a consumer's stream read in
/// windows and packed; what a [`Loader`](super::super::Loader) with
/// [`LoaderOptions::packing`] is.
pub(crate) struct Packer {
    feed: Feed,
    inner: Stream,
    options: PackOptions,
    tensor: usize,
    tensor_name: String,
    /// Equal counts (section 7.4), resolved from the options.
    equal: bool,
    /// This consumer's index.
    consumer: u64,
    /// With `equal`: every sequence's length (by id), read once.
    lengths: Option<Arc<Vec<u32>>>,
    /// With `equal`: this consumer's splits per window of the epoch.
    splits: Option<BTreeMap<u64, usize>>,
    /// The stream's state before the current window's new sequences.
    window_state: LoaderState,
    carry_ids: Vec<u64>,
    delivered: u64,
    /// Mini-batches of the current window to skip (after a resume).
    skip: u64,
    ready: VecDeque<PackedBatch>,
    next_carry: Option<Part>,
    done: bool,
}

impl std::fmt::Debug for Packer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packer")
            .field("options", &self.options)
            .field("inner", &self.inner)
            .field("delivered", &self.delivered)
            .finish()
    }
}

impl Packer {
    /// The packing stage of `feed` for `options`' consumer, packing as
    /// `pack` says, at the start of epoch `epoch` or resumed from `state`
    /// (then `epoch` is the state's).
    pub(crate) fn build(
        feed: Feed,
        mut options: LoaderOptions,
        pack: PackOptions,
        epoch: u64,
        state: Option<&LoaderState>,
    ) -> Result<Self> {
        if pack.capacity == 0 || pack.buffer == 0 || pack.rows == Some(0) {
            return Err(DatasetError::InvalidArgument(format!(
                "packing capacity {}, buffer {}, rows {:?}: each must be at least 1",
                pack.capacity, pack.buffer, pack.rows
            )));
        }
        let (tensor, tensor_name) = resolve(&feed, &pack)?;
        let equal = pack.equal(&options);
        let (_, consumer) = options.consumer()?;
        let shape = Shape {
            tensor,
            tensor_name,
            equal,
            consumer,
        };
        options.batching = Batching::Sequences(pack.buffer);
        options.drop_last = false;
        let (inner, carry_ids, skip) = match state {
            None => (
                Stream::build(feed.clone(), options, epoch, None)?,
                Vec::new(),
                0,
            ),
            Some(state) => {
                let Some(p) = &state.packing else {
                    return Err(DatasetError::BadState {
                        reason: "the state is not a packing loader's (it has no `packing`)".into(),
                    });
                };
                let mine = (
                    pack.capacity,
                    pack.rows,
                    pack.buffer,
                    shape.tensor_name.as_str(),
                    pack.truncate,
                );
                let saved = p.options();
                if mine != saved {
                    return Err(DatasetError::BadState {
                        reason: format!(
                            "it was saved with packing (capacity, rows, buffer, tensor, truncate) {saved:?}, the options say {mine:?}"
                        ),
                    });
                }
                let (consumers, consumer) = options.consumer()?;
                check_version(state)?;
                check_state(&feed, &options, state)?;
                if state.consumers != consumers {
                    let plain = super::elastic::unpack_state(&feed, state, p, &pack, shape.tensor)?;
                    let inner = Stream::build(feed.clone(), options, 0, Some(&plain))?;
                    return Self::assemble(feed, inner, pack, shape, Vec::new(), 0);
                }
                if p.equal != equal {
                    return Err(DatasetError::BadState {
                        reason: format!(
                            "it was saved with equal packed counts {}, the options say {equal}",
                            p.equal
                        ),
                    });
                }
                let Some(window) = p.windows.get(&consumer) else {
                    return Err(DatasetError::BadState {
                        reason: format!(
                            "it has no packing window for consumer {consumer} (rank {}, worker {})",
                            options.rank, options.worker
                        ),
                    });
                };
                check_window(window, consumer, &pack, feed.len(state.epoch))?;
                let mut plain = state.clone();
                plain.version = STATE_VERSION;
                plain.packing = None;
                (
                    Stream::build(feed.clone(), options, 0, Some(&plain))?,
                    window.carry.clone(),
                    window.delivered,
                )
            }
        };
        Self::assemble(feed, inner, pack, shape, carry_ids, skip)
    }

    /// The loader around `inner`, its first window read (the carry
    /// `carry_ids`, then new sequences) with `skip` mini-batches skipped.
    fn assemble(
        feed: Feed,
        inner: Stream,
        pack: PackOptions,
        shape: Shape,
        carry_ids: Vec<u64>,
        skip: u64,
    ) -> Result<Self> {
        let carry = if carry_ids.is_empty() {
            None
        } else {
            let batch = feed.take(&carry_ids)?;
            Some(Part {
                ids: carry_ids,
                batch,
            })
        };
        // The first window is read by the first `next()`; until then the
        // state is the one resumed from.
        let window_state = inner.state();
        Ok(Packer {
            feed,
            inner,
            options: pack,
            tensor: shape.tensor,
            tensor_name: shape.tensor_name,
            equal: shape.equal,
            consumer: shape.consumer,
            lengths: None,
            splits: None,
            window_state,
            carry_ids: carry.as_ref().map(|c| c.ids.clone()).unwrap_or_default(),
            delivered: skip,
            skip,
            ready: VecDeque::new(),
            next_carry: carry,
            done: false,
        })
    }

    /// What the stage reads.
    pub(crate) fn feed(&self) -> &Feed {
        &self.feed
    }

    /// The current epoch.
    pub(crate) fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    /// Starts epoch `epoch` from its beginning.
    pub(crate) fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        self.inner.set_epoch(epoch)?;
        self.ready.clear();
        self.next_carry = None;
        self.skip = 0;
        self.done = false;
        self.window_state = self.inner.state();
        self.carry_ids.clear();
        self.delivered = 0;
        self.splits = None;
        Ok(())
    }

    /// The sequences this stage will still deliver in this epoch.
    pub(crate) fn remaining(&self) -> u64 {
        let ready: usize = self.ready.iter().map(|b| b.batch.ids.len()).sum();
        let carry = self.next_carry.as_ref().map_or(0, |c| c.ids.len());
        self.inner.remaining() + (ready + carry) as u64
    }

    /// Where the stage is (what it delivered): a version-2 or 3
    /// [`LoaderState`].
    pub(crate) fn state(&self) -> LoaderState {
        let mut state = self.window_state.clone();
        let packing = PackState {
            capacity: self.options.capacity,
            rows: self.options.rows,
            buffer: self.options.buffer,
            tensor: self.tensor_name.clone(),
            equal: self.equal,
            truncate: self.options.truncate,
            windows: state
                .consumed
                .keys()
                .map(|&c| {
                    let w = PackWindow {
                        carry: self.carry_ids.clone(),
                        delivered: self.delivered,
                    };
                    (c, w)
                })
                .collect(),
        };
        state.version = packing.version();
        state.packing = Some(packing);
        state
    }

    /// Reads the next window (the carry and up to `buffer` new sequences)
    /// and packs it.
    fn load_window(&mut self) -> Result<()> {
        let carry = self.next_carry.take();
        self.window_state = self.inner.state();
        self.carry_ids = carry.as_ref().map(|c| c.ids.clone()).unwrap_or_default();
        self.delivered = 0;
        let new = match self.inner.next() {
            None => None,
            Some(Err(e)) => return Err(e),
            Some(Ok(mb)) => Some(Part {
                ids: mb.ids,
                batch: mb.batch,
            }),
        };
        let parts: Vec<Part> = carry.into_iter().chain(new).collect();
        let mut lengths = Vec::new();
        for part in &parts {
            lengths.extend(row_counts(&part.batch, part.ids.len(), self.tensor)?);
        }
        let rows = lengths.clone();
        for l in &mut lengths {
            *l = self.options.bin_length(*l);
        }
        if lengths.is_empty() {
            self.done = true;
            return Ok(());
        }
        let last = self.inner.remaining() == 0;
        let (mut batches, carry) = plan_window(&lengths, &self.options, last);
        if self.equal {
            let splits = self.window_splits()?;
            super::equal::split(&mut batches, &lengths, splits);
        }
        // Window index -> (part, index in it).
        let first_len = parts.first().map_or(0, |p| p.ids.len());
        let locate = |k: usize| {
            if k < first_len {
                (0, k)
            } else {
                (1, k - first_len)
            }
        };
        if !carry.is_empty() {
            let picks: Vec<(usize, usize)> = carry.iter().map(|&k| locate(k)).collect();
            let (ids, batch) = self.gather(&parts, &picks)?;
            self.next_carry = Some(Part { ids, batch });
        }
        let epoch = self.inner.epoch();
        for bins in batches {
            let mut picks: Vec<(usize, usize)> = Vec::new();
            let mut starts = vec![0usize];
            let mut picked_rows = Vec::new();
            for bin in bins {
                picks.extend(bin.iter().map(|&k| locate(k)));
                picked_rows.extend(bin.iter().map(|&k| rows[k]));
                starts.push(picks.len());
            }
            let (ids, batch) = self.gather(&parts, &picks)?;
            let (mut batch, truncated) = if self.options.truncate {
                super::truncate::truncate(
                    batch,
                    &ids,
                    &picked_rows,
                    self.tensor,
                    self.options.capacity,
                )?
            } else {
                (batch, Vec::new())
            };
            if !truncated.is_empty() {
                let text: Vec<String> = truncated.iter().map(|(i, r)| format!("{i}:{r}")).collect();
                batch
                    .metadata_mut()
                    .insert(super::truncate::TRUNCATED_KEY.into(), text.join(","));
            }
            if self.options.rows.is_some() {
                let text: Vec<String> = starts.iter().map(usize::to_string).collect();
                batch.metadata_mut().insert(BINS_KEY.into(), text.join(","));
            }
            self.ready.push_back(PackedBatch {
                batch: MiniBatch { epoch, ids, batch },
                bins: starts,
                truncated,
            });
        }
        while self.skip > 0 {
            if self.ready.pop_front().is_none() {
                return Err(DatasetError::BadState {
                    reason: format!(
                        "the state says {} mini-batches of its window were delivered; the window has fewer",
                        self.skip
                    ),
                });
            }
            self.skip -= 1;
            self.delivered += 1;
        }
        Ok(())
    }

    /// With equal counts: the splits of the current window (section 7.4),
    /// the epoch's splits computed at its first window.
    fn window_splits(&mut self) -> Result<usize> {
        if self.splits.is_none() {
            let lengths = match &self.lengths {
                Some(l) => l.clone(),
                None => {
                    let l = Arc::new(super::equal::lengths(&self.feed, self.tensor)?);
                    self.lengths = Some(l.clone());
                    l
                }
            };
            let all = super::equal::equal_splits(
                &self.feed,
                &self.window_state,
                &lengths,
                &self.options,
            )?;
            let mine = usize::try_from(self.consumer)
                .ok()
                .and_then(|c| all.into_iter().nth(c))
                .unwrap_or_default();
            self.splits = Some(mine);
        }
        let read = self
            .window_state
            .consumed
            .get(&self.consumer)
            .copied()
            .unwrap_or(0);
        let window = read / self.options.buffer as u64;
        Ok(self
            .splits
            .as_ref()
            .and_then(|s| s.get(&window).copied())
            .unwrap_or(0))
    }

    /// The sequences `picks` (part, index), in order, gathered into one
    /// batch: one copy of their bytes per run of picks from one part (and
    /// one more to join the runs when there are several).
    fn gather(&self, parts: &[Part], picks: &[(usize, usize)]) -> Result<(Vec<u64>, Batch)> {
        let mut ids = Vec::with_capacity(picks.len());
        let mut runs: Vec<(usize, Vec<usize>)> = Vec::new();
        for &(p, i) in picks {
            let part = parts
                .get(p)
                .ok_or_else(|| DatasetError::Loader("a window part is missing".into()))?;
            ids.push(part.ids.get(i).copied().unwrap_or(u64::MAX));
            match runs.last_mut() {
                Some((q, run)) if *q == p => run.push(i),
                _ => runs.push((p, vec![i])),
            }
        }
        let mut batch = Batch::new();
        for t in &self.feed.schema().tensors {
            let err = |e| DatasetError::tensor(format!("packing tensor {:?}", t.name), e);
            let mut pieces = Vec::with_capacity(runs.len());
            for (p, run) in &runs {
                let source = parts[*p].batch.get(&t.name).ok_or_else(|| {
                    DatasetError::Loader(format!("a window lacks tensor {:?}", t.name))
                })?;
                pieces.push(crate::ops::take(source, run).map_err(err)?);
            }
            let merged = match pieces.len() {
                1 => pieces
                    .pop()
                    .ok_or_else(|| DatasetError::Loader("no piece".into()))?,
                _ => crate::ops::concat(&pieces).map_err(err)?,
            };
            batch
                .push(t.name.clone(), merged)
                .map_err(|e| DatasetError::tensor("building a packed mini-batch", e))?;
        }
        Ok((ids, batch))
    }
}

/// What a packing loader resolved from its options.
struct Shape {
    tensor: usize,
    tensor_name: String,
    equal: bool,
    consumer: u64,
}

/// The index and name of the tensor whose rows count.
pub(super) fn resolve(feed: &Feed, pack: &PackOptions) -> Result<(usize, String)> {
    let schema = feed.schema();
    let tensor = match &pack.tensor {
        None => 0,
        Some(name) => schema.position(name).ok_or_else(|| {
            DatasetError::InvalidArgument(format!(
                "packing counts the rows of tensor {name:?}, which the dataset does not have (it has {})",
                crate::error::name_list(schema.tensors.iter().map(|t| t.name.as_str()))
            ))
        })?,
    };
    let name = schema
        .tensors
        .get(tensor)
        .map(|t| t.name.clone())
        .unwrap_or_default();
    Ok((tensor, name))
}

impl Iterator for Packer {
    type Item = Result<PackedBatch>;

    fn next(&mut self) -> Option<Result<PackedBatch>> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                self.delivered += 1;
                return Some(Ok(b));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.load_window() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
