//! Resuming a mixture's state on changed parameters (`spec/DATASET.md`
//! 10.6): other weights, sources added or removed, another stopping rule or
//! seed. The state's consumed positions become each source's progress
//! through its draws (a frontier and a skip list of draw indices); the rest
//! of the epoch draws under the new parameters from there.

use super::error::{DatasetError, Result};
use super::feed::Feed;
use super::mixture::Mixture;
use super::mixture_draws::{DrawRule, check_progress};
use super::options::LoaderOptions;
use super::state::{
    Base, Evolved, LoaderState, MixtureState, PackState, PackWindow, STATE_VERSION, SourceProgress,
    Subject, check_state, check_version,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl Mixture {
    /// `state` (of a loader of another mixture: other weights, sources,
    /// seed or stopping rule) as a state of this mixture that continues its
    /// epoch (`spec/DATASET.md` 10.6), to pass to
    /// [`Loader::resume`](super::Loader::resume) with `options`:
    ///
    /// - a source of both (the same sequences and fingerprint; the `i`-th
    ///   such source of the state is the `i`-th of this mixture) continues
    ///   its draws of the epoch where they were: nothing delivered twice,
    ///   nothing skipped;
    /// - a source the state has and this mixture does not draws nothing; the
    ///   state keeps its progress, so that adding it back continues it;
    /// - a new source starts at its first draw;
    /// - the rest of the epoch is drawn under this mixture's weights and
    ///   rule, from a stream fixed by the seed, the epoch and how much was
    ///   delivered: the same state and mixture always give the same stream.
    ///
    /// The state must be complete ([`LoaderState::merge`] of every
    /// consumer's); the returned one is dealt anew to any number of
    /// consumers. A state of this very mixture is returned as it is. A
    /// packing state needs every source it has in this mixture (give a
    /// source weight 0 rather than removing it), and `options.packing`.
    /// The epochs after the state's are this mixture's own.
    ///
    /// ```
    /// use lodt::dataset::*;
    /// use std::sync::Arc;
    /// # let write = |n: usize, v: i32| -> Result<Arc<Dataset>, Box<dyn std::error::Error>> {
    /// #     let dir = tempfile::tempdir()?.keep();
    /// #     let mut w = DatasetWriter::create(&dir, Default::default())?;
    /// #     let x = lodt::LodTensor::from_vec(vec![v; n], vec![n], lodt::Lod::try_from_lengths(&[vec![1; n]])?)?;
    /// #     w.write(&lodt::Batch::try_from_tensors([("x", x)])?)?;
    /// #     w.finish()?;
    /// #     Ok(Arc::new(Dataset::open(&dir)?))
    /// # };
    /// let (web, code, books) = (write(40, 0)?, write(40, 1)?, write(40, 2)?);
    /// let options = LoaderOptions { batching: Batching::Sequences(4), ..Default::default() };
    /// let before = Arc::new(Mixture::try_new(vec![web.clone(), code.clone()], &[1.0, 1.0], Default::default())?);
    /// let mut loader = Loader::new(before.clone(), options.clone())?;
    /// let mut seen: Vec<(usize, u64)> = Vec::new();
    /// for _ in 0..5 {
    ///     seen.extend(loader.next().unwrap()?.ids.iter().map(|&i| before.source_of(i).unwrap()));
    /// }
    /// // Re-weighted, and a third source added.
    /// let after = Arc::new(Mixture::try_new(vec![web, code, books], &[1.0, 3.0, 1.0], Default::default())?);
    /// let state = after.evolve_state(&options, &loader.state())?;
    /// for b in Loader::resume(after.clone(), options, &state)? {
    ///     seen.extend(b?.ids.iter().map(|&i| after.source_of(i).unwrap()));
    /// }
    /// // No sequence of any source twice in the epoch.
    /// let mut unique = seen.clone();
    /// unique.sort();
    /// unique.dedup();
    /// assert_eq!(unique.len(), seen.len());
    /// assert!(seen.iter().any(|&(k, _)| k == 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn evolve_state(
        &self,
        options: &LoaderOptions,
        state: &LoaderState,
    ) -> Result<LoaderState> {
        let bad = |reason: String| DatasetError::BadState { reason };
        let Some(old) = &state.mixture else {
            return Err(bad(
                "it is the state of a single dataset's loader, not of a mixture's".into(),
            ));
        };
        let plain = MixtureState {
            version: self.state().version,
            evolved: None,
            ..old.clone()
        };
        if plain == self.state() {
            return Ok(state.clone());
        }
        check_version(state)?;
        if let Some(c) = (0..state.consumers).find(|c| !state.consumed.contains_key(c)) {
            return Err(bad(format!(
                "a resume on changed mixture parameters needs a complete state (LoaderState::merge of every consumer's, or Mixture.merge_states in Python); consumer {c} of {} is missing",
                state.consumers
            )));
        }
        let rule = Arc::new(DrawRule::of_state(old)?);
        let old_evolved = match &old.evolved {
            Some(e) if e.epoch != state.epoch => {
                return Err(bad(format!(
                    "its mixture continues a change in epoch {}, and the state is of epoch {}",
                    e.epoch, state.epoch
                )));
            }
            Some(e) => {
                check_progress(&e.sources, &old.sources, &e.removed)?;
                Some(e)
            }
            None => None,
        };
        let n_old = rule.len(state.epoch, old_evolved);
        let base = match &state.packing {
            None => {
                let subject = OldMixture {
                    n: n_old,
                    fingerprint: state.fingerprint,
                    mixture: old.clone(),
                };
                check_state(&subject, options, state)?.advance(n_old, state)
            }
            Some(_) => {
                let feed = Feed::from(self.old_mixture(old, old_evolved)?);
                let pack = options.packing.as_ref().ok_or_else(|| {
                    bad("it is a packing loader's state: the options need the same packing".into())
                })?;
                super::pack::undelivered_base(&feed, options, state, pack)?
            }
        };
        let (progress, delivered) = replay(&rule, state.epoch, old, old_evolved, &base);
        let removed_before = old_evolved.map_or(&[][..], |e| &e.removed[..]);
        let evolved = self.match_sources(state.epoch, delivered, old, progress, removed_before);
        let mixture = self.with_evolved(evolved)?;
        let packing = state.packing.as_ref().map(|p| PackState {
            windows: BTreeMap::from([(
                0,
                PackWindow {
                    carry: Vec::new(),
                    delivered: 0,
                },
            )]),
            ..p.clone()
        });
        Ok(LoaderState {
            version: packing.as_ref().map_or(STATE_VERSION, |p| p.version()),
            sequences: mixture.num_sequences(state.epoch),
            fingerprint: mixture.fingerprint(),
            shuffle: state.shuffle,
            remainder: state.remainder,
            epoch: state.epoch,
            frontier: 0,
            skip: Vec::new(),
            consumers: 1,
            consumed: BTreeMap::from([(0, 0)]),
            mixture: Some(mixture.state_in(state.epoch)),
            packing,
            ranges: None,
            blocks: None,
            cursor: None,
            joined: None,
        })
    }

    /// The mixture of the old parameters `old` over this mixture's
    /// datasets (each old source found among them): what a packing state's
    /// windows are read from.
    fn old_mixture(&self, old: &MixtureState, evolved: Option<&Evolved>) -> Result<Mixture> {
        let mut taken = vec![false; self.sources().len()];
        let mut sources = Vec::with_capacity(old.sources.len());
        for (k, s) in old.sources.iter().enumerate() {
            let found = (0..taken.len()).find(|&i| {
                !taken[i]
                    && self.sources()[i].num_sequences() == s.sequences
                    && self.sources()[i].fingerprint() == s.fingerprint
            });
            let Some(i) = found else {
                return Err(DatasetError::BadState {
                    reason: format!(
                        "it is a packing loader's state, and its source {k} ({} sequences, fingerprint {:#010x}) is not in this mixture: keep it, with weight 0, to resume",
                        s.sequences, s.fingerprint
                    ),
                });
            };
            taken[i] = true;
            sources.push(self.sources()[i].clone());
        }
        let options = super::options::MixtureOptions {
            seed: old.seed,
            stop: old.stop,
        };
        let mixture = Mixture::try_new(sources, &old.weights, options)?;
        match evolved {
            Some(e) => mixture.with_evolved(e.clone()),
            None => Ok(mixture),
        }
    }

    /// The progress of this mixture's sources: each matched with the first
    /// unmatched old source (or removed one) of the same sequences and
    /// fingerprint; the old ones left over are the removed ones.
    fn match_sources(
        &self,
        epoch: u64,
        delivered: u64,
        old: &MixtureState,
        progress: Vec<Progress>,
        removed: &[SourceProgress],
    ) -> Evolved {
        let mut entries: Vec<(u64, u32, Progress)> = old
            .sources
            .iter()
            .zip(progress)
            .map(|(s, p)| (s.sequences, s.fingerprint, p))
            .chain(
                removed
                    .iter()
                    .map(|r| (r.sequences, r.fingerprint, Progress::of(r))),
            )
            .collect();
        let mut fresh = entries
            .iter()
            .map(|e| e.2.order.saturating_add(1))
            .max()
            .unwrap_or(0);
        let mut taken = vec![false; entries.len()];
        let mut sources = Vec::with_capacity(self.sources().len());
        for s in self.sources() {
            let key = (s.num_sequences(), s.fingerprint());
            let found =
                (0..entries.len()).find(|&i| !taken[i] && (entries[i].0, entries[i].1) == key);
            let p = match found {
                Some(i) => {
                    taken[i] = true;
                    std::mem::take(&mut entries[i].2)
                }
                None => {
                    fresh = fresh.saturating_add(1);
                    Progress {
                        order: fresh - 1,
                        ..Progress::default()
                    }
                }
            };
            sources.push(p.to_state(key.0, key.1));
        }
        let removed = entries
            .into_iter()
            .zip(taken)
            .filter(|((_, _, p), taken)| !taken && (p.frontier > 0 || !p.ahead.is_empty()))
            .map(|((n, f, p), _)| p.to_state(n, f))
            .collect();
        Evolved {
            epoch,
            delivered,
            sources,
            removed,
        }
    }
}

