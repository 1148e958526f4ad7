//! The CLI as a newcomer meets it (issue 30, item 6): the demo, then info,
//! head, cat and convert on its output, exactly as printed.

use lodt::format::Writer;
use lodt::{Batch, Lod, LodTensor};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

const LODT: &str = env!("CARGO_BIN_EXE_lodt");

/// `lodt args` in `dir`, not as `cargo run` (no `CARGO_PKG_NAME`).
fn lodt_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(LODT)
        .args(args)
        .current_dir(dir)
        .env_remove("CARGO_PKG_NAME")
        .output()
        .expect("the lodt binary runs")
}

/// Runs `lodt args` in `dir`, asserts exit code `code`, returns (stdout, stderr).
fn run(dir: &Path, args: &[&str], code: i32) -> (String, String) {
    let out = lodt_in(dir, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "lodt {args:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    (stdout, stderr)
}

/// A directory with the demo's output in `lodt-demo/demo.lodt`.
fn demo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), &["demo"], 0);
    dir
}

/// The top-level rows `info --json` counts, summed over the batches.
fn info_rows(dir: &Path, file: &str) -> u64 {
    let (json, _) = run(dir, &["info", file, "--json"], 0);
    let v: Value = serde_json::from_str(&json).unwrap();
    v["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["top_level_rows"].as_u64().unwrap())
        .sum()
}

#[test]
fn the_demo_converts_to_parquet_arrow_and_a_dataset_with_no_flags() {
    let dir = demo();
    let d = dir.path();
    let rows = info_rows(d, "lodt-demo/demo.lodt");
    assert!(rows > 32, "{rows}");
    for (out, what) in [
        ("demo.parquet", "Parquet"),
        ("demo.arrow", "Arrow IPC file"),
    ] {
        let (stdout, _) = run(d, &["convert", "lodt-demo/demo.lodt", out], 0);
        assert!(
            stdout.starts_with(&format!(
                "wrote {out} ({what}{}: 32 batches, 96 tensors, {rows} top-level rows, ",
                if what == "Parquet" { ", snappy" } else { "" }
            )),
            "{stdout}"
        );
        // And back, row for row.
        let (stdout, _) = run(d, &["convert", out, &format!("{out}.lodt")], 0);
        assert!(
            stdout.contains(&format!("{rows} top-level rows")),
            "{stdout}"
        );
    }
    let (stdout, _) = run(d, &["convert", "lodt-demo/demo.lodt", "demo-ds/"], 0);
    assert!(
        stdout.starts_with(&format!(
            "wrote the dataset demo-ds/ (1 shard, 32 batches, {rows} sequences, "
        )),
        "{stdout}"
    );
    let (stdout, _) = run(d, &["verify", "demo-ds"], 0);
    assert!(stdout.contains("ok: 1 shard, 32 batches"), "{stdout}");
}

/// A file whose tensors `a` and `b` agree on top-level rows, `c` does not,
/// and whose batch metadata varies.
fn mismatched(path: &Path) {
    let mut writer = Writer::create(path, BTreeMap::new()).unwrap();
    for k in 0..3i64 {
        let a = LodTensor::from_vec(vec![k, k], vec![2], Lod::empty()).unwrap();
        let b = LodTensor::from_vec(vec![1.0f32, 2.0], vec![2], Lod::empty()).unwrap();
        let c = LodTensor::from_vec(vec![7u8; 3], vec![3], Lod::empty()).unwrap();
        let mut batch = Batch::try_from_tensors([("a", a), ("b", b), ("c", c)]).unwrap();
        batch.metadata_mut().insert("step".into(), k.to_string());
        writer.write(&batch).unwrap();
    }
    writer.finish().unwrap();
}

#[test]
fn convert_errors_name_every_flag_that_works_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mismatched(&d.join("in.lodt"));
    for out in ["out.parquet", "out.arrow"] {
        let (_, stderr) = run(d, &["convert", "in.lodt", out], 1);
        assert!(
            stderr.contains("column \"c\" has 3 top-level rows but column \"a\" has 2")
                && stderr
                    .ends_with("; to convert this input, add: --columns a,b --metadata first\n"),
            "{stderr}"
        );
        // The flags it names work, as they are.
        let (stdout, _) = run(
            d,
            &[
                "convert",
                "in.lodt",
                out,
                "--columns",
                "a,b",
                "--metadata",
                "first",
            ],
            0,
        );
        assert!(
            stdout.contains(": 3 batches, 6 tensors, 6 top-level rows, "),
            "{stdout}"
        );
    }
    // A dataset keeps each batch's metadata: only the columns are named.
    let (_, stderr) = run(d, &["convert", "in.lodt", "ds/"], 1);
    assert!(
        stderr.contains("top-level sequences of tensor \"c\": expected 2")
            && stderr.ends_with("; to convert this input, add: --columns a,b\n"),
        "{stderr}"
    );
    let (stdout, _) = run(d, &["convert", "in.lodt", "ds/", "--columns", "a,b"], 0);
    assert!(
        stdout.contains("(1 shard, 3 batches, 6 sequences, "),
        "{stdout}"
    );
    // With the columns chosen, only the metadata flag is left to name.
    let (_, stderr) = run(
        d,
        &["convert", "in.lodt", "x.parquet", "--columns", "a,b"],
        1,
    );
    assert!(
        stderr.ends_with("; to convert this input, add: --metadata first\n"),
        "{stderr}"
    );
}

