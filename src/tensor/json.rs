//! The JSON form of one tensor (or slice) that `lodt show --json` prints and
//! the test vectors in `spec/vectors/` record.
//!
//! ```text
//! {"name":"x","dtype":"float32","shape":[3,1],"lod":[[0,1,3]],"values":[1.5,"NaN",-0.0]}
//! ```
//!
//! - `lod`: one list of offsets per level, rebased to start at 0.
//! - `values`: every element, flattened in row-major order. Bools are
//!   `true`/`false`; integers are JSON integers; floats are the shortest
//!   decimal that reads back to the same value (float16 and bfloat16 are
//!   printed as their exact float32 value). JSON has no NaN or infinity: they
//!   are the strings `"NaN"`, `"Infinity"` and `"-Infinity"`.
//! - The object is printed on one line with no spaces, keys in this order.

use crate::dtype::Element;
use crate::tensor::LodTensor;
use std::fmt::Write;

/// The JSON of tensor `name`, as `lodt show --json` prints it:
/// `{"name":…,"dtype":…,"shape":[…],"lod":[[…],…],"values":[…]}` on one line,
/// `lod` rebased, values flattened row-major, floats as the shortest decimal
/// that reads back (f16/bf16 via their f32 value), NaN and infinities as the
/// strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
///
/// ```
/// use lodt::{Lod, LodTensor};
/// let t = LodTensor::from_vec(vec![1.5f32, f32::NAN, 0.1], vec![3],
///                             Lod::try_from_lengths(&[vec![1, 2]])?)?;
/// assert_eq!(
///     lodt::tensor::tensor_json("x", &t)?,
///     r#"{"name":"x","dtype":"float32","shape":[3],"lod":[[0,1,3]],"values":[1.5,"NaN",0.1]}"#
/// );
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn tensor_json(name: &str, view: &LodTensor) -> crate::Result<String> {
    let mut out = String::new();
    out.push_str("{\"name\":");
    out.push_str(&serde_json::to_string(name).unwrap_or_else(|_| "\"\"".into()));
    let _ = write!(out, ",\"dtype\":\"{}\",\"shape\":[", view.dtype().name());
    push_list(&mut out, view.shape().iter().map(|d| d.to_string()));
    out.push_str("],\"lod\":[");
    for l in 0..view.lod().num_levels() {
        if l > 0 {
            out.push(',');
        }
        out.push('[');
        push_list(&mut out, view.lod().offsets(l)?.map(|o| o.to_string()));
        out.push(']');
    }
    out.push_str("],\"values\":[");
    push_values(&mut out, view)?;
    out.push_str("]}");
    Ok(out)
}

fn push_list(out: &mut String, items: impl Iterator<Item = String>) {
    for (i, s) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&s);
    }
}

/// Every value of `view` as JSON ([`Element::to_json`]), comma-separated.
pub(crate) fn push_values(out: &mut String, view: &LodTensor) -> crate::Result<()> {
    crate::with_element!(view.dtype(), T => {
        push_list(out, view.as_slice::<T>()?.iter().map(|&x| x.to_json()));
    });
    Ok(())
}

/// Top-level row `row` of `tensor` as nested JSON lists, as `lodt head`
/// prints it: a tensor with `k` LoD levels gives `k` nested lists (one per
/// level) of its rows; a row with an element shape is a nested list of that
/// shape; a plain value otherwise (values as in [`tensor_json`]). A tensor
/// with no LoD gives row `row` itself; a 0-D tensor its one value.
///
/// ```
/// use lodt::{Lod, LodTensor, tensor::row_json};
/// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 2, 2]])?;
/// let t = LodTensor::from_vec((0..5i64).collect(), vec![5], lod)?;
/// assert_eq!(row_json(&t, 0)?, "[[0],[1,2]]");
/// assert_eq!(row_json(&t, 1)?, "[[3,4]]");
/// let m = LodTensor::from_vec(vec![0.5f32, 1.0, 2.0, 3.0], vec![2, 2], Lod::empty())?;
/// assert_eq!(row_json(&m, 1)?, "[2.0,3.0]");
/// assert!(row_json(&t, 2).is_err());
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn row_json(tensor: &LodTensor, row: usize) -> crate::Result<String> {
    row_json_capped(tensor, row, usize::MAX)
}

/// Top-level row `row` as [`row_json`] writes it, with at most `max_values`
/// values (an empty list counts as one): once they are written, each list
/// still open ends with the string `"... (N more)"`, N being how many of its
/// elements are left out. `lodt head` and `lodt cat` print rows this way
/// unless asked for `--full`; the work is bounded by `max_values` times the
/// nesting depth, whatever the row's size.
///
/// ```
/// use lodt::{Lod, LodTensor, tensor::row_json_capped};
/// let lod = Lod::try_from_lengths(&[vec![2, 1], vec![1, 4, 2]])?;
/// let t = LodTensor::from_vec((0..7i64).collect(), vec![7], lod)?;
/// assert_eq!(row_json_capped(&t, 0, 3)?, r#"[[0],[1,2,"... (2 more)"]]"#);
/// assert_eq!(row_json_capped(&t, 0, 1)?, r#"[[0],"... (1 more)"]"#);
/// assert_eq!(row_json_capped(&t, 0, 5)?, "[[0],[1,2,3,4]]");
/// # Ok::<(), lodt::Error>(())
/// ```
pub fn row_json_capped(tensor: &LodTensor, row: usize, max_values: usize) -> crate::Result<String> {
    let mut out = String::new();
    crate::with_element!(tensor.dtype(), T => {
        let values = tensor.as_slice::<T>()?;
        RowWriter { tensor, values, out: &mut out, budget: max_values }.top(row)?;
    });
    Ok(out)
}

