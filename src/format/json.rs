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

use crate::dtype::DType;
use crate::tensor::LodTensor;
use half::{bf16, f16};
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
///     lodt::format::tensor_json("x", &t)?,
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

/// Every value of `view` as JSON, comma-separated.
pub(crate) fn push_values(out: &mut String, view: &LodTensor) -> crate::Result<()> {
    fn ints<T: std::fmt::Display>(out: &mut String, v: &[T]) {
        push_list(out, v.iter().map(|x| x.to_string()));
    }
    match view.dtype() {
        DType::Bool => ints(out, view.as_slice::<bool>()?),
        DType::Int8 => ints(out, view.as_slice::<i8>()?),
        DType::Int16 => ints(out, view.as_slice::<i16>()?),
        DType::Int32 => ints(out, view.as_slice::<i32>()?),
        DType::Int64 => ints(out, view.as_slice::<i64>()?),
        DType::UInt8 => ints(out, view.as_slice::<u8>()?),
        DType::UInt16 => ints(out, view.as_slice::<u16>()?),
        DType::UInt32 => ints(out, view.as_slice::<u32>()?),
        DType::UInt64 => ints(out, view.as_slice::<u64>()?),
        DType::Float16 => push_list(
            out,
            view.as_slice::<f16>()?.iter().map(|x| float32(x.to_f32())),
        ),
        DType::BFloat16 => push_list(
            out,
            view.as_slice::<bf16>()?.iter().map(|x| float32(x.to_f32())),
        ),
        DType::Float32 => push_list(out, view.as_slice::<f32>()?.iter().map(|&x| float32(x))),
        DType::Float64 => push_list(out, view.as_slice::<f64>()?.iter().map(|&x| float64(x))),
    }
    Ok(())
}

fn non_finite(nan: bool, positive: bool) -> String {
    match (nan, positive) {
        (true, _) => "\"NaN\"".into(),
        (false, true) => "\"Infinity\"".into(),
        (false, false) => "\"-Infinity\"".into(),
    }
}

/// The shortest JSON number that reads back as `x` (as an f32), or a string
/// for NaN and infinities.
pub(crate) fn float32(x: f32) -> String {
    if x.is_finite() {
        serde_json::to_string(&x).unwrap_or_else(|_| "null".into())
    } else {
        non_finite(x.is_nan(), x > 0.0)
    }
}

/// The shortest JSON number that reads back as `x`, or a string for NaN and
/// infinities.
pub(crate) fn float64(x: f64) -> String {
    if x.is_finite() {
        serde_json::to_string(&x).unwrap_or_else(|_| "null".into())
    } else {
        non_finite(x.is_nan(), x > 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_round_trip_and_non_finite_are_strings() {
        assert_eq!(float32(0.1), "0.1");
        assert_eq!(float32(1.0), "1.0");
        assert_eq!(float32(-0.0), "-0.0");
        assert_eq!(float32(f32::INFINITY), "\"Infinity\"");
        assert_eq!(float32(f32::NEG_INFINITY), "\"-Infinity\"");
        assert_eq!(float64(f64::NAN), "\"NaN\"");
        assert_eq!(float64(1e300), "1e+300");
        for x in [f32::MIN_POSITIVE, f32::MAX, 1.0 / 3.0, 16777217.0] {
            assert_eq!(float32(x).parse::<f32>().unwrap(), x);
        }
        assert_eq!(float32(f16::from_f32(0.1).to_f32()), "0.099975586");
    }
}
