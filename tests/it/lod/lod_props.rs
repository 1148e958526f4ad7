//! Property tests of the LoD model against naive models written here: random
//! valid LoDs of 0 to 4 levels (with empty sequences), random element shapes
//! of rank 0 to 2, and several dtypes.

use half::f16;
use lodt::ops::pad::{Padded, pad, unpad};
use lodt::ops::{SortedSequences, merge, sequence_expand, split};
use lodt::tensor::nested::Nested;
use lodt::{DType, Error, Lod, LodRule, LodTensor};
use proptest::prelude::*;
use std::ops::Range;

// --- generators ---------------------------------------------------------------------

/// Lengths of a valid LoD, top level first, and the number of rows: every level
/// but the last has at least one non-empty sequence (else the level below
/// would have no offsets beyond 0, which `CheckLoD` rejects).
#[derive(Clone, Debug)]
struct Case {
    lengths: Vec<Vec<u64>>,
    rows: usize,
    element_shape: Vec<usize>,
    dtype: DType,
}

const DTYPES: [DType; 7] = [
    DType::Bool,
    DType::Int8,
    DType::UInt16,
    DType::Int32,
    DType::Float16,
    DType::Float32,
    DType::Float64,
];

fn build_lengths(
    levels: usize,
    top: usize,
    pool: &[u64],
    plain_rows: usize,
) -> (Vec<Vec<u64>>, usize) {
    let mut values = pool.iter().copied().cycle();
    let mut count = top;
    let mut lengths = Vec::new();
    for l in 0..levels {
        let mut level: Vec<u64> = (0..count).map(|_| values.next().unwrap_or(1)).collect();
        if l + 1 < levels && level.iter().all(|&x| x == 0) {
            level[0] = 1;
        }
        count = level.iter().sum::<u64>() as usize;
        lengths.push(level);
    }
    let rows = if levels == 0 { plain_rows } else { count };
    (lengths, rows)
}

fn case_with(dims: Range<usize>) -> impl Strategy<Value = Case> {
    (
        0usize..=4,
        1usize..=4,
        prop::collection::vec(0u64..=3, 64),
        0usize..=6,
        prop::collection::vec(dims, 0..=2),
        prop::sample::select(DTYPES.to_vec()),
    )
        .prop_map(|(levels, top, pool, plain_rows, element_shape, dtype)| {
            let (lengths, rows) = build_lengths(levels, top, &pool, plain_rows);
            Case {
                lengths,
                rows,
                element_shape,
                dtype,
            }
        })
}

fn case() -> impl Strategy<Value = Case> {
    case_with(0..4)
}

impl Case {
    fn shape(&self) -> Vec<usize> {
        let mut shape = vec![self.rows];
        shape.extend(&self.element_shape);
        shape
    }

    fn numel(&self) -> usize {
        self.element_shape.iter().product()
    }

    fn row_bytes(&self) -> usize {
        self.numel() * self.dtype.size()
    }

    /// Distinct-ish bytes, valid for every dtype (bools are 0 or 1).
    fn bytes(&self) -> Vec<u8> {
        let len = self.rows * self.row_bytes();
        (0..len)
            .map(|i| match self.dtype {
                DType::Bool => (i % 3 == 1) as u8,
                _ => (i * 37 + 11) as u8,
            })
            .collect()
    }

    fn lod(&self) -> Lod {
        Lod::try_from_lengths(&self.lengths).unwrap()
    }

    fn tensor(&self) -> LodTensor {
        LodTensor::from_bytes(self.dtype, self.shape(), &self.bytes(), self.lod()).unwrap()
    }
}

// --- the naive nested model -------------------------------------------------------

/// A sequence as a tree: a leaf holds a range of rows; an inner node its
/// sub-sequences.
#[derive(Clone, Debug)]
enum Node {
    Leaf(Range<usize>),
    Inner(Vec<Node>),
}

impl Node {
    fn len(&self) -> usize {
        match self {
            Node::Leaf(r) => r.len(),
            Node::Inner(v) => v.len(),
        }
    }

    fn rows(&self, out: &mut Vec<usize>) {
        match self {
            Node::Leaf(r) => out.extend(r.clone()),
            Node::Inner(v) => v.iter().for_each(|c| c.rows(out)),
        }
    }
}

