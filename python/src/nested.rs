//! Nested sequences to LoD tensors, and row offsets to LoDs: every nested →
//! LoD path of the Python package (`lodt.create_lod_tensor` from lists, Ray's
//! numpy batches, `lodt.torch.from_jagged`) goes through the crate's
//! `Nested::flatten` (`LodTensor::from_nested`'s structure) or
//! `Lod::try_from_row_offsets`. This file only walks Python objects and
//! converts rows with numpy.

use crate::dtype::tensor_from_numpy;
use crate::error::{PyResult, core as core_err, type_error, value};
use crate::tensor::PyLodTensor;
use lodt::{Lod, Nested};
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Nesting deeper than this (LoD levels, or object arrays inside a row) is
/// refused rather than walked: no input makes the walk unbounded.
const MAX_DEPTH: usize = 64;

/// The items of `node`, a sequence at depth `depth` of `levels`.
fn items<'py>(
    node: &Bound<'py, PyAny>,
    depth: usize,
    levels: usize,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let iter = node.try_iter().map_err(|_| {
        type_error(format!(
            "nested sequences of {levels} levels: the item at depth {depth} is not a sequence, found {}",
            node.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })?;
    iter.collect()
}

/// A last-level sequence with a length (an iterable without one as the
/// list of its items) and its number of rows.
fn sized<'py>(
    node: &Bound<'py, PyAny>,
    depth: usize,
    levels: usize,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    if let Ok(n) = node.len() {
        return Ok((node.clone(), n));
    }
    let list = PyList::new(node.py(), items(node, depth, levels)?)?;
    let n = list.len();
    Ok((list.into_any(), n))
}

/// `data` walked `levels` levels deep, level by level (no recursion): the
/// tree of its sequences (each leaf holds one `()` per row, which allocates
/// nothing) and the last-level sequences themselves, in order, whose items
/// are the rows.
type Tree<'py> = (Nested<()>, Vec<Bound<'py, PyAny>>);

fn tree<'py>(data: &Bound<'py, PyAny>, levels: usize) -> PyResult<Tree<'py>> {
    if levels == 0 {
        let (rows, n) = sized(data, 0, levels)?;
        return Ok((Nested::Rows(vec![(); n]), vec![rows]));
    }
    // counts[d][i]: the children of node i at depth d (the root is depth 0).
    let mut counts: Vec<Vec<usize>> = Vec::with_capacity(levels);
    let mut frontier = items(data, 0, levels)?;
    counts.push(vec![frontier.len()]);
    for depth in 1..levels {
        let mut next = Vec::new();
        let mut level = Vec::with_capacity(frontier.len());
        for node in &frontier {
            let children = items(node, depth, levels)?;
            level.push(children.len());
            next.extend(children);
        }
        counts.push(level);
        frontier = next;
    }
    // Bottom up: the leaves, then one grouping per level above.
    let mut sequences = Vec::with_capacity(frontier.len());
    let mut nodes: Vec<Nested<()>> = Vec::with_capacity(frontier.len());
    for node in &frontier {
        let (rows, n) = sized(node, levels, levels)?;
        sequences.push(rows);
        nodes.push(Nested::Rows(vec![(); n]));
    }
    for level in counts.iter().rev() {
        let mut children = nodes.into_iter();
        nodes = level
            .iter()
            .map(|&n| Nested::Seqs(children.by_ref().take(n).collect()))
            .collect();
    }
    let root = nodes
        .pop()
        .ok_or_else(|| value("nested sequences: no root (a bug in lodt)"))?;
    Ok((root, sequences))
}

/// Rows given as (object arrays of) arrays stacked into one numpy array, as
/// Ray hands an element shape (one object array per dimension).
fn dense<'py>(
    np: &Bound<'py, PyModule>,
    obj: &Bound<'py, PyAny>,
    depth: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let array = np.call_method1("asarray", (obj,))?;
    let is_object = array
        .getattr("dtype")?
        .getattr("kind")?
        .extract::<String>()?
        == "O";
    let ndim: usize = array.getattr("ndim")?.extract()?;
    if !is_object || ndim == 0 {
        return Ok(array);
    }
    if array.len()? == 0 {
        return np.call_method1("empty", (0,));
    }
    if depth >= MAX_DEPTH {
        return Err(value(format!(
            "a row nested in object arrays deeper than {MAX_DEPTH} levels"
        )));
    }
    let parts: Vec<Bound<'py, PyAny>> = array
        .try_iter()?
        .map(|e| dense(np, &e?, depth + 1))
        .collect::<PyResult<_>>()?;
    np.call_method1("stack", (parts,))
}

/// from_nested(data, levels=1) -> LodTensor
///
/// A LoD tensor of `levels` LoD levels from nested sequences (lists,
/// tuples, numpy arrays, numpy object arrays of arrays): `data` is a
/// sequence of sequences, `levels` deep; the items of each last-level
/// sequence are its rows (scalars, or nested lists or arrays of one shape,
/// object arrays of arrays included), converted together by numpy (one
/// dtype). `levels=0`: `data` is the rows of a tensor without LoD. The LoD
/// is the crate's `LodTensor::from_nested` structure: a level with no
/// sequence is a ValueError.
#[pyfunction]
#[pyo3(signature = (data, levels = 1))]
pub fn from_nested(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    levels: usize,
) -> PyResult<Py<PyLodTensor>> {
    if levels > MAX_DEPTH {
        return Err(value(format!(
            "nested sequences of {levels} levels: at most {MAX_DEPTH} LoD levels"
        )));
    }
    let (nested, sequences) = tree(data, levels)?;
    let (lod, _) = nested.flatten(&[]).map_err(core_err)?;
    // The rows: each last-level sequence converted by numpy (empty ones
    // left out, so that they do not change the dtype), joined.
    let np = py.import("numpy")?;
    let mut blocks = Vec::with_capacity(sequences.len());
    for sequence in &sequences {
        if sequence.len().map_or(true, |n| n > 0) {
            blocks.push(dense(&np, sequence, 0)?);
        }
    }
    let array = match blocks.len() {
        0 => np.call_method1("empty", (0,))?,
        1 => blocks.swap_remove(0),
        _ => np.call_method1("concatenate", (blocks,))?,
    };
    let tensor = tensor_from_numpy(&array, lod)?;
    Py::new(py, PyLodTensor::new(tensor))
}

/// lod_from_row_offsets(levels) -> list[list[int]]
///
/// The LoD offsets of levels given as offsets in rows (top level first;
/// the last level's are its own offsets; each outer level's entries must be
/// boundaries of the level below): `Lod::try_from_row_offsets`.
#[pyfunction]
pub fn lod_from_row_offsets(levels: Vec<Vec<i64>>) -> PyResult<Vec<Vec<u64>>> {
    let levels = levels
        .into_iter()
        .enumerate()
        .map(|(k, level)| {
            level
                .into_iter()
                .map(|o| {
                    u64::try_from(o)
                        .map_err(|_| value(format!("level {k}: row offset {o} is negative")))
                })
                .collect::<PyResult<Vec<u64>>>()
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Lod::try_from_row_offsets(&levels)
        .map_err(core_err)?
        .to_offsets())
}
