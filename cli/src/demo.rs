//! `lodt demo [DIR]`: writes a sample dataset, reopens it, slices it, verifies it.

use crate::common::{self, CliError, human, list};
use lodt::format::{LodtFile, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Frame height and width of the video-like tensor.
const H: usize = 48;
const W: usize = 64;

#[derive(clap::Args)]
pub struct Args {
    /// The directory to write `demo.lodt` into (created if needed).
    #[arg(default_value = "lodt-demo")]
    dir: PathBuf,
    /// The number of batches.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    batches: u64,
}

/// A small deterministic generator (splitmix64), so every run writes the same file.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// Batch `k`: articles of sentences of words (2-level LoD), one label per
/// article, and one video of frames per article (1-level LoD over
/// `[frames, H, W]`).
fn make_batch(k: u64) -> Result<Batch, CliError> {
    let mut rng = Rng(k);
    let articles = rng.range(3, 6);
    let sentences: Vec<u64> = (0..articles).map(|_| rng.range(1, 4)).collect();
    let words: Vec<u64> = (0..sentences.iter().sum::<u64>())
        .map(|_| rng.range(2, 9))
        .collect();
    let rows = words.iter().sum::<u64>() as usize;
    let ids: Vec<i64> = (0..rows).map(|_| rng.range(1, 29_999) as i64).collect();
    let lod = Lod::try_from_lengths(&[sentences, words]).map_err(CliError::failure)?;
    let words = LodTensor::from_vec(ids, vec![rows, 1], lod).map_err(CliError::failure)?;
    let labels: Vec<i64> = (0..articles).map(|_| rng.range(0, 1) as i64).collect();
    let labels = LodTensor::from_vec(labels, vec![articles as usize], Lod::empty())
        .map_err(CliError::failure)?;
    // One video per article: every tensor of a batch has the same number of
    // top-level rows, as Arrow, Parquet and datasets need.
    let lengths: Vec<u64> = (0..articles).map(|_| rng.range(8, 24)).collect();
    let frames = lengths.iter().sum::<u64>() as usize;
    let mut pixels = vec![0u8; frames * H * W];
    for (i, p) in pixels.iter_mut().enumerate() {
        let (f, y, x) = (i / (H * W), (i / W) % H, i % W);
        *p = (x + y + 3 * f) as u8 ^ (k as u8);
    }
    let lod = Lod::try_from_lengths(&[lengths]).map_err(CliError::failure)?;
    let frames = LodTensor::from_vec(pixels, vec![frames, H, W], lod).map_err(CliError::failure)?;
    let mut batch =
        Batch::try_from_tensors([("words", words), ("frames", frames), ("labels", labels)])
            .map_err(CliError::failure)?;
    // The same batch metadata in every batch: an Arrow or Parquet file
    // stores one metadata map.
    batch.metadata_mut().insert("split".into(), "train".into());
    Ok(batch)
}

pub fn run(args: Args) -> Result<(), CliError> {
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| CliError::failure(format!("creating {}: {e}", common::path(&args.dir))))?;
    let path = args.dir.join("demo.lodt");
    let mut out = common::stdout();

    // 1. Write, streaming: one batch in memory at a time.
    let started = Instant::now();
    let meta: BTreeMap<String, String> = [
        ("source".to_string(), "lodt demo".to_string()),
        ("frame_size".to_string(), format!("{H}x{W}")),
    ]
    .into();
    let bar = common::progress_count(args.batches, "writing");
    let mut writer = Writer::create(&path, meta)?;
    for k in 0..args.batches {
        writer.write(&make_batch(k)?)?;
        bar.inc(1);
    }
    writer.finish()?;
    bar.finish_and_clear();
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    writeln!(
        out,
        "wrote {}: {} of words (int64, 2-level LoD: articles > sentences > words), \
         frames (uint8 [frames, {H}, {W}], 1-level LoD: videos > frames) and labels; {} in {:.2} s",
        common::path(&path),
        common::plural(args.batches, "batch", "batches"),
        human(size),
        started.elapsed().as_secs_f64()
    )?;

    // 2. Reopen, memory-mapped.
    let file = LodtFile::open(&path)?;
    writeln!(
        out,
        "reopened it memory-mapped: format {}, {}, metadata source={:?}",
        file.version(),
        common::plural(file.num_batches() as u64, "batch", "batches"),
        file.metadata()
            .get("source")
            .map(String::as_str)
            .unwrap_or("")
    )?;

    // 3. Slice, in place.
    let k = 7.min(file.num_batches() - 1);
    let batch = file.batch(k)?;
    let map = file.storage().map_or(&[][..], |s| s.bytes());
    let offset_in_map =
        |bytes: &[u8]| (bytes.as_ptr() as usize).saturating_sub(map.as_ptr() as usize);
    let words = batch.tensor("words")?;
    let sentence = words.branch(&[1, 0]).map_err(CliError::failure)?;
    let ids = sentence.as_slice::<i64>().map_err(CliError::failure)?;
    writeln!(
        out,
        "batch {k}, words <1,0> (article 1, sentence 0): {} words {} read in place at file offset {}: 0 bytes copied",
        ids.len(),
        list(ids),
        offset_in_map(sentence.as_bytes())
    )?;
    let frames = batch.tensor("frames")?;
    let video = frames.branch(&[1]).map_err(CliError::failure)?;
    writeln!(
        out,
        "batch {k}, frames <1> (video 1): shape {}, {} read in place at file offset {}",
        list(video.shape()),
        human(video.as_bytes().len() as u64),
        offset_in_map(video.as_bytes())
    )?;

    // 4. Verify every checksum.
    let bar = common::progress(file.file_size(), "verifying");
    let report = file.verify_with_progress(&mut |done, _| bar.set_position(done));
    bar.finish_and_clear();
    let report = report?;
    writeln!(
        out,
        "verified: {}, {}, every checksum, padding byte and LoD rule of {}",
        common::plural(report.batches as u64, "batch", "batches"),
        common::plural(report.tensors as u64, "tensor", "tensors"),
        human(report.file_bytes)
    )?;
    let p = common::path(&path);
    // As the user can type them: `lodt`, `cargo run -p lodt-cli --` or a path.
    let lodt = crate::invocation::command();
    writeln!(out, "next: {lodt} info {p}")?;
    writeln!(out, "      {lodt} head {p} -n 3")?;
    writeln!(
        out,
        "      {lodt} show {p} --batch {k} --tensor words --branch 1,0 --json"
    )?;
    writeln!(out, "      {lodt} verify {p}")?;
    let dir = common::path(&args.dir);
    writeln!(out, "      {lodt} convert {p} {dir}/demo.parquet")?;
    common::finish(out)
}
