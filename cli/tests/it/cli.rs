//! The `lodt` binary, run on the spec's test vectors and on a demo dataset.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn lodt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .output()
        .expect("the lodt binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts the exit code, that stderr never shows a panic, and returns
/// (stdout, stderr).
fn run(args: &[&str], code: i32) -> (String, String) {
    let out = lodt(args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        out.status.code(),
        Some(code),
        "lodt {args:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    (stdout, stderr)
}

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors")
}

fn vector(name: &str) -> String {
    vectors().join(name).display().to_string()
}

#[test]
fn show_json_prints_exactly_the_vectors() {
    let mut checked = 0;
    for entry in std::fs::read_dir(vectors()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        // NAME.bK.TENSOR[.branch-I-J]
        let parts: Vec<&str> = stem.split('.').collect();
        let file = vector(&format!("{}.lodt", parts[0]));
        let batch = parts[1].trim_start_matches('b');
        let mut args = vec![
            "show", &file, "--batch", batch, "--tensor", parts[2], "--json",
        ];
        let branch;
        if let Some(b) = parts.get(3) {
            branch = b.trim_start_matches("branch-").replace('-', ",");
            args.extend(["--branch", &branch]);
        }
        let (stdout, _) = run(&args, 0);
        let expected = std::fs::read_to_string(vectors().join(&name)).unwrap();
        assert_eq!(stdout, expected, "lodt {args:?}");
        checked += 1;
    }
    assert!(checked >= 15, "checked {checked} vectors");
}

#[test]
fn show_defaults_and_usage_errors() {
    // The only tensor is the default.
    let (stdout, _) = run(&["show", &vector("f32_1level.lodt"), "--json"], 0);
    assert!(stdout.starts_with(r#"{"name":"x","dtype":"float32","shape":[5,2]"#));
    // Several tensors: an error that lists them, exit 2.
    let (_, stderr) = run(&["show", &vector("words_labels.lodt")], 2);
    assert_eq!(
        stderr,
        "error: batch 0 has 2 tensors; choose one with --tensor: words, labels\n"
    );
    let (_, stderr) = run(&["show", &vector("words_labels.lodt"), "--tensor", "x"], 2);
    assert_eq!(
        stderr,
        "error: batch 0 has no tensor \"x\"; it has: words, labels\n"
    );
    let (_, stderr) = run(&["show", &vector("multi_batch.lodt"), "--batch", "3"], 2);
    assert_eq!(stderr, "error: no batch 3: the file has 3 batches\n");
    let file = vector("words_labels.lodt");
    let (_, stderr) = run(&["show", &file, "--tensor", "words", "--branch", "3"], 2);
    assert!(
        stderr.starts_with("error: --branch 3: branch index out of range"),
        "{stderr}"
    );
    let (_, stderr) = run(&["show", &file, "--tensor", "words", "--branch", "1,x"], 2);
    assert!(
        stderr.contains("expected sequence indices like 2,0"),
        "{stderr}"
    );
    run(&["show"], 2);
    run(&["frobnicate"], 2);
}

#[test]
fn show_text_form() {
    let file = vector("words_labels.lodt");
    let (stdout, _) = run(&["show", &file, "--tensor", "words"], 0);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "tensor  words (batch 0)");
    assert_eq!(lines[1], "dtype   int64");
    assert_eq!(lines[2], "shape   [15, 1]");
    assert_eq!(lines[3], "lod     level 0: [0, 3, 4, 6]");
    assert_eq!(lines[4], "        level 1: [0, 3, 5, 9, 10, 12, 15]");
    assert!(lines.contains(&"  <0,2> rows 5..9: 5 6 7 8"), "{stdout}");
    assert!(lines.contains(&"  <2,1> rows 12..15: 12 13 14"), "{stdout}");
    let (stdout, _) = run(&["show", &file, "--tensor", "words", "--branch", "2"], 0);
    assert!(
        stdout.starts_with("tensor  words (branch <2> of batch 0)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("lod     level 0: [0, 2, 5]\n"), "{stdout}");
    let file = vector("scalar_bool_half.lodt");
    let (stdout, _) = run(&["show", &file, "--tensor", "scale"], 0);
    assert!(
        stdout.contains("shape   []") && stdout.contains("rows 0..1: 2.5"),
        "{stdout}"
    );
    let (stdout, _) = run(&["show", &file, "--tensor", "half"], 0);
    assert!(
        stdout.contains("  <0> rows 0..2: 1 -0.099975586 inf NaN\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  <1> rows 2..3: -inf 0.00006097555\n"),
        "{stdout}"
    );
}

#[test]
fn info_text_and_json() {
    let file = vector("multi_batch.lodt");
    let (stdout, _) = run(&["info", &file], 0);
    assert!(stdout.contains("format    .lodt 1.0\n"), "{stdout}");
    assert!(stdout.contains("batches   3\n"), "{stdout}");
    assert!(
        stdout.contains("metadata  source=lodt test vectors\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("size      2.2 KiB (2304 bytes)"),
        "{stdout}"
    );
    // The schema once, a line per batch, then totals with the overhead.
    assert!(
        stdout.contains("schema    2 tensors\n  ids      uint32   element shape []           1 LoD level\n  weights  float64  element shape []           no LoD\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  batch 2: 3 top-level rows, 2 tensors, 640 B at offset 1408, metadata step=2\n"
        ),
        "{stdout}"
    );
    assert_eq!(stdout.matches("uint32").count(), 1, "{stdout}");
    assert!(
        stdout.contains("  ids      sequences per level [6], rows 11, body 44 B, LoD 72 B\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("bodies 92 B (4.0%), LoD 72 B (3.1%), overhead 2.1 KiB (92.9%"),
        "{stdout}"
    );
    let (stdout, _) = run(&["info", &file, "--json"], 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["version"], "1.0");
    assert_eq!(v["num_batches"], 3);
    assert_eq!(v["file_size"], 2304);
    let ids = &v["batches"][2]["tensors"][0];
    assert_eq!(ids["name"], "ids");
    assert_eq!(ids["dtype"], "uint32");
    assert_eq!(ids["shape"], serde_json::json!([5]));
    assert_eq!(ids["lod_levels"], 1);
    assert_eq!(ids["rows"], 5);
    assert_eq!(ids["body_bytes"], 20);
    assert_eq!(v["batches"][1]["metadata"]["step"], "1");
    assert_eq!(v["body_bytes"], 20 + 16 + 4 + 8 + 20 + 24);
    assert_eq!(v["lod_bytes"], 72);
    assert_eq!(v["overhead_bytes"], 2304 - 92 - 72);
    assert_eq!(v["schema"][0]["sequences"], serde_json::json!([6]));
    assert_eq!(v["schema"][1]["rows"], 6);
    assert_eq!(v["batches"][2]["top_level_rows"], 3);
}

#[test]
fn verify_progress_counts_batches() {
    // Not a terminal: no bar, unless asked; asked, a line per batch.
    let (_, stderr) = run(&["verify", &vector("multi_batch.lodt")], 0);
    assert!(!stderr.contains("batches"), "{stderr}");
    let (stdout, stderr) = run(&["verify", "--progress", &vector("multi_batch.lodt")], 0);
    assert!(stdout.starts_with("ok: 3 batches"), "{stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "verifying: 1/3 batches",
            "verifying: 2/3 batches",
            "verifying: 3/3 batches"
        ],
        "{stderr}"
    );
    // A dataset: the batches of every shard, counted together.
    let (_, stderr) = run(&["verify", "--progress", &vector("dataset")], 0);
    let last = stderr.lines().rfind(|l| l.starts_with("verifying: "));
    assert_eq!(last, Some("verifying: 6/6 batches"), "{stderr}");
}

#[test]
fn verify_names_the_damaged_part() {
    let (stdout, _) = run(&["verify", &vector("words_labels.lodt")], 0);
    assert!(
        stdout.starts_with("ok: 1 batch, 2 tensors, 1.1 KiB checked"),
        "{stdout}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.lodt");
    let mut bytes = std::fs::read(vectors().join("words_labels.lodt")).unwrap();
    bytes[640 + 17] ^= 0x20; // inside the body of `words` (see FORMAT.md, section 10)
    std::fs::write(&bad, &bytes).unwrap();
    let (_, stderr) = run(&["verify", bad.to_str().unwrap()], 1);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains("checksum mismatch in batch 0, tensor \"words\", body"),
        "{stderr}"
    );
    let junk = dir.path().join("junk.lodt");
    std::fs::write(&junk, b"definitely not lodt").unwrap();
    let (_, stderr) = run(&["verify", junk.to_str().unwrap()], 1);
    assert!(stderr.starts_with("error: not a .lodt file"), "{stderr}");
    let (_, stderr) = run(&["info", "/no/such/file.lodt"], 1);
    assert!(
        stderr.starts_with("error: I/O error while opening /no/such/file.lodt"),
        "{stderr}"
    );
}

#[test]
fn recover_rebuilds_a_cut_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.lodt");
    let p = path.to_str().unwrap();
    let bytes = std::fs::read(vectors().join("multi_batch.lodt")).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 200]).unwrap();
    let (_, stderr) = run(&["info", p], 1);
    assert!(stderr.contains("no valid footer"), "{stderr}");
    assert!(stderr.contains("lodt recover"), "{stderr}");
    let (stdout, _) = run(&["recover", p], 0);
    assert!(
        stdout.starts_with("rebuilt the footer: kept 3 batches"),
        "{stdout}"
    );
    run(&["verify", p], 0);
    let (stdout, _) = run(&["recover", p], 0);
    assert_eq!(
        stdout,
        "nothing to do: the footer is valid and all 3 batches read back\n"
    );
}

#[test]
fn demo_writes_slices_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("demo");
    let (stdout, stderr) = run(&["demo", d.to_str().unwrap(), "--batches", "9"], 0);
    assert_eq!(stderr, "", "no progress bar when stderr is not a terminal");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with(&format!("wrote {}", d.join("demo.lodt").display())),
        "{stdout}"
    );
    assert!(
        lines[0].contains("9 batches of words (int64, 2-level LoD"),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("reopened it memory-mapped: format 2.0, 9 batches"),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with("batch 7, words <1,0>") && lines[2].ends_with("0 bytes copied"),
        "{stdout}"
    );
    assert!(
        lines[3].starts_with("batch 7, frames <1> (video 1): shape ["),
        "{stdout}"
    );
    assert!(
        lines[4].starts_with("verified: 9 batches, 27 tensors"),
        "{stdout}"
    );
    let file = d.join("demo.lodt");
    let f = file.to_str().unwrap();
    run(&["verify", f], 0);
    let (stdout, _) = run(
        &[
            "show", f, "--batch", "7", "--tensor", "words", "--branch", "1,0", "--json",
        ],
        0,
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["lod"], serde_json::json!([]));
    let shown = lines[2]
        .split_once(" words [")
        .unwrap()
        .1
        .split_once(']')
        .unwrap()
        .0;
    let values: Vec<String> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.to_string())
        .collect();
    assert_eq!(shown, values.join(", "));
    let (stdout, _) = run(&["info", f, "--json"], 0);
    let info: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let frames = &info["batches"][0]["tensors"][1];
    assert_eq!(frames["name"], "frames");
    assert_eq!(frames["shape"][1], 48);
    assert_eq!(frames["shape"][2], 64);
    assert_eq!(frames["lod_levels"], 1);
    // Same seed, same bytes.
    let again = dir.path().join("again");
    run(&["demo", again.to_str().unwrap(), "--batches", "9"], 0);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(again.join("demo.lodt")).unwrap()
    );
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("demo");
    run(&["demo", d.to_str().unwrap(), "--batches", "2"], 0);
    let file = d.join("demo.lodt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args([
            "show",
            file.to_str().unwrap(),
            "--tensor",
            "frames",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut head).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(&head[..9], b"{\"name\":\"");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn empty_parquet_tables_of_pyarrow_stat_and_convert_to_zero_batches() {
    // One row group of 0 rows (tests/data/empty/make_empty.py): `stats` and
    // `convert` once panicked dividing by zero.
    let dir = tempfile::tempdir().unwrap();
    for name in ["int64", "list_and_float", "fixed_zstd"] {
        let input = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/empty")
            .join(format!("{name}.parquet"))
            .display()
            .to_string();
        run(&["stats", &input], 0);
        let out = dir
            .path()
            .join(format!("{name}.lodt"))
            .display()
            .to_string();
        run(&["convert", &input, &out], 0);
        let (info, _) = run(&["info", &out], 0);
        assert!(info.contains("batches   0"), "{info}");
    }
}