/// The top-level sequences of a LoD given by lengths, built bottom-up by
/// counting, with no offsets.
fn model(lengths: &[Vec<u64>]) -> Vec<Node> {
    let Some(last) = lengths.last() else {
        return Vec::new();
    };
    let mut row = 0usize;
    let mut nodes: Vec<Node> = last
        .iter()
        .map(|&len| {
            let leaf = Node::Leaf(row..row + len as usize);
            row += len as usize;
            leaf
        })
        .collect();
    for level in lengths[..lengths.len() - 1].iter().rev() {
        let mut children = nodes.into_iter();
        nodes = level
            .iter()
            .map(|&len| Node::Inner((0..len).map(|_| children.next().unwrap()).collect()))
            .collect();
    }
    nodes
}

/// The lengths of the levels below a list of sibling sequences.
fn model_lengths(siblings: &[Node], levels: usize) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    let mut frontier: Vec<&Node> = siblings.iter().collect();
    for _ in 0..levels {
        out.push(frontier.iter().map(|n| n.len() as u64).collect());
        frontier = frontier
            .iter()
            .flat_map(|n| match n {
                Node::Inner(v) => v.iter().collect::<Vec<_>>(),
                Node::Leaf(_) => Vec::new(),
            })
            .collect();
    }
    out
}

fn model_rows(nodes: &[Node]) -> Vec<usize> {
    let mut rows = Vec::new();
    nodes.iter().for_each(|n| n.rows(&mut rows));
    rows
}

/// Every path from the top (of every depth), with the node it reaches.
fn all_paths(nodes: &[Node]) -> Vec<(Vec<usize>, Node)> {
    let mut out = Vec::new();
    let mut stack: Vec<(Vec<usize>, &Node)> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (vec![i], n))
        .collect();
    while let Some((path, node)) = stack.pop() {
        if let Node::Inner(children) = node {
            for (i, c) in children.iter().enumerate() {
                let mut p = path.clone();
                p.push(i);
                stack.push((p, c));
            }
        }
        out.push((path, node.clone()));
    }
    out
}

/// Checks that `view` holds exactly `rows` of `t` (in order) and the LoD
/// `lengths`.
fn assert_view(
    t: &LodTensor,
    row_bytes: usize,
    view: &LodTensor,
    rows: &[usize],
    lengths: &[Vec<u64>],
) {
    let bytes = t.as_bytes();
    let expected: Vec<u8> = rows
        .iter()
        .flat_map(|&r| bytes[r * row_bytes..(r + 1) * row_bytes].iter().copied())
        .collect();
    assert_eq!(view.rows(), rows.len());
    assert_eq!(view.as_bytes(), &expected[..]);
    let lod = view.lod();
    assert_eq!(lod.to_lengths(), lengths);
    // A level with no sequence (below an empty range) holds the offset [0].
    for (level, lens) in lod.levels().zip(lengths) {
        if lens.is_empty() {
            assert_eq!(*level, vec![0]);
        }
    }
}

// --- the naive CheckLoD ---------------------------------------------------------------

fn invalid(level: usize, index: usize, rule: LodRule, expected: u64, found: u64) -> Error {
    Error::InvalidLod {
        level,
        index,
        rule,
        expected,
        found,
    }
}

/// The rules, restated: each level has 2 or more offsets, starts at 0, never
/// decreases, and ends at the next level's number of sequences (the rows for
/// the last level). The first broken rule, in that order, level by level.
fn naive_check(levels: &[Vec<u64>], rows: u64) -> Result<(), Error> {
    for (l, level) in levels.iter().enumerate() {
        if level.len() < 2 {
            return Err(invalid(l, 0, LodRule::TooShort, 2, level.len() as u64));
        }
        if level[0] != 0 {
            return Err(invalid(l, 0, LodRule::DoesNotStartAtZero, 0, level[0]));
        }
        for i in 1..level.len() {
            if level[i] < level[i - 1] {
                return Err(invalid(l, i, LodRule::Decreasing, level[i - 1], level[i]));
            }
        }
        let last = level[level.len() - 1];
        let end = level.len() - 1;
        match levels.get(l + 1) {
            Some(next) => {
                let count = next.len().saturating_sub(1) as u64;
                if last != count {
                    return Err(invalid(l, end, LodRule::LevelMismatch, count, last));
                }
            }
            None => {
                if last != rows {
                    return Err(invalid(l, end, LodRule::RowMismatch, rows, last));
                }
            }
        }
    }
    Ok(())
}

