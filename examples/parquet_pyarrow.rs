//! Convert a `.lodt` dataset to Parquet (one row group per mini-batch) and
//! read it back; the README shows the pyarrow side.
//!
//! Run: `cargo run --example parquet_pyarrow [DIR]`, then in Python:
//!
//! ```python
//! import pyarrow.parquet as pq
//! t = pq.ParquetFile("DIR/frames.parquet").read_row_group(0)
//! print(t.schema)   # frames: large_list<item: fixed_size_list<item: fixed_size_list<item: float>[3]>[2] not null>
//! print(t.column("frames").chunk(0).offsets)        # LoD level 0
//! ```

use lodt::arrow::parquet::ParquetReader;
use lodt::convert::{ConvertOptions, convert};
use lodt::format::Writer;
use lodt::{Batch, Lod, LodTensor};
use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let dir = match std::env::args_os().nth(1) {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir(),
    };
    let lodt_path = dir.join("frames.lodt");
    let parquet_path = dir.join("frames.parquet");

    // Two mini-batches of videos: frames of 2x3 pixels, 1 LoD level.
    let mut writer = Writer::create(&lodt_path, Default::default())?;
    for (k, lengths) in [vec![3u64, 1, 2], vec![2, 2]].into_iter().enumerate() {
        let frames: u64 = lengths.iter().sum();
        let pixels: Vec<f32> = (0..frames * 6)
            .map(|p| p as f32 + 100.0 * k as f32)
            .collect();
        let videos = LodTensor::from_vec(
            pixels,
            vec![frames as usize, 2, 3],
            Lod::try_from_lengths(std::slice::from_ref(&lengths))?,
        )?;
        let labels = LodTensor::from_vec(
            vec![k as i32; lengths.len()],
            vec![lengths.len()],
            Lod::empty(),
        )?;
        writer.write(&Batch::try_from_tensors([
            ("frames", videos),
            ("label", labels),
        ])?)?;
    }
    writer.finish()?;

    let stats = convert(
        &lodt_path,
        &parquet_path,
        &ConvertOptions::default(),
        |_| {},
    )?;
    println!(
        "wrote {} ({} row groups)",
        parquet_path.display(),
        stats.batches
    );

    for batch in ParquetReader::open(&parquet_path, &Default::default())? {
        let batch = batch?;
        let frames = batch.get("frames").ok_or("no frames column")?;
        println!(
            "row group: frames {:?} with lengths {:?}, labels {:?}",
            frames.shape(),
            frames.lod().to_lengths(),
            batch
                .get("label")
                .ok_or("no label column")?
                .as_slice::<i32>()?
        );
    }
    Ok(())
}
