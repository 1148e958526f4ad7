//! Safe writes (issue 9, parts 1 and 6, and the repro of part 3): an output
//! is never the input, a failed write leaves what was there untouched,
//! permissions, owner and symlinks survive a rewrite, stale temporary files
//! are cleaned, and `recover` does something sensible with the file two
//! unlocked appenders corrupted.

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use lodt::atomic::{self, AtomicError};
use lodt::convert::{self, ConvertError};
use lodt::format::{self, FormatError, LodtFile, RecoverOptions, StreamReader, Writer};
use lodt::{Batch, BatchReader, Lod, LodTensor};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn lodt(args: &[&Path]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn p(s: &str) -> &Path {
    Path::new(s)
}

/// Batch `k`: a 1-level LoD tensor `x` of `k + 3` rows and a plain `label`.
fn batch(k: i64) -> Batch {
    let lod = Lod::try_from_lengths(&[vec![1, k as u64 + 2]]).unwrap();
    let x = LodTensor::from_vec(
        (0..k + 3).map(|i| i * 10 + k).collect(),
        vec![k as usize + 3],
        lod,
    )
    .unwrap();
    let label = LodTensor::from_vec(vec![k, -k], vec![2], Lod::empty()).unwrap();
    Batch::try_from_tensors([("x", x), ("label", label)]).unwrap()
}

/// A `.lodt` file of `n` batches at `path`.
fn sample(path: &Path, n: i64) {
    let mut w = Writer::create(path, Default::default()).unwrap();
    for k in 0..n {
        w.write(&batch(k)).unwrap();
    }
    w.finish().unwrap();
}

/// The names in `dir` that look like temporary files.
fn temps(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    names.sort();
    names
}

/// Every output format, each written from the same 2-batch (or, for
/// Paddle, 1-batch) `.lodt` sample: (path, the sample it came from).
fn outputs(dir: &Path) -> Vec<PathBuf> {
    let two = dir.join("two.lodt");
    let one = dir.join("one.lodt");
    sample(&two, 2);
    sample(&one, 1);
    let mut made = vec![two.clone()];
    for (name, from) in [
        ("x.parquet", &two),
        ("x.arrow", &two),
        ("x.arrows", &two),
        ("x.pdparams", &one),
    ] {
        let out = dir.join(name);
        convert::convert(from, &out, &Default::default(), |_| {}).unwrap();
        made.push(out);
    }
    made
}

#[test]
fn converting_a_file_over_itself_is_refused_and_leaves_it_intact() {
    let dir = tempfile::tempdir().unwrap();
    for file in outputs(dir.path()) {
        let before = std::fs::read(&file).unwrap();
        let ext = file.extension().unwrap().to_str().unwrap().to_owned();
        let link = dir.path().join(format!("link.{ext}"));
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let hard = dir.path().join(format!("hard.{ext}"));
        std::fs::hard_link(&file, &hard).unwrap();
        for (input, output) in [
            (&file, &file),
            (&file, &link),
            (&link, &file),
            (&file, &hard),
            (&hard, &link),
        ] {
            let (code, _, err) = lodt(&[p("convert"), input, output]);
            assert_eq!(code, 2, "{input:?} -> {output:?}: {err}");
            assert!(err.contains("same file as the input"), "{err}");
            assert_eq!(std::fs::read(&file).unwrap(), before, "{file:?}");
            let err = convert::convert(input, output, &Default::default(), |_| {}).unwrap_err();
            assert!(
                matches!(err, ConvertError::Atomic(AtomicError::SameFile { .. })),
                "{err}"
            );
        }
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&file).unwrap(), before, "{file:?}");
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_file(&hard).unwrap();
    }
    assert_eq!(temps(dir.path()), Vec::<String>::new());
}