/// Every single-entry mutation of `levels`: changed values, a removed entry
/// and a duplicated entry.
fn mutations(levels: &[Vec<u64>]) -> Vec<Vec<Vec<u64>>> {
    let mut out = Vec::new();
    for l in 0..levels.len() {
        let last = levels[l][levels[l].len() - 1];
        for i in 0..levels[l].len() {
            let x = levels[l][i];
            let mut values = vec![x + 1, x + 2, 0, last + 1, x.wrapping_mul(2)];
            if x > 0 {
                values.push(x - 1);
            }
            for v in values {
                if v != x {
                    let mut m = levels.to_vec();
                    m[l][i] = v;
                    out.push(m);
                }
            }
            let mut removed = levels.to_vec();
            removed[l].remove(i);
            out.push(removed);
            let mut duplicated = levels.to_vec();
            duplicated[l].insert(i, x);
            out.push(duplicated);
        }
    }
    out
}

// --- typed helpers ------------------------------------------------------------------

/// Pads with the dtype's zero, whatever the dtype.
fn pad_zero(x: &LodTensor) -> Padded {
    match x.dtype() {
        DType::Bool => pad(x, false),
        DType::Int8 => pad(x, 0i8),
        DType::UInt16 => pad(x, 0u16),
        DType::Int32 => pad(x, 0i32),
        DType::Float16 => pad(x, f16::ZERO),
        DType::Float32 => pad(x, 0f32),
        DType::Float64 => pad(x, 0f64),
        other => panic!("no test pad value for {other}"),
    }
    .unwrap()
}

/// Padded bytes from the model: cell `[i, j0, ..]` holds the row the nodes
/// lead to, or zero bytes.
fn model_padded(
    t: &LodTensor,
    nodes: &[Node],
    levels: usize,
    row_bytes: usize,
) -> (Vec<usize>, Vec<u8>) {
    let mut dims = vec![nodes.len()];
    for lens in model_lengths(nodes, levels) {
        dims.push(lens.iter().copied().max().unwrap_or(0) as usize);
    }
    let cells: usize = dims.iter().product();
    let mut out = vec![0u8; cells * row_bytes];
    // (node, cell index of its first item in units of its level's grid rows)
    let mut frontier: Vec<(&Node, usize)> = nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
    for dim in &dims[1..] {
        let mut next = Vec::new();
        for (node, cell) in frontier {
            match node {
                Node::Inner(children) => next.extend(
                    children
                        .iter()
                        .enumerate()
                        .map(|(j, c)| (c, cell * dim + j)),
                ),
                Node::Leaf(rows) => {
                    for (j, r) in rows.clone().enumerate() {
                        let at = (cell * dim + j) * row_bytes;
                        out[at..at + row_bytes]
                            .copy_from_slice(&t.as_bytes()[r * row_bytes..(r + 1) * row_bytes]);
                    }
                }
            }
        }
        frontier = next;
    }
    (dims, out)
}

macro_rules! with_type {
    ($dtype:expr, $f:ident ( $($arg:expr),* )) => {
        match $dtype {
            DType::Bool => $f::<bool>($($arg),*),
            DType::Int8 => $f::<i8>($($arg),*),
            DType::UInt16 => $f::<u16>($($arg),*),
            DType::Int32 => $f::<i32>($($arg),*),
            DType::Float16 => $f::<f16>($($arg),*),
            DType::Float32 => $f::<f32>($($arg),*),
            DType::Float64 => $f::<f64>($($arg),*),
            other => panic!("no test type for {other}"),
        }
    };
}

/// The nested value of the model, with the values of `t`.
fn model_nested<T: lodt::Element>(t: &LodTensor, nodes: &[Node], levels: usize) -> Nested<T> {
    let values = t.as_slice::<T>().unwrap();
    let numel = t.element_shape().iter().product::<usize>();
    fn node<T: lodt::Element>(n: &Node, values: &[T], numel: usize) -> Nested<T> {
        match n {
            Node::Leaf(r) => Nested::Rows(values[r.start * numel..r.end * numel].to_vec()),
            Node::Inner(v) => Nested::Seqs(v.iter().map(|c| node(c, values, numel)).collect()),
        }
    }
    if levels == 0 {
        Nested::Rows(values.to_vec())
    } else {
        Nested::Seqs(nodes.iter().map(|n| node(n, values, numel)).collect())
    }
}