/// Each source's progress after the positions of `base` were consumed
/// in epoch `epoch` of the mixture `old` (with the rule `rule`; its change
/// `evolved`, if any, is where the progress starts), and the positions
/// delivered in the epoch.
fn replay(
    rule: &Arc<DrawRule>,
    epoch: u64,
    old: &MixtureState,
    evolved: Option<&Evolved>,
    base: &Base,
) -> (Vec<Progress>, u64) {
    let mut progress: Vec<Progress> = match evolved {
        Some(e) => e.sources.iter().map(Progress::of).collect(),
        None => (0..old.sources.len())
            .map(|k| Progress {
                order: k as u64,
                ..Progress::default()
            })
            .collect(),
    };
    let mut delivered = evolved.map_or(0, |e| e.delivered);
    let last = base
        .skip
        .last()
        .map_or(base.frontier, |&p| p.max(base.frontier));
    let mut skip = base.skip.iter().peekable();
    for (p, (k, j)) in (0..last.saturating_add(1)).zip(rule.draws(epoch, evolved)) {
        let consumed = p < base.frontier || skip.next_if_eq(&&p).is_some();
        if consumed {
            progress[k].mark(j);
            delivered = delivered.saturating_add(1);
        }
    }
    (progress, delivered)
}

/// How many draws of each source of a complete, plain mixture state were
/// delivered in its epoch (`spec/DATASET.md` 10.6, "Progress"): `None` for
/// a state that is not a mixture's, not complete, or a packing one (whose
/// delivered sequences need the datasets).
pub(crate) fn delivered_draws(state: &LoaderState) -> Result<Option<Vec<u64>>> {
    let Some(old) = &state.mixture else {
        return Ok(None);
    };
    if state.packing.is_some() || !state.is_complete() {
        return Ok(None);
    }
    let rule = Arc::new(DrawRule::of_state(old)?);
    let evolved = old.evolved.as_ref().filter(|e| e.epoch == state.epoch);
    if let Some(e) = evolved {
        check_progress(&e.sources, &old.sources, &e.removed)?;
    }
    let n = rule.len(state.epoch, evolved);
    let subject = OldMixture {
        n,
        fingerprint: state.fingerprint,
        mixture: old.clone(),
    };
    let options = LoaderOptions {
        shuffle: state.shuffle,
        remainder: state.remainder,
        ..Default::default()
    };
    let base = check_state(&subject, &options, state)?.advance(n, state);
    let (progress, _) = replay(&rule, state.epoch, old, evolved, &base);
    Ok(Some(
        progress
            .iter()
            .map(|p| p.frontier.saturating_add(p.ahead.len() as u64))
            .collect(),
    ))
}

