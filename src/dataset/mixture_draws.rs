//! The draws of a mixture's epoch (`spec/DATASET.md` 10.2, 10.4 and 10.6):
//! per position, the source drawn and that source's draw index, from the
//! weights, sizes, seed and stopping rule alone (no dataset is read). A
//! [`Mixture`](super::Mixture) turns draw indices into sequences; a resume
//! on changed parameters replays an old state's draws from its numbers.

use super::error::{DatasetError, Result};
use super::options::Stop;
use super::shuffle::Rng;
use super::state::{Evolved, MixtureState, SourceProgress};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The stream of the draws of an epoch: `(seed, epoch, 5, 0)`.
const PURPOSE_DRAWS: u64 = 5;
/// The stream of the draws after a change of parameters (10.6):
/// `(seed, epoch, 7, delivered)`.
const PURPOSE_EVOLVED_DRAWS: u64 = 7;

/// The longest expected epoch (in draws) of an exhaustion rule: `2^36`.
/// Finding where such an epoch ends takes one draw per position, so a
/// mixture whose weights make it longer (a tiny weight under
/// [`Stop::AllExhausted`]) is refused rather than left to run for hours.
///
/// ```
/// assert_eq!(lodt::dataset::MAX_MIXTURE_EPOCH, 1 << 36);
/// ```
pub const MAX_MIXTURE_EPOCH: u64 = 1 << 36;

/// What decides a mixture's draws: the scaled weights and their running
/// sums, each source's number of sequences, the seed and the stopping rule.
#[derive(Debug, Clone)]
pub(crate) struct DrawRule {
    /// The weights scaled by the power of two that brings the largest into
    /// `[1, 2)` (10.2).
    pub(crate) scaled: Vec<f64>,
    /// The running sums of `scaled`, in source order.
    pub(crate) cumulative: Vec<f64>,
    /// `N_k`, per source.
    pub(crate) sizes: Vec<u64>,
    pub(crate) seed: u64,
    pub(crate) stop: Stop,
}

impl DrawRule {
    /// The rule of `weights` (already checked) over sources of `sizes`.
    pub(crate) fn new(weights: &[f64], sizes: Vec<u64>, seed: u64, stop: Stop) -> Self {
        let scaled = scale_weights(weights);
        let cumulative = running_sums(&scaled);
        DrawRule {
            scaled,
            cumulative,
            sizes,
            seed,
            stop,
        }
    }

    /// The rule a mixture state records (its weights checked as a
    /// mixture's are).
    pub(crate) fn of_state(state: &MixtureState) -> Result<Self> {
        let bad = |reason: String| Err(DatasetError::BadState { reason });
        if state.weights.len() != state.sources.len() || state.sources.is_empty() {
            return bad(format!(
                "its mixture has {} sources and {} weights",
                state.sources.len(),
                state.weights.len()
            ));
        }
        if state.weights.iter().any(|w| !w.is_finite() || *w < 0.0)
            || state.weights.iter().all(|&w| w == 0.0)
        {
            return bad(format!(
                "its mixture's weights {:?} are not finite numbers >= 0, not all 0",
                state.weights
            ));
        }
        if let Some(k) = (0..state.sources.len())
            .find(|&k| state.weights[k] > 0.0 && state.sources[k].sequences == 0)
        {
            return bad(format!(
                "its mixture's source {k} has a positive weight and no sequences"
            ));
        }
        let sizes = state.sources.iter().map(|s| s.sequences).collect();
        let rule = DrawRule::new(&state.weights, sizes, state.seed, state.stop);
        rule.check_length().map_err(|why| DatasetError::BadState {
            reason: format!("its mixture: {why}"),
        })?;
        Ok(rule)
    }

    /// Refuses an exhaustion rule whose epochs would be too long to find
    /// (expected to take more than [`MAX_MIXTURE_EPOCH`] draws), saying why.
    pub(crate) fn check_length(&self) -> std::result::Result<(), String> {
        let total = self.total();
        let times = self
            .scaled
            .iter()
            .zip(&self.sizes)
            .filter(|(w, _)| **w > 0.0)
            .map(|(w, &n)| n as f64 / (w / total));
        let expected = match self.stop {
            Stop::Sequences(_) => return Ok(()),
            Stop::FirstExhausted => times.fold(f64::INFINITY, f64::min),
            Stop::AllExhausted => times.fold(0.0, f64::max),
        };
        let max = MAX_MIXTURE_EPOCH;
        if expected > max as f64 {
            return Err(format!(
                "with these weights an epoch ({:?}) is expected to take about {expected:.3e} draws, more than {max} (MAX_MIXTURE_EPOCH): raise the small weights, or stop after a number of sequences",
                self.stop
            ));
        }
        Ok(())
    }

    /// The number of positions of epoch `epoch` (after `evolved`, if it is
    /// of this epoch): counted without drawing under `Stop::Sequences`.
    pub(crate) fn len(self: &Arc<Self>, epoch: u64, evolved: Option<&Evolved>) -> u64 {
        match self.stop {
            Stop::Sequences(n) => n.saturating_sub(
                evolved
                    .filter(|e| e.epoch == epoch)
                    .map_or(0, |e| e.delivered),
            ),
            _ => self.draws(epoch, evolved).count() as u64,
        }
    }

