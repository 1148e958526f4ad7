//! Under a file-size limit (`RLIMIT_FSIZE`, `ulimit -f`) a write fails with a
//! clear error instead of `SIGXFSZ` killing the CLI (issue 28 §5): the exit
//! code is non-zero, no temporary file is left, the original is untouched.

use lodt::format::{LodtFile, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

/// Runs the CLI with `args` under `ulimit -f blocks` (512-byte blocks in
/// POSIX `sh`): (exit code, signal, stderr).
fn lodt_limited(blocks: u64, args: &[&Path]) -> (Option<i32>, Option<i32>, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -f {blocks} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        out.status.signal(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A `.lodt` file of `n` batches of 1,000 int64 rows each (8 KB a batch).
fn sample(path: &Path, n: u64) {
    let mut w = Writer::create(path, Default::default()).unwrap();
    for k in 0..n {
        let lod = Lod::try_from_lengths(&[vec![400, 600]]).unwrap();
        let x = LodTensor::from_vec((0..1000).map(|i| i + k as i64).collect(), vec![1000], lod)
            .unwrap();
        w.write(&Batch::try_from_tensors([("x", x)]).unwrap())
            .unwrap();
    }
    w.finish().unwrap();
}

/// The names in `dir` other than `keep`.
fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

#[test]
fn convert_past_the_file_size_limit_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.lodt");
    sample(&input, 8);
    let output = dir.path().join("out.lodt");
    std::fs::write(&output, b"the old output").unwrap();
    // 16 blocks = 8 KiB, less than the 64 KB the output needs.
    let (code, signal, stderr) = lodt_limited(16, &[Path::new("convert"), &input, &output]);
    assert_eq!(signal, None, "killed by a signal: {stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    assert_eq!(
        others(dir.path(), &["in.lodt", "out.lodt"]),
        Vec::<String>::new()
    );
    assert_eq!(std::fs::read(&output).unwrap(), b"the old output");
    assert_eq!(LodtFile::open(&input).unwrap().num_batches(), 8);
}

#[test]
fn recover_past_the_file_size_limit_fails_cleanly_and_keeps_the_batches() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("torn.lodt");
    sample(&file, 8);
    // Cut the footer off (an interrupted writer): recover must write a new one.
    let whole = std::fs::read(&file).unwrap();
    let torn = &whole[..whole.len() - 100];
    std::fs::write(&file, torn).unwrap();
    let (code, signal, stderr) = lodt_limited(16, &[Path::new("recover"), &file]);
    assert_eq!(signal, None, "killed by a signal: {stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    assert!(
        stderr.contains("in place"),
        "the repair in place was tried: {stderr}"
    );
    assert_eq!(others(dir.path(), &["torn.lodt"]), Vec::<String>::new());
    assert_eq!(std::fs::read(&file).unwrap(), torn);
    // Without the limit, the same file recovers every complete batch.
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .arg("recover")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(LodtFile::open(&file).unwrap().num_batches(), 8);
}