/// The old parameters a plain state is checked against.
struct OldMixture {
    n: u64,
    fingerprint: u32,
    mixture: MixtureState,
}

impl Subject for OldMixture {
    fn len(&self, _epoch: u64) -> u64 {
        self.n
    }
    fn fingerprint(&self) -> u32 {
        self.fingerprint
    }
    fn mixture_state(&self, _epoch: u64) -> Option<MixtureState> {
        Some(self.mixture.clone())
    }
}

/// One source's delivered draw indices: all below `frontier`, and `ahead`.
#[derive(Debug, Default)]
struct Progress {
    order: u64,
    frontier: u64,
    ahead: BTreeSet<u64>,
}

impl Progress {
    fn of(p: &SourceProgress) -> Self {
        Progress {
            order: p.order,
            frontier: p.frontier,
            ahead: p.skip.iter().copied().collect(),
        }
    }

    /// Draw `j` was delivered.
    fn mark(&mut self, j: u64) {
        if j == self.frontier {
            self.frontier = self.frontier.saturating_add(1);
            while self.ahead.remove(&self.frontier) {
                self.frontier = self.frontier.saturating_add(1);
            }
        } else if j > self.frontier {
            self.ahead.insert(j);
        }
    }

    fn to_state(&self, sequences: u64, fingerprint: u32) -> SourceProgress {
        SourceProgress {
            sequences,
            fingerprint,
            order: self.order,
            frontier: self.frontier,
            skip: self.ahead.iter().copied().collect(),
        }
    }
}