    fn total(&self) -> f64 {
        self.cumulative.last().copied().unwrap_or(0.0)
    }

    /// One draw: `u = (next() >> 11) · 2^-53`, and the first source whose
    /// running sum of scaled weights exceeds `u · total` (the last source of
    /// positive weight when rounding makes `u · total` reach the total).
    pub(crate) fn pick(&self, rng: &mut Rng) -> usize {
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let x = u * self.total();
        let k = self.cumulative.partition_point(|&c| c <= x);
        if k < self.cumulative.len() {
            k
        } else {
            self.scaled.iter().rposition(|w| *w > 0.0).unwrap_or(0)
        }
    }

    /// The draws of epoch `epoch`: from its start, or after the change of
    /// parameters `evolved` records when it is of this epoch (its sources
    /// being this rule's, in order).
    pub(crate) fn draws(self: &Arc<Self>, epoch: u64, evolved: Option<&Evolved>) -> Draws {
        let evolved = evolved.filter(|e| e.epoch == epoch);
        let (rng, left, next) = match evolved {
            None => (
                Rng::stream(self.seed, epoch, PURPOSE_DRAWS, 0),
                match self.stop {
                    Stop::Sequences(n) => n,
                    _ => u64::MAX,
                },
                (0..self.sizes.len())
                    .map(|_| SourceDraws::default())
                    .collect(),
            ),
            Some(e) => (
                Rng::stream(self.seed, epoch, PURPOSE_EVOLVED_DRAWS, e.delivered),
                match self.stop {
                    Stop::Sequences(n) => n.saturating_sub(e.delivered),
                    _ => u64::MAX,
                },
                e.sources.iter().map(SourceDraws::of).collect(),
            ),
        };
        let next: Vec<SourceDraws> = next;
        let unfinished = (0..self.sizes.len())
            .filter(|&k| self.scaled[k] > 0.0 && next[k].next < self.sizes[k])
            .count();
        Draws {
            done: self.stop == Stop::AllExhausted && unfinished == 0,
            rule: self.clone(),
            rng,
            left,
            next,
            unfinished,
        }
    }
}

/// One source's next draw indices: from a frontier on, less a skip list.
#[derive(Debug, Clone, Default)]
struct SourceDraws {
    /// The next draw index (never one of `skip`).
    next: u64,
    skip: Vec<u64>,
    at: usize,
}

impl SourceDraws {
    fn of(p: &SourceProgress) -> Self {
        let mut s = SourceDraws {
            next: p.frontier,
            skip: p.skip.clone(),
            at: 0,
        };
        s.pass_skipped();
        s
    }

    fn pass_skipped(&mut self) {
        while let Some(&j) = self.skip.get(self.at) {
            if j > self.next {
                break;
            }
            if j == self.next {
                self.next = self.next.saturating_add(1);
            }
            self.at += 1;
        }
    }

    fn take(&mut self) -> u64 {
        let j = self.next;
        self.next = self.next.saturating_add(1);
        self.pass_skipped();
        j
    }
}

/// The draws of one epoch, in order: `(source, draw index)` per position
/// until the stopping rule ends the epoch (10.4; a source is exhausted
/// once its next draw index is at least its `N_k`).
#[derive(Debug, Clone)]
pub(crate) struct Draws {
    rule: Arc<DrawRule>,
    rng: Rng,
    /// Draws left under `Stop::Sequences`.
    left: u64,
    next: Vec<SourceDraws>,
    /// Sources of positive weight not yet exhausted.
    unfinished: usize,
    done: bool,
}

impl Iterator for Draws {
    type Item = (usize, u64);

    fn next(&mut self) -> Option<(usize, u64)> {
        if self.done || self.left == 0 {
            return None;
        }
        let k = self.rule.pick(&mut self.rng);
        let size = self.rule.sizes[k];
        let source = &mut self.next[k];
        match self.rule.stop {
            Stop::FirstExhausted if source.next >= size => {
                self.done = true;
                return None;
            }
            Stop::Sequences(_) => self.left -= 1,
            _ => {}
        }
        let was_unfinished = source.next < size;
        let j = source.take();
        if self.rule.stop == Stop::AllExhausted && was_unfinished && source.next >= size {
            self.unfinished -= 1;
            if self.unfinished == 0 {
                self.done = true;
            }
        }
        Some((k, j))
    }
}

/// `weights` scaled by the power of two `2^-E` that brings the largest into
/// `[1, 2)` (`spec/DATASET.md` 10.2): exact, so it changes no draw of weights
/// whose sums stay in the normal range, and it makes equal subnormal weights
/// draw equally and a sum that would overflow finite. All zeros stay zeros.
pub(crate) fn scale_weights(weights: &[f64]) -> Vec<f64> {
    let max = weights.iter().copied().fold(0.0f64, f64::max);
    if !(max > 0.0 && max.is_finite()) {
        return weights.to_vec();
    }
    let e = exponent(max);
    weights.iter().map(|&w| ldexp(w, -e)).collect()
}