#[test]
fn option_values_are_spelled_by_the_crate() {
    let dir = tempfile::tempdir().unwrap();
    let (_, stderr) = run(
        dir.path(),
        &["convert", "a.lodt", "b.parquet", "--metadata", "keep"],
        2,
    );
    assert!(
        stderr.contains("expected error or first, found \"keep\""),
        "{stderr}"
    );
    assert_eq!(
        "keep"
            .parse::<lodt::arrow::MetadataPolicy>()
            .unwrap_err()
            .to_string(),
        "invalid argument: expected error or first, found \"keep\""
    );
    assert!(
        stderr.contains("invalid argument: expected error or first"),
        "{stderr}"
    );
}

#[test]
fn a_missing_input_is_no_such_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for args in [
        &["convert", "nosuch.parquet", "x.lodt"][..],
        &["convert", "nosuch.arrow", "x.lodt"],
        &["convert", "nosuch.arrows", "x.lodt"],
        &["convert", "nosuch.lodt", "x.parquet"],
        &["head", "nosuch.parquet"],
        &["cat", "nosuch.arrow"],
        &["show", "nosuch.parquet"],
    ] {
        let (_, stderr) = run(d, args, 1);
        assert!(
            stderr.contains("nosuch.") && stderr.contains("No such file"),
            "{args:?}: {stderr}"
        );
        assert!(
            !stderr.contains("pipe") && !stderr.contains("file file"),
            "{stderr}"
        );
    }
}

#[test]
fn head_and_cat_print_a_screenful_and_full_prints_everything() {
    let dir = demo();
    let d = dir.path();
    let (head, _) = run(d, &["head", "lodt-demo/demo.lodt"], 0);
    let lines: Vec<&str> = head.lines().collect();
    assert_eq!(lines.len(), 10);
    assert!(head.len() < 4096, "{} bytes: {head}", head.len());
    let first: Value = serde_json::from_str(lines[0]).unwrap();
    // frames: a video of [frames, 48, 64] shows 12 values of its first line.
    let video = first["frames"].as_array().unwrap();
    let line = video[0][0].as_array().unwrap();
    assert_eq!(line.len(), 13, "{line:?}");
    assert_eq!(line[12], "... (52 more)");
    assert_eq!(video[0][1], "... (47 more)");
    let frames = video.len();
    let more = video[1].as_str().unwrap();
    let (full, _) = run(d, &["head", "lodt-demo/demo.lodt", "-n", "1", "--full"], 0);
    let full: Value = serde_json::from_str(full.trim_end()).unwrap();
    let video = full["frames"].as_array().unwrap();
    assert_eq!(more, format!("... ({} more)", video.len() - 1));
    assert_eq!(frames, 2, "the first frame, then how many more");
    assert_eq!(video[0].as_array().unwrap().len(), 48);
    assert_eq!(video[0][0].as_array().unwrap().len(), 64);
    assert_eq!(full["labels"], first["labels"]);
}