/// Equality of nested values by bits (the test data holds NaNs).
fn same_bits<T: lodt::Element>(a: &Nested<T>, b: &Nested<T>) -> bool {
    match (a, b) {
        (Nested::Rows(x), Nested::Rows(y)) => T::slice_as_bytes(x) == T::slice_as_bytes(y),
        (Nested::Seqs(x), Nested::Seqs(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_bits(p, q))
        }
        _ => false,
    }
}

fn check_nested<T: lodt::Element>(t: &LodTensor, nodes: &[Node], levels: usize)
where
    Vec<T>: lodt::buffer::ByteStorage,
{
    let expected = model_nested::<T>(t, nodes, levels);
    let got = t.to_nested::<T>().unwrap();
    assert!(same_bits(&got, &expected), "{got:?} != {expected:?}");
    assert_eq!(
        &LodTensor::from_nested(&expected, t.element_shape()).unwrap(),
        t
    );
    assert_eq!(&LodTensor::from_nested(&got, t.element_shape()).unwrap(), t);
}

// --- properties -----------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lengths_to_offsets_to_lengths_is_identity(c in case()) {
        let lod = c.lod();
        prop_assert_eq!(lod.to_lengths(), c.lengths.clone());
        for (offsets, lengths) in lod.levels().zip(&c.lengths) {
            let mut sum = 0;
            let mut naive = vec![0];
            for &len in lengths {
                sum += len;
                naive.push(sum);
            }
            prop_assert_eq!(offsets, &naive);
        }
        prop_assert_eq!(Lod::try_from_offsets(lod.to_offsets()).unwrap(), lod.clone());
        prop_assert!(lod.check_rows(c.rows as u64).is_ok());
    }

    #[test]
    fn from_lengths_judges_like_from_offsets(
        raw in prop::collection::vec(prop::collection::vec(0u64..=3, 0..=4), 0..=3),
    ) {
        // Any lengths, consistent or not: the fast path of `try_from_lengths`
        // must give what the full check of the prefix sums gives.
        let offsets: Vec<Vec<u64>> = raw
            .iter()
            .map(|lens| {
                let mut o = vec![0];
                for &len in lens {
                    o.push(o[o.len() - 1] + len);
                }
                o
            })
            .collect();
        prop_assert_eq!(Lod::try_from_lengths(&raw), Lod::try_from_offsets(offsets));
    }

    #[test]
    fn branch_slices_match_the_nested_model(c in case()) {
        let t = c.tensor();
        let levels = c.lengths.len();
        let nodes = model(&c.lengths);
        // The empty path is the whole tensor.
        assert_view(&t, c.row_bytes(), &t.branch(&[]).unwrap(), &(0..c.rows).collect::<Vec<_>>(), &c.lengths);
        for (path, node) in all_paths(&nodes) {
            let view = t.branch(&path).unwrap();
            let below = levels - path.len();
            let (rows, lengths) = match &node {
                Node::Inner(children) => (model_rows(children), model_lengths(children, below)),
                Node::Leaf(r) => (r.clone().collect(), Vec::new()),
            };
            assert_view(&t, c.row_bytes(), &view, &rows, &lengths);
            // One past the last child is out of range.
            if path.len() < levels {
                let mut past = path.clone();
                past.push(node.len());
                let is_out_of_range = matches!(t.branch(&past), Err(Error::OutOfRange { .. }));
                prop_assert!(is_out_of_range);
            }
        }
        if levels > 0 {
            let is_out_of_range = matches!(t.branch(&[nodes.len()]), Err(Error::OutOfRange { .. }));
            prop_assert!(is_out_of_range);
        }
        let too_deep = vec![0; levels + 1];
        prop_assert!(t.branch(&too_deep).is_err());
    }

    #[test]
    fn level_slices_match_the_nested_model(c in case(), b in 0usize..8, e in 0usize..8) {
        let t = c.tensor();
        let nodes = model(&c.lengths);
        // The sequences of each level, in order.
        let mut frontier: Vec<Node> = nodes;
        for level in 0..c.lengths.len() {
            let n = frontier.len();
            let (b, e) = (b.min(n), e.min(n));
            let (b, e) = (b.min(e), b.max(e));
            let view = t.slice_level(level, b, e).unwrap();
            let picked = &frontier[b..e];
            let below = c.lengths.len() - level;
            let lengths = model_lengths(picked, below);
            assert_view(&t, c.row_bytes(), &view, &model_rows(picked), &lengths);
            prop_assert_eq!(c.lod().slice_in_level(level, b, e).unwrap().to_lengths(), lengths);
            prop_assert!(t.slice_level(level, 0, n + 1).is_err());
            frontier = frontier
                .iter()
                .flat_map(|n| match n {
                    Node::Inner(v) => v.clone(),
                    Node::Leaf(_) => Vec::new(),
                })
                .collect();
        }
    }

    #[test]
    fn sequences_and_row_ranges_match_the_nested_model(c in case(), cut in 0usize..4) {
        let t = c.tensor();
        let lod = c.lod();
        let levels = c.lengths.len();
        let mut frontier: Vec<Node> = model(&c.lengths);
        for level in 0..levels {
            let below = levels - level - 1;
            for (i, node) in frontier.iter().enumerate() {
                let (rows, lengths) = match node {
                    Node::Inner(children) => (model_rows(children), model_lengths(children, below)),
                    Node::Leaf(r) => (r.clone().collect(), Vec::new()),
                };
                let view = t.sequence(level, i).unwrap();
                assert_view(&t, c.row_bytes(), &view, &rows, &lengths);
                let r = lod.row_range(level, i).unwrap();
                prop_assert_eq!((r.start..r.end).map(|x| x as usize).collect::<Vec<_>>(), rows);
                // The same as slicing the level, then taking the one branch.
                let (sliced, rows2) = lod.slice_level(level, i, i + 1).unwrap();
                let (sub, _) = sliced.branch(&[0]).unwrap();
                prop_assert_eq!(lod.sequence(level, i).unwrap(), (sub, rows2));
            }
            let n = frontier.len();
            let is_out_of_range = matches!(t.sequence(level, n), Err(Error::OutOfRange { .. }));
            prop_assert!(is_out_of_range);
            prop_assert!(lod.row_range(level, n).is_err());
            // On a LoD whose offsets do not start at 0 (a slice of this one).
            let from = cut.min(n);
            let part = lod.slice_in_level(level, from, n).unwrap();
            for i in 0..n - from {
                let (s1, r1) = part.slice_level(0, i, i + 1).unwrap();
                let expected = (s1.branch(&[0]).unwrap().0, r1.clone());
                prop_assert_eq!(part.sequence(0, i).unwrap(), expected);
                prop_assert_eq!(part.row_range(0, i).unwrap(), r1);
            }
            frontier = frontier
                .iter()
                .flat_map(|n| match n {
                    Node::Inner(v) => v.clone(),
                    Node::Leaf(_) => Vec::new(),
                })
                .collect();
        }
        prop_assert!(t.sequence(levels, 0).is_err());
        prop_assert!(lod.row_range(levels, 0).is_err());
    }

    #[test]
    fn split_then_merge_is_identity(c in case(), n in 1usize..=6) {
        let t = c.tensor();
        let parts = split(&t, n).unwrap();
        let batch = if c.lengths.is_empty() { c.rows } else { c.lengths[0].len() };
        if batch > 0 {
            let step = batch.div_ceil(n);
            prop_assert_eq!(parts.len(), batch.div_ceil(step));
            for (p, part) in parts.iter().enumerate() {
                let size = if c.lengths.is_empty() { part.rows() } else { part.lod().num_sequences(0).unwrap() };
                prop_assert_eq!(size, step.min(batch - p * step));
                prop_assert_eq!(part.lod().num_levels(), c.lengths.len());
            }
        }
        prop_assert_eq!(&merge(&parts).unwrap(), &t);
        prop_assert_eq!(&merge(split(&t, n).unwrap()).unwrap(), &t);
    }

    #[test]
    fn pad_then_unpad_is_identity(c in case()) {
        let t = c.tensor();
        let padded = pad_zero(&t);
        let levels = c.lengths.len();
        if levels > 0 {
            let (dims, bytes) = model_padded(&t, &model(&c.lengths), levels, c.row_bytes());
            let mut shape = dims;
            shape.extend(&c.element_shape);
            prop_assert_eq!(padded.tensor().shape(), &shape[..]);
            prop_assert_eq!(padded.tensor().as_bytes(), &bytes[..]);
            prop_assert_eq!(padded.tensor().lod().num_levels(), 0);
        } else {
            prop_assert_eq!(padded.tensor(), &t);
        }
        prop_assert_eq!(padded.lengths(), &c.lengths[..]);
        prop_assert_eq!(&padded.unpad().unwrap(), &t);
        prop_assert_eq!(&unpad(padded.tensor(), padded.lengths()).unwrap(), &t);
    }

    #[test]
    fn nested_round_trip_matches_the_model(c in case_with(1..4)) {
        let t = c.tensor();
        let nodes = model(&c.lengths);
        with_type!(c.dtype, check_nested(&t, &nodes, c.lengths.len()));
    }

    #[test]
    fn every_single_entry_mutation_is_judged_by_the_rules(c in case()) {
        let lod = c.lod();
        let rows = c.rows as u64;
        for m in mutations(&lod.to_offsets()) {
            let expected = naive_check(&m, rows);
            let got = lodt::lod::check_levels(&m, Some(rows));
            prop_assert_eq!(&got, &expected, "mutation {:?}", m);
            let chained = Lod::try_from_offsets(m.clone()).and_then(|l| l.check_rows(rows));
            prop_assert_eq!(chained, expected);
        }
    }

    #[test]
    fn sort_batching_round_trips(c in case()) {
        let t = c.tensor();
        for level in 0..c.lengths.len() {
            let sorted = SortedSequences::try_new(t.lod(), level).unwrap();
            let lens = &c.lengths[level];
            // Sorted descending and stable.
            let mut naive: Vec<usize> = (0..lens.len()).collect();
            naive.sort_by_key(|&i| std::cmp::Reverse(lens[i]));
            prop_assert_eq!(sorted.order(), &naive[..]);
            let steps = sorted.segment_inputs(&t).unwrap();
            prop_assert_eq!(steps.len() as u64, sorted.num_steps());
            for (s, step) in steps.iter().enumerate() {
                let batch = lens.iter().filter(|&&l| l > s as u64).count();
                let size = if step.lod().is_empty() { step.rows() } else { step.lod().num_sequences(0).unwrap() };
                prop_assert_eq!(size, batch);
                prop_assert_eq!(step.lod().num_levels(), c.lengths.len() - level - 1);
            }
            if steps.is_empty() {
                let no_steps = matches!(sorted.concat_outputs(&steps), Err(Error::InvalidArgument(_)));
                prop_assert!(no_steps);
            } else {
                prop_assert_eq!(&sorted.concat_outputs(&steps).unwrap(), &t);
            }
        }
    }

    #[test]
    fn sequence_expand_matches_naive_repeat(
        c in case_with(1..3),
        ref_pick in 0usize..4,
        x_pool in prop::collection::vec(0u64..=3, 32),
        x_has_lod in any::<bool>(),
    ) {
        prop_assume!(!c.lengths.is_empty());
        let ref_level = ref_pick % c.lengths.len();
        let y = c.lod();
        let repeats = &c.lengths[ref_level];
        let count = repeats.len();
        // x: one sequence (or row) per sequence of y's reference level.
        let x_lengths: Vec<u64> = (0..count).map(|i| x_pool[i % x_pool.len()]).collect();
        let x_rows = if x_has_lod { x_lengths.iter().sum::<u64>() as usize } else { count };
        let x_values: Vec<i32> = (0..x_rows as i32 * 2).collect();
        let x_lod = if x_has_lod { Lod::try_from_lengths(std::slice::from_ref(&x_lengths)).unwrap() } else { Lod::empty() };
        let x = LodTensor::from_vec(x_values.clone(), vec![x_rows, 2], x_lod).unwrap();
        let out = sequence_expand(&x, &y, ref_level as i64).unwrap();
        let mut expected = Vec::new();
        let mut out_lengths = Vec::new();
        let mut start = 0usize;
        for (i, &r) in repeats.iter().enumerate() {
            let len = if x_has_lod { x_lengths[i] as usize } else { 1 };
            for _ in 0..r {
                expected.extend_from_slice(&x_values[start * 2..(start + len) * 2]);
                out_lengths.push(len as u64);
            }
            start += len;
        }
        prop_assert_eq!(out.as_slice::<i32>().unwrap(), &expected[..]);
        if x_has_lod {
            let lod_lengths: Vec<Vec<u64>> = out.lod().to_lengths();
            prop_assert_eq!(lod_lengths, vec![out_lengths]);
        } else {
            prop_assert_eq!(out.lod().num_levels(), 0);
        }
        if ref_level + 1 == c.lengths.len() {
            prop_assert_eq!(sequence_expand(&x, &y, -1).unwrap(), out);
        }
    }
}
