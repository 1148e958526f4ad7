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