#[test]
fn cat_prints_as_many_rows_as_info_counts() {
    let dir = demo();
    let d = dir.path();
    // Capped too, one line per top-level row that info counts, no nulls.
    let (cat, _) = run(d, &["cat", "lodt-demo/demo.lodt"], 0);
    let rows = info_rows(d, "lodt-demo/demo.lodt");
    assert_eq!(cat.lines().count() as u64, rows);
    assert!(!cat.contains("null"), "{cat}");
    assert!(cat.len() < 300 * rows as usize, "{} bytes", cat.len());
    let (cat_full, _) = run(d, &["cat", "lodt-demo/demo.lodt", "--full"], 0);
    assert_eq!(cat_full.lines().count() as u64, rows);
    assert!(!cat_full.contains("more)"));
}

#[test]
fn counts_are_singular_or_plural() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let x = LodTensor::from_vec(
        vec![5i32, 6, 7],
        vec![3],
        Lod::try_from_lengths(&[vec![3]]).unwrap(),
    )
    .unwrap();
    let batch = Batch::try_from_tensors([("x", x)]).unwrap();
    lodt::format::save_batch(d.join("one.lodt"), &batch).unwrap();
    let (info, _) = run(d, &["info", "one.lodt"], 0);
    assert!(info.contains("schema    1 tensor\n"), "{info}");
    assert!(
        info.contains("  batch 0: 1 top-level row, 1 tensor, "),
        "{info}"
    );
    assert!(info.contains("totals    over 1 batch\n"), "{info}");
    let (verify, _) = run(d, &["verify", "one.lodt"], 0);
    assert!(verify.starts_with("ok: 1 batch, 1 tensor, "), "{verify}");
    let (stats, _) = run(d, &["stats", "one.lodt"], 0);
    assert!(
        stats.starts_with("one.lodt: 1 batch, 1 tensor\n"),
        "{stats}"
    );
    assert!(stats.contains("level 0: 1 sequence;"), "{stats}");
    let (convert, _) = run(d, &["convert", "one.lodt", "one.parquet"], 0);
    assert!(
        convert.contains(": 1 batch, 1 tensor, 1 top-level row, "),
        "{convert}"
    );
    let (convert, _) = run(d, &["convert", "one.lodt", "one-ds/"], 0);
    assert!(
        convert.contains("(1 shard, 1 batch, 1 sequence, "),
        "{convert}"
    );
    let (demo, _) = run(d, &["demo", "demo1", "--batches", "1"], 0);
    assert!(demo.contains(": 1 batch of words"), "{demo}");
    assert!(demo.contains("format 2.0, 1 batch,"), "{demo}");
    assert!(demo.contains("verified: 1 batch, 3 tensors"), "{demo}");
}

/// The lines of the demo's `next:` hint, without the label.
fn hints(stdout: &str) -> Vec<String> {
    let start = stdout.find("next: ").expect("a next: hint");
    stdout[start + "next: ".len()..]
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// Runs `line` in a shell, in `dir`, with `PATH` as given.
fn shell(dir: &Path, line: &str, path: &str) -> Output {
    Command::new("sh")
        .args(["-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("CARGO_PKG_NAME")
        .output()
        .unwrap()
}

#[test]
fn the_demo_hints_run_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let system = "/usr/bin:/bin";
    // Installed: `lodt` on PATH is this binary.
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(LODT, bin.join("lodt")).unwrap();
    let path = format!("{}:{system}", bin.display());
    let out = shell(d, "lodt demo", &path);
    assert!(out.status.success());
    let lines = hints(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(lines[0], "lodt info lodt-demo/demo.lodt");
    assert_eq!(lines.len(), 5, "{lines:?}");
    for line in &lines {
        assert!(line.starts_with("lodt "), "{line}");
        let out = shell(d, line, &path);
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Not on PATH: the binary's own path, which runs as printed.
    let out = shell(d, &format!("{LODT} demo"), system);
    let lines = hints(&String::from_utf8_lossy(&out.stdout));
    let exe = Path::new(LODT).canonicalize().unwrap();
    assert_eq!(
        lines[0],
        format!("{} info lodt-demo/demo.lodt", exe.display())
    );
    for line in &lines {
        let out = shell(d, line, system);
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Run by `cargo run` (which sets CARGO_PKG_NAME): the cargo form.
    let out = Command::new(LODT)
        .args(["demo"])
        .current_dir(d)
        .env("PATH", system)
        .env("CARGO_PKG_NAME", "lodt-cli")
        .output()
        .unwrap();
    let lines = hints(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        lines[0],
        "cargo run -p lodt-cli -- info lodt-demo/demo.lodt"
    );
}