/// An Arrow IPC file whose second column is a string (lodt cannot read it).
fn arrow_with_strings(path: &Path) {
    let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
    let names: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
    let batch = RecordBatch::try_from_iter([("id", ids), ("name", names)]).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = arrow_ipc::writer::FileWriter::try_new(file, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

#[test]
fn a_failed_conversion_leaves_the_existing_output_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let existing = outputs(dir.path());
    let strings = dir.path().join("strings.arrow");
    arrow_with_strings(&strings);
    // A .lodt input whose batch 1 is damaged: batch 0 is converted (and
    // written) before the damage is found.
    let damaged = dir.path().join("damaged.lodt");
    sample(&damaged, 2);
    let body = LodtFile::open(&damaged)
        .unwrap()
        .tensor_buffers(1, "x")
        .unwrap()
        .body;
    let mut bytes = std::fs::read(&damaged).unwrap();
    bytes[body.start] ^= 1;
    std::fs::write(&damaged, &bytes).unwrap();

    for out in &existing {
        let before = std::fs::read(out).unwrap();
        for input in [&strings, &damaged] {
            let (code, _, err) = lodt(&[p("convert"), input, out]);
            assert_ne!(code, 0, "{input:?} -> {out:?}");
            assert!(err.starts_with("error: "), "{err}");
            assert_eq!(std::fs::read(out).unwrap(), before, "{input:?} -> {out:?}");
        }
    }
    // The string column is named, and the damage too.
    let (_, _, err) = lodt(&[p("convert"), &strings, &existing[1]]);
    assert!(
        err.contains("column \"name\": unsupported Arrow type Utf8"),
        "{err}"
    );
    let (_, _, err) = lodt(&[p("convert"), &damaged, &existing[1]]);
    assert!(err.contains("checksum mismatch in batch 1"), "{err}");
    // A Paddle output of an unsupported dtype fails before writing anything.
    let u16s = LodTensor::from_vec(vec![1u16, 2], vec![2], Lod::empty()).unwrap();
    let pd = &existing[4];
    let before = std::fs::read(pd).unwrap();
    assert!(lodt::paddle::write_tensor_file(pd, &u16s).is_err());
    assert_eq!(std::fs::read(pd).unwrap(), before);
    // Nothing is left behind.
    assert_eq!(temps(dir.path()), Vec::<String>::new());
}

/// Whether this process may give files away (root, usually).
fn can_chown(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, b"").unwrap();
    let ok = std::os::unix::fs::chown(&probe, Some(4321), Some(4321)).is_ok();
    std::fs::remove_file(&probe).unwrap();
    ok
}

/// Cuts the trailer off `path` (a crash during an append).
fn cut_footer(path: &Path) {
    let len = std::fs::metadata(path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len - 30)
        .unwrap();
}

#[test]
fn permissions_owner_and_symlinks_survive_recover_and_convert() {
    let dir = tempfile::tempdir().unwrap();
    let chown = can_chown(dir.path());
    if !chown {
        eprintln!("not permitted to chown here: checking permissions and symlinks only");
    }
    let data = dir.path().join("data.lodt");
    let link = dir.path().join("link.lodt");
    sample(&data, 3);
    cut_footer(&data);
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o600)).unwrap();
    if chown {
        std::os::unix::fs::chown(&data, Some(1234), Some(5678)).unwrap();
    }
    std::os::unix::fs::symlink("data.lodt", &link).unwrap();

    let (code, out, err) = lodt(&[p("recover"), &link]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("kept 3 batches"), "{out}");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("data.lodt"));
    let meta = std::fs::metadata(&data).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o600);
    if chown {
        assert_eq!((meta.uid(), meta.gid()), (1234, 5678));
    }
    assert_eq!(LodtFile::open(&link).unwrap().num_batches(), 3);

    // convert over an existing output through a symlink, and over one
    // through a dangling symlink (which creates the target).
    let out = dir.path().join("out.parquet");
    let out_link = dir.path().join("out-link.parquet");
    convert::convert(&data, &out, &Default::default(), |_| {}).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    if chown {
        std::os::unix::fs::chown(&out, Some(42), Some(43)).unwrap();
    }
    std::os::unix::fs::symlink(&out, &out_link).unwrap();
    let three = dir.path().join("three.lodt");
    sample(&three, 3);
    let (code, _, err) = lodt(&[p("convert"), &three, &out_link, p("--keep-batches")]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::symlink_metadata(&out_link).unwrap().is_symlink());
    let meta = std::fs::metadata(&out).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640);
    if chown {
        assert_eq!((meta.uid(), meta.gid()), (42, 43));
    }
    let back = convert::Format::from_path(&out_link)
        .unwrap()
        .open_reader(&out_link, &Default::default())
        .unwrap();
    assert_eq!(back.num_batches(), Some(3));

    let dangling = dir.path().join("dangling.arrow");
    std::os::unix::fs::symlink("made.arrow", &dangling).unwrap();
    let (code, _, err) = lodt(&[p("convert"), &three, &dangling]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::symlink_metadata(&dangling).unwrap().is_symlink());
    assert!(dir.path().join("made.arrow").is_file());

    // The .lodt writer and the Paddle writer keep them too.
    std::fs::set_permissions(&three, std::fs::Permissions::from_mode(0o604)).unwrap();
    format::save_batch(&three, &batch(9)).unwrap();
    assert_eq!(std::fs::metadata(&three).unwrap().mode() & 0o7777, 0o604);
    let pd = dir.path().join("t.pdtensor");
    let t = LodTensor::from_vec(vec![1i64], vec![1], Lod::empty()).unwrap();
    lodt::paddle::write_tensor_file(&pd, &t).unwrap();
    std::fs::set_permissions(&pd, std::fs::Permissions::from_mode(0o600)).unwrap();
    lodt::paddle::write_tensor_file(&pd, &t).unwrap();
    assert_eq!(std::fs::metadata(&pd).unwrap().mode() & 0o7777, 0o600);
    assert_eq!(temps(dir.path()), Vec::<String>::new());
}

