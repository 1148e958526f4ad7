//! `show` (capped text, --head, ranges), `info` (schema, totals),
//! `stats`, `head` and `cat`, and `info`/`verify` on other formats: the
//! built binary on files with known values.

use lodt::{Batch, Lod, LodTensor};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs lodt with `stdin` piped in; returns (code, stdout, stderr).
fn lodt_in(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

fn lodt(args: &[&str]) -> (i32, String, String) {
    lodt_in(args, b"")
}

fn ok(args: &[&str]) -> String {
    let (code, out, err) = lodt(args);
    assert_eq!(code, 0, "lodt {args:?}: {err}");
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const N: usize = 5000;

/// Sequence `i` of `tokens` has `i % 7 + 1` rows.
fn length(i: usize) -> u64 {
    (i % 7 + 1) as u64
}

/// One batch: `tokens` (int32, 1 level, N sequences, values 0..) and
/// `label` (int64, no LoD, N rows, values 0..).
fn long_file(dir: &Path) -> PathBuf {
    let lengths: Vec<u64> = (0..N).map(length).collect();
    let rows = lengths.iter().sum::<u64>() as usize;
    let tokens = LodTensor::from_vec(
        (0..rows as i32).collect(),
        vec![rows],
        Lod::try_from_lengths(&[lengths]).unwrap(),
    )
    .unwrap();
    let label = LodTensor::from_vec((0..N as i64).collect(), vec![N], Lod::empty()).unwrap();
    let batch = Batch::try_from_tensors([("tokens", tokens), ("label", label)]).unwrap();
    let path = dir.join("long.lodt");
    lodt::format::save_batch(&path, &batch).unwrap();
    path
}

fn vector(name: &str) -> String {
    format!("{}/../spec/vectors/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn show_caps_the_lod_and_takes_head_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let file = long_file(dir.path());
    let f = s(&file);
    let out = ok(&["show", f, "--tensor", "tokens"]);
    // Capped: the LoD's first and last offsets and a count, 40 sequences.
    assert!(out.len() < 4000, "{} bytes: {out}", out.len());
    let rows: u64 = (0..N).map(length).sum();
    assert!(
        out.contains(&format!(
            "lod     level 0: [0, 1, 3, 6, 10, 15, ... {}, {}, {}, {}, {}, {rows}] (5001 offsets, 5000 sequences)\n",
            rows - 21, rows - 16, rows - 10, rows - 3, rows - 2
        )),
        "{out}"
    );
    assert!(out.contains("  ... 4960 more sequences"), "{out}");
    // --head and ranges, in JSON: exactly the slice.
    let out = ok(&["show", f, "--tensor", "tokens", "--head", "2", "--json"]);
    assert_eq!(
        out.trim(),
        r#"{"name":"tokens","dtype":"int32","shape":[3],"lod":[[0,1,3]],"values":[0,1,2]}"#
    );
    let out = ok(&[
        "show", f, "--tensor", "tokens", "--branch", "3..5", "--json",
    ]);
    assert_eq!(
        out.trim(),
        r#"{"name":"tokens","dtype":"int32","shape":[9],"lod":[[0,4,9]],"values":[6,7,8,9,10,11,12,13,14]}"#
    );
    let out = ok(&["show", f, "--tensor", "tokens", "--head", "3"]);
    assert!(
        out.starts_with("tensor  tokens (first 3 of 5000 top-level, batch 0)\n"),
        "{out}"
    );
    assert!(out.contains("  <2> rows 3..6: 3 4 5\n"), "{out}");
    // --json without --head stays complete.
    let out = ok(&["show", f, "--tensor", "label", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["values"].as_array().unwrap().len(), N);
    // A tensor with no LoD: a range of rows; an index is a clear usage error.
    let out = ok(&["show", f, "--tensor", "label", "--branch", "2..4", "--json"]);
    assert_eq!(
        out.trim(),
        r#"{"name":"label","dtype":"int64","shape":[2],"lod":[],"values":[2,3]}"#
    );
    let (code, _, err) = lodt(&["show", f, "--tensor", "label", "--branch", "3"]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "error: --branch 3: tensor \"label\" has no LoD (a plain tensor of 5000 rows), so --branch takes no index; a range of rows like --branch 0..10 or --head N shows some\n"
    );
    let (code, _, err) = lodt(&["show", f, "--tensor", "label", "--branch", "0..5001"]);
    assert_eq!(code, 2);
    assert!(err.contains("out of range"), "{err}");
    // Two levels: an index, then a range of the next level.
    let words = vector("words_labels.lodt");
    let out = ok(&[
        "show", &words, "--tensor", "words", "--branch", "0,1..3", "--json",
    ]);
    assert_eq!(
        out.trim(),
        r#"{"name":"words","dtype":"int64","shape":[6,1],"lod":[[0,2,6]],"values":[3,4,5,6,7,8]}"#
    );
    let (code, _, err) = lodt(&["show", &words, "--tensor", "words", "--branch", "0,0,0"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("tensor \"words\" has 2 LoD levels, so --branch takes at most 2 indexes"),
        "{err}"
    );
    let (code, _, err) = lodt(&["show", &words, "--tensor", "words", "--branch", "0..2,1"]);
    assert_eq!(code, 2);
    assert!(err.contains("only the last part may be a range"), "{err}");
}

#[test]
fn stats_summarises_lengths_per_level() {
    let dir = tempfile::tempdir().unwrap();
    let file = long_file(dir.path());
    let mut lengths: Vec<u64> = (0..N).map(length).collect();
    lengths.sort_unstable();
    let (p50, p99) = (lengths[N / 2 - 1], lengths[N * 99 / 100 - 1]);
    let sum: u64 = lengths.iter().sum();
    let out = ok(&["stats", s(&file)]);
    assert!(
        out.contains(&format!(
            "tokens  int32, element shape [], 1 LoD level; {sum} rows in 1 batch, body {}\n",
            if sum * 4 >= 1024 {
                format!("{:.1} KiB", (sum * 4) as f64 / 1024.0)
            } else {
                format!("{} B", sum * 4)
            }
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "  level 0: 5000 sequences; length in rows: min 1, p50 {p50}, p99 {p99}, max 7, mean {:.2}\n",
            sum as f64 / N as f64
        )),
        "{out}"
    );
    // The histogram: one bucket per length 1..=7, 715 or 714 each.
    assert!(
        out.contains("    1 | ############################## 715\n"),
        "{out}"
    );
    assert!(out.contains("    7 | "), "{out}");
    assert!(
        out.contains("label  int64, element shape [], no LoD; 5000 rows"),
        "{out}"
    );
    let out = ok(&["stats", s(&file), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let level = &v["tensors"][0]["levels"][0];
    assert_eq!(level["sequences"], 5000);
    assert_eq!(
        (level["min"].as_u64(), level["max"].as_u64()),
        (Some(1), Some(7))
    );
    assert_eq!(
        (level["p50"].as_u64(), level["p99"].as_u64()),
        (Some(p50), Some(p99))
    );
    assert_eq!(level["total"], sum);
    let counts: u64 = level["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counts, 5000);
    // A Parquet file written by pyarrow, two levels, and --columns.
    let out = ok(&[
        "stats",
        "../tests/data/arrow/batch0.parquet",
        "--columns",
        "words",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tensors"].as_array().unwrap().len(), 1);
    let levels = &v["tensors"][0]["levels"];
    assert_eq!(
        (levels[0]["sequences"].as_u64(), levels[0]["max"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(
        (levels[1]["sequences"].as_u64(), levels[1]["total"].as_u64()),
        (Some(6), Some(15))
    );
}

/// The expected.json column `name` of batch0, as (lod, values).
fn expected(name: &str) -> (Vec<Vec<usize>>, Vec<f64>) {
    let text = std::fs::read_to_string("../tests/data/arrow/expected.json").unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let column = v["files"][0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["column"] == name)
        .unwrap()
        .clone();
    let lod = column["lod"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            l.as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_u64().unwrap() as usize)
                .collect()
        })
        .collect();
    let values = column["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    (lod, values)
}

#[test]
fn head_and_cat_print_one_json_object_per_row() {
    let out = ok(&["head", "../tests/data/arrow/batch0.parquet", "-n", "2"]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let (lod, values) = expected("words");
    for (row, line) in lines.iter().enumerate() {
        // words: row `row` of level 0, as lists of level-1 sequences.
        let want: Vec<Vec<i64>> = (lod[0][row]..lod[0][row + 1])
            .map(|j| {
                (lod[1][j]..lod[1][j + 1])
                    .map(|r| values[r] as i64)
                    .collect()
            })
            .collect();
        assert_eq!(line["words"], serde_json::json!(want), "{out}");
    }
    // frames: rows of 4 float32s.
    let (lod, values) = expected("frames");
    let frames = lines[1]["frames"].as_array().unwrap();
    assert_eq!(frames.len(), lod[0][2] - lod[0][1]);
    for (k, frame) in frames.iter().enumerate() {
        let got: Vec<f32> = frame
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let r = lod[0][1] + k;
        let want: Vec<f32> = values[r * 4..r * 4 + 4].iter().map(|&x| x as f32).collect();
        assert_eq!(got, want);
    }
    // cat: every row of every batch; --columns picks and orders the keys.
    let multi = vector("multi_batch.lodt");
    let out = ok(&["cat", &multi, "--columns", "weights,ids"]);
    assert_eq!(out.lines().count(), 6, "{out}");
    assert!(out.lines().all(|l| l.starts_with("{\"weights\":")), "{out}");
    // From stdin, in a pipe.
    let bytes = std::fs::read(&multi).unwrap();
    let (code, out, err) = lodt_in(&["head", "-", "--format", "lodt", "-n", "3"], &bytes);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    let (code, _, err) = lodt_in(&["head", "-"], &bytes);
    assert_eq!(code, 2);
    assert!(err.contains("needs --format"), "{err}");
}

#[test]
fn cat_stops_quietly_when_the_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let file = long_file(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(["cat", s(&file)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    assert_eq!(&first, b"{\"tokens\":[0],\"l");
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn info_and_verify_name_the_commands_that_read_other_formats() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["info", "verify"] {
        let (code, _, err) = lodt(&[command, "../tests/data/arrow/batch0.parquet"]);
        assert_eq!(code, 2);
        assert_eq!(
            err,
            format!(
                "error: ../tests/data/arrow/batch0.parquet is a Parquet file; lodt {command} reads .lodt files and dataset directories. Read it with lodt stats, lodt show, lodt head or lodt cat, or convert it with lodt convert ../tests/data/arrow/batch0.parquet OUT.lodt\n"
            )
        );
    }
    // Recognised by its first bytes too, whatever its name.
    let renamed = dir.path().join("really.lodt");
    std::fs::copy("../tests/data/arrow/batch0.arrow", &renamed).unwrap();
    let (code, _, err) = lodt(&["info", s(&renamed)]);
    assert_eq!(code, 2);
    assert!(
        err.contains("is an Arrow IPC file; lodt info reads .lodt files"),
        "{err}"
    );
}