/// The marker that ends a capped list: `,"... (N more)"` (no comma first in
/// an empty list).
fn push_more(out: &mut String, first: bool, more: usize) {
    if !first {
        out.push(',');
    }
    let _ = write!(out, "\"... ({more} more)\"");
}

/// Writes rows of one tensor as nested JSON.
struct RowWriter<'a, T> {
    tensor: &'a LodTensor,
    values: &'a [T],
    out: &'a mut String,
    /// Values (and empty lists) still to write; then lists end with a marker.
    budget: usize,
}

impl<T: Element> RowWriter<'_, T> {
    fn top(&mut self, row: usize) -> crate::Result<()> {
        let levels = self.tensor.lod().num_levels();
        if self.tensor.is_scalar() {
            if let Some(v) = self.values.first() {
                self.out.push_str(&v.to_json());
            }
            return Ok(());
        }
        let top = self.tensor.top_level_rows();
        if row >= top {
            return Err(crate::Error::OutOfRange {
                what: "top-level row",
                index: row as u64,
                len: top as u64,
            });
        }
        if levels == 0 {
            return self.row(row);
        }
        // Rows without bytes still print `[]` each: bound them.
        let rows = self.tensor.lod().row_range(0, row)?;
        let count = usize::try_from(rows.end - rows.start).unwrap_or(usize::MAX);
        self.tensor
            .check_rows_without_bytes(count, "the JSON of a top-level row")?;
        self.sequence(0, row)
    }

    /// Sequence `index` of level `level`.
    fn sequence(&mut self, level: usize, index: usize) -> crate::Result<()> {
        let lod = self.tensor.lod();
        let offsets = lod.level(level).ok_or(crate::Error::OutOfRange {
            what: "LoD level",
            index: level as u64,
            len: lod.num_levels() as u64,
        })?;
        let range = |i: usize| offsets.get(i).map(|o| o as usize);
        let (Some(begin), Some(end)) = (range(index), range(index + 1)) else {
            return Err(crate::Error::OutOfRange {
                what: "sequence",
                index: index as u64,
                len: offsets.num_sequences() as u64,
            });
        };
        self.out.push('[');
        if begin == end {
            self.budget = self.budget.saturating_sub(1);
        }
        for (n, child) in (begin..end).enumerate() {
            if self.budget == 0 {
                push_more(self.out, n == 0, end - child);
                break;
            }
            if n > 0 {
                self.out.push(',');
            }
            if level + 1 == lod.num_levels() {
                self.row(child)?;
            } else {
                self.sequence(level + 1, child)?;
            }
        }
        self.out.push(']');
        Ok(())
    }

    /// Row `row` (of the tensor's rows): a value, or a list of its element shape.
    fn row(&mut self, row: usize) -> crate::Result<()> {
        let numel = self.tensor.row_numel();
        let start = row * numel;
        let values = self
            .values
            .get(start..start + numel)
            .ok_or(crate::Error::OutOfRange {
                what: "row",
                index: row as u64,
                len: self.tensor.rows() as u64,
            })?;
        let shape = self.tensor.element_shape();
        if shape.is_empty() {
            if let Some(v) = values.first() {
                self.out.push_str(&v.to_json());
                self.budget = self.budget.saturating_sub(1);
            }
            return Ok(());
        }
        self.block(values, shape);
        Ok(())
    }

    /// `values` as nested lists of `shape`.
    fn block(&mut self, values: &[T], shape: &[usize]) {
        self.out.push('[');
        if values.is_empty() {
            self.budget = self.budget.saturating_sub(1);
        }
        match shape {
            [] | [_] => {
                let shown = values.len().min(self.budget);
                push_list(self.out, values[..shown].iter().map(|x| x.to_json()));
                self.budget -= shown;
                if shown < values.len() {
                    push_more(self.out, shown == 0, values.len() - shown);
                }
            }
            [first, rest @ ..] => {
                let inner = values.len() / (*first).max(1);
                let chunks = values.chunks(inner.max(1)).take(*first);
                let total = chunks.len();
                for (n, chunk) in chunks.enumerate() {
                    if self.budget == 0 {
                        push_more(self.out, n == 0, total - n);
                        break;
                    }
                    if n > 0 {
                        self.out.push(',');
                    }
                    self.block(chunk, rest);
                }
            }
        }
        self.out.push(']');
    }
}