#[test]
fn stale_temps_are_cleaned_by_the_next_writer_and_live_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.lodt");
    sample(&data, 1);
    let stale = |n: u32| dir.path().join(format!(".d.lodt.{n}.0.tmp"));
    let live = dir.path().join(".d.lodt.77.1.tmp");
    std::fs::write(&live, b"being written").unwrap();
    let holder = std::fs::File::open(&live).unwrap();
    holder.lock().unwrap();
    let unrelated = [
        ".d.lodt.tmp",
        ".e.lodt.1.0.tmp",
        "d.lodt.1.0.tmp",
        ".d.lodt.x.0.tmp",
    ];
    for name in unrelated {
        std::fs::write(dir.path().join(name), b"not ours").unwrap();
    }

    // The next atomic writer, the next appender and recover each clean.
    std::fs::write(stale(1), b"left by a killed writer").unwrap();
    format::save_batch(&data, &batch(1)).unwrap();
    assert!(!stale(1).exists());
    std::fs::write(stale(2), b"left by a killed writer").unwrap();
    Writer::append(&data).unwrap().finish().unwrap();
    assert!(!stale(2).exists());
    std::fs::write(stale(3), b"left by a killed writer").unwrap();
    assert!(!format::recover(&data).unwrap().rewritten);
    assert!(!stale(3).exists());

    // A live writer's file, and files not of this naming, are kept.
    assert!(live.exists());
    for name in unrelated {
        assert!(dir.path().join(name).exists(), "{name}");
    }
    drop(holder);
    assert_eq!(atomic::clean_stale_temps(&data), 1);
    assert!(!live.exists());
}

#[test]
fn recover_refuses_the_concurrent_append_repro_and_salvages_it_on_request() {
    // Two appenders without a lock wrote this file: its footer (3 batches)
    // is valid, batch 2 is a mix of both writers' bytes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("repro.lodt");
    std::fs::copy("../tests/data/repro/corrupt_concurrent_append.lodt", &path).unwrap();
    let original = std::fs::read(&path).unwrap();
    let file = LodtFile::open(&path).unwrap();
    assert_eq!(file.num_batches(), 3);
    let err = file.verify().unwrap_err();
    assert!(
        matches!(&err, FormatError::Checksum { at, .. } if at.batch == Some(2)),
        "{err}"
    );
    let intact: Vec<Batch> = (0..2).map(|k| file.read_batch(k).unwrap()).collect();
    drop(file);
    let mut stream = StreamReader::try_new(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(stream.next().unwrap().unwrap(), intact[0]);
    assert_eq!(stream.next().unwrap().unwrap(), intact[1]);
    assert!(stream.next().unwrap().is_err());

    // The footer says batch 2 was committed: recover does not drop it by itself.
    let err = format::recover(&path).unwrap_err();
    assert!(matches!(err, FormatError::Refused(_)), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("valid footer (of 3 batches)"), "{msg}");
    assert!(
        msg.contains("stops at batch 2: checksum mismatch in batch 2"),
        "{msg}"
    );
    assert!(
        msg.contains("keep batches 0 to 1 and drop batch 2,"),
        "{msg}"
    );
    assert!(msg.contains("--drop-damaged"), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), original);
    let (code, _, err) = lodt(&[p("recover"), &path]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), original);

    // Asked to, it keeps the two intact batches.
    let options = RecoverOptions {
        drop_damaged: true,
        ..Default::default()
    };
    let report = format::recover_with_options(&path, options, &mut |_, _| {}).unwrap();
    assert_eq!(
        (report.batches, report.rewritten, report.in_place),
        (2, true, false)
    );
    assert_eq!(report.kept_bytes, 0x2340);
    assert_eq!(report.dropped_bytes, original.len() as u64 - 0x2340);
    let file = LodtFile::open(&path).unwrap();
    file.verify().unwrap();
    assert_eq!(file.read_batch(0).unwrap(), intact[0]);
    assert_eq!(file.read_batch(1).unwrap(), intact[1]);
    let mut again = dir.path().join("again.lodt");
    std::fs::write(&again, &original).unwrap();
    let (code, out, err) = lodt(&[p("recover"), p("--drop-damaged"), &again]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("kept 2 batches"), "{out}");
    assert_eq!(
        std::fs::read(&again).unwrap(),
        std::fs::read(&path).unwrap()
    );
    again.pop();
    assert_eq!(temps(&again), Vec::<String>::new());
}

