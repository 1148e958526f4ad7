//! Loads a PaddlePaddle combined parameter file (`save_combine` output: tensors
//! back to back, no names) and prints each tensor's name, dtype, shape, LoD and
//! first values.
//!
//! ```text
//! cargo run --example load_paddle_params                       # the bundled fixture
//! cargo run --example load_paddle_params -- model.pdiparams    # names tensor0, tensor1, ...
//! cargo run --example load_paddle_params -- model.pdiparams fc_0.b_0,fc_0.w_0
//! ```

use half::{bf16, f16};
use lodt::{DType, Element, LodTensor, paddle};
use std::fmt::Debug;

/// The bundled fixture, written by PaddlePaddle 2.6.2, and its tensors' names.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/paddle/combined.pdparams"
);
const FIXTURE_NAMES: [&str; 8] = [
    "seed_2level_int64",
    "seed_1level_float32",
    "video_like_float32",
    "plain_0level_float64",
    "int32_3level",
    "uint8_1level",
    "float16_1level",
    "bool_1level",
];

/// Up to `n` first values, formatted.
fn first<T: Element + Debug>(t: &LodTensor, n: usize) -> Result<String, lodt::Error> {
    let values = t.as_slice::<T>()?;
    let shown: Vec<String> = values.iter().take(n).map(|v| format!("{v:?}")).collect();
    let more = if values.len() > n { ", ..." } else { "" };
    Ok(format!("[{}{more}]", shown.join(", ")))
}

fn first_values(t: &LodTensor, n: usize) -> Result<String, lodt::Error> {
    match t.dtype() {
        DType::Bool => first::<bool>(t, n),
        DType::Int8 => first::<i8>(t, n),
        DType::Int16 => first::<i16>(t, n),
        DType::Int32 => first::<i32>(t, n),
        DType::Int64 => first::<i64>(t, n),
        DType::UInt8 => first::<u8>(t, n),
        DType::UInt16 => first::<u16>(t, n),
        DType::UInt32 => first::<u32>(t, n),
        DType::UInt64 => first::<u64>(t, n),
        DType::Float16 => first::<f16>(t, n),
        DType::BFloat16 => first::<bf16>(t, n),
        DType::Float32 => first::<f32>(t, n),
        DType::Float64 => first::<f64>(t, n),
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (path, names): (String, Option<Vec<String>>) = match args.next() {
        None => (
            FIXTURE.to_string(),
            Some(FIXTURE_NAMES.iter().map(|s| s.to_string()).collect()),
        ),
        Some(path) => (
            path,
            args.next()
                .map(|list| list.split(',').map(str::to_string).collect()),
        ),
    };
    let names: Option<Vec<&str>> = names
        .as_ref()
        .map(|v| v.iter().map(String::as_str).collect());

    let batch = paddle::read_batch_file(&path, names.as_deref())?;
    println!("{path}: {} tensors", batch.len());
    for (name, t) in batch.iter() {
        println!(
            "{name:<22} {:<8} shape {:<12} lod {:<40} {}",
            t.dtype().name(),
            format!("{:?}", t.shape()),
            t.lod().to_string(),
            first_values(t, 6)?
        );
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