/// The running sums of `weights` (double additions in order, from 0.0).
pub(crate) fn running_sums(weights: &[f64]) -> Vec<f64> {
    let mut total = 0.0f64;
    weights
        .iter()
        .map(|&w| {
            total += w;
            total
        })
        .collect()
}

/// The `E` with `2^E <= x < 2^(E+1)`, for a finite `x > 0`.
pub(crate) fn exponent(x: f64) -> i32 {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased > 0 {
        biased - 1023
    } else {
        // Subnormal: x = m · 2^-1074 with m < 2^52.
        let m = bits & ((1u64 << 52) - 1);
        63 - m.leading_zeros() as i32 - 1074
    }
}

/// `2^n`, exactly, for `-1074 <= n <= 1023`.
pub(crate) fn pow2(n: i32) -> f64 {
    if n >= -1022 {
        f64::from_bits(((n + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (n + 1074))
    }
}

/// `w · 2^n` rounded once (C's `ldexp`), for `-1023 <= n <= 1074` and a
/// result below 2 when `n > 0`: scaling up is exact (two steps when `2^n`
/// is not a double), scaling down is one correctly rounded product.
pub(crate) fn ldexp(w: f64, n: i32) -> f64 {
    if n > 1023 {
        w * pow2(n - 1023) * pow2(1023)
    } else {
        w * pow2(n)
    }
}

/// Checks a list of source progress against the sources it describes, and
/// that no two sources (with the removed ones) share an order index.
pub(crate) fn check_progress(
    progress: &[SourceProgress],
    sources: &[super::state::SourceState],
    removed: &[SourceProgress],
) -> Result<()> {
    let bad = |reason: String| Err(DatasetError::BadState { reason });
    if progress.len() != sources.len() {
        return bad(format!(
            "its mixture's change records {} sources, the mixture has {}",
            progress.len(),
            sources.len()
        ));
    }
    let mut orders = BTreeSet::new();
    for (k, p) in progress.iter().chain(removed).enumerate() {
        if let Some(s) = sources.get(k)
            && (s.sequences, s.fingerprint) != (p.sequences, p.fingerprint)
        {
            return bad(format!(
                "its mixture's change records source {k} with {} sequences and fingerprint {:#010x}, the mixture's source has {} and {:#010x}",
                p.sequences, p.fingerprint, s.sequences, s.fingerprint
            ));
        }
        if !p.skip.windows(2).all(|w| w[0] < w[1])
            || p.skip.first().is_some_and(|&j| j <= p.frontier)
        {
            return bad(format!(
                "its mixture's change has a skip list of source entry {k} that is not increasing above its frontier {}",
                p.frontier
            ));
        }
        if !orders.insert(p.order) {
            return bad(format!(
                "its mixture's change gives order index {} to two sources",
                p.order
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(frontier: u64, skip: Vec<u64>) -> SourceProgress {
        SourceProgress {
            sequences: 100,
            fingerprint: 0,
            order: 0,
            frontier,
            skip,
        }
    }

    #[test]
    fn a_source_continues_past_its_frontier_and_skip_list() {
        let mut s = SourceDraws::of(&progress(2, vec![2, 3, 5, 9]));
        let got: Vec<u64> = (0..5).map(|_| s.take()).collect();
        assert_eq!(got, vec![4, 6, 7, 8, 10]);
    }

    #[test]
    fn an_evolved_epoch_ends_by_the_rules_counting_what_was_delivered() {
        let rule = Arc::new(DrawRule::new(
            &[1.0, 1.0],
            vec![4, 4],
            3,
            Stop::AllExhausted,
        ));
        let evolved = Evolved {
            epoch: 0,
            delivered: 6,
            sources: vec![progress(4, vec![]), progress(1, vec![3])],
            removed: vec![],
        };
        let draws: Vec<(usize, u64)> = rule.draws(0, Some(&evolved)).collect();
        // Source 1 delivers its draws 1 and 2; the epoch ends with the
        // second of them; source 0 (exhausted) repeats meanwhile from 4 on.
        let ones: Vec<u64> = draws.iter().filter(|d| d.0 == 1).map(|d| d.1).collect();
        assert_eq!(ones, vec![1, 2]);
        assert_eq!(draws.last().map(|d| d.0), Some(1));
        assert!(draws.iter().filter(|d| d.0 == 0).all(|d| d.1 >= 4));
        // Under first_exhausted the first draw of source 0 ends it.
        let first = Arc::new(DrawRule::new(
            &[1.0, 1.0],
            vec![4, 4],
            3,
            Stop::FirstExhausted,
        ));
        assert!(first.draws(0, Some(&evolved)).all(|d| d.0 == 1));
        // Under a count, what was delivered counts: 10 - 6 left.
        let count = Arc::new(DrawRule::new(
            &[1.0, 1.0],
            vec![4, 4],
            3,
            Stop::Sequences(10),
        ));
        assert_eq!(count.draws(0, Some(&evolved)).count(), 4);
        // Another epoch is the plain one.
        assert_eq!(count.draws(1, Some(&evolved)).count(), 10);
    }
}