#[test]
fn info_says_a_file_is_being_written_instead_of_advising_recover() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.lodt");
    sample(&path, 1);
    // Batches larger than the writer's buffer, so the old footer is
    // overwritten (a 2.0 writer holds the last batch until the next one is
    // checksummed: two batches).
    let big = LodTensor::from_vec(vec![7u8; 1 << 20], vec![1 << 20], Lod::empty()).unwrap();
    let big = Batch::try_from_tensors([("big", big)]).unwrap();
    let mut w = Writer::append(&path).unwrap();
    w.write(&big).unwrap();
    w.write(&big).unwrap();
    let (code, _, err) = lodt(&[p("info"), &path]);
    assert_eq!(code, 1);
    assert!(err.contains("is being written by another process"), "{err}");
    assert!(!err.contains("recover"), "{err}");
    let err = LodtFile::open(&path).unwrap_err();
    assert!(
        matches!(err, FormatError::Atomic(AtomicError::Locked { .. })),
        "{err}"
    );
    w.finish().unwrap();
    let (code, out, err) = lodt(&[p("info"), &path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("batches   3"), "{out}");

    // A file cut by a crash (no writer holds the lock) is another matter.
    cut_footer(&path);
    let (code, _, err) = lodt(&[p("info"), &path]);
    assert_eq!(code, 1);
    assert!(err.contains("no valid footer"), "{err}");
    assert!(err.contains("`lodt recover` rebuilds the footer"), "{err}");
}

#[test]
fn an_append_that_overwrote_part_of_a_long_footer_is_unfinished_not_corrupt() {
    // 3000 batches: a 72 KB index. An append's first batch (under 1 KB)
    // overwrites the start of the footer; the old trailer is still there.
    let empty = Batch::new();
    let old = format::to_bytes(std::iter::repeat_n(&empty, 3000), Default::default()).unwrap();
    let full = format::to_bytes(std::iter::repeat_n(&empty, 3001), Default::default()).unwrap();
    let file = LodtFile::from_bytes(&full).unwrap();
    let new_batch = file.batch_range(3000).unwrap();
    let (start, end) = (new_batch.start as usize, new_batch.end as usize);
    assert_eq!(
        start,
        LodtFile::from_bytes(&old)
            .unwrap()
            .batch_range(2999)
            .unwrap()
            .end as usize
    );
    assert!(end < old.len() - 64);
    let mut crashed = old.clone();
    crashed[start..end].copy_from_slice(&full[start..end]);

    let err = LodtFile::from_bytes(&crashed).unwrap_err();
    assert!(matches!(err, FormatError::NoFooter { .. }), "{err}");
    assert!(
        err.to_string().contains("an append overwrote the footer"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.lodt");
    std::fs::write(&path, &crashed).unwrap();
    let (code, _, err) = lodt(&[p("info"), &path]);
    assert_eq!(code, 1);
    assert!(err.contains("`lodt recover` rebuilds the footer"), "{err}");
    let report = format::recover(&path).unwrap();
    assert_eq!((report.batches, report.kept_bytes), (3001, end as u64));
    assert_eq!(std::fs::read(&path).unwrap(), full);
}
