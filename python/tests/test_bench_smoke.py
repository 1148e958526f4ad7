"""The peer benchmark (bench/peers.py with examples/peers.rs) runs to its
table on tiny data, so that it cannot break silently between measured runs."""

import json
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PEERS_BIN = REPO / "target" / "debug" / "examples" / "peers"


def test_peers_benchmark_prints_its_table(tmp_path):
    if not PEERS_BIN.exists():
        pytest.skip("target/debug/examples/peers is not built (scripts/test builds it with cargo test)")
    out = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "peers.py"), "--dir", str(tmp_path / "data"),
         "--batches", "3", "--reps", "1", "--systems", "lodt,npy,ipc,parquet",
         "--lodt-bin", str(PEERS_BIN), "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "CHECKSUMS DIFFER" not in run.stdout
    table = [line for line in run.stdout.splitlines() if line.startswith("| ")]
    rows = {line.split(" | ")[0][2:] for line in table[2:]}
    assert {"random/cold", "random/warm", "scan/warm", "open-doc/warm"} <= rows, run.stdout
    assert any("verify" in r for r in rows) and any("write" in r for r in rows), run.stdout
    results = json.loads(out.read_text())
    # Every system read the same values (the checksum of each task agrees).
    for task, r in results["reads"].items():
        assert len(set(r["checksums"].values())) == 1, (task, r["checksums"])
    assert results["dataset"]["batches"] == 3
    # lodt's gather in one call is compared with numpy's gather of the same
    # whole rows (which read the same values).
    assert "npy-take" in results["reads"]["random/warm"]["median"], results["reads"]
    assert any(line.startswith("| random sentences gathered in one call") for line in table), run.stdout
    # The write task times the floor of a checksumming writer beside raw
    # 1 MiB calls, and the table compares lodt with it.
    assert results["write"]["raw_write_all_1MiB_crc"]["median"] > 0, results["write"]
    assert any("lodt_writer vs raw_write_all_1MiB_crc" in r for r in rows), run.stdout


def test_compression_benchmark_prints_its_tables(tmp_path):
    # Tiny data, no MDS and no S3 server (their modules are the benchmark's
    # own venv's): every lodt and Parquet system writes, scans and agrees.
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "compression.py"), "--dir", str(tmp_path / "data"),
         "--tokens", "20000", "--emb-tokens", "2000", "--reps", "1", "--no-mds", "--no-s3"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for name in ("ids32-1", "ids64-2", "ids32-3", "emb-1"):
        assert f"### {name}:" in run.stdout, run.stdout
    rows = [line for line in run.stdout.splitlines() if line.startswith("| lodt zstd |")]
    assert len(rows) == 4, run.stdout
    # zstd stores the int64 ids in less than half their raw bytes.
    of_raw = float(rows[1].split(" | ")[2])
    assert of_raw < 0.5, rows[1]


def test_random_access_benchmark_prints_its_tables(tmp_path):
    # Tiny data: every system reads the same documents (the script stops on
    # a checksum that differs) and the tables come out; no timing asserted.
    run = subprocess.run(
        [sys.executable, str(REPO / "python" / "bench" / "bench_random.py"), "--dir", str(tmp_path / "data"),
         "--docs", "300", "--queries", "50", "--reps", "1"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    for row in ("| floor |", "| megatron |", "| lodt raw arrays |", "| lodt zstd arrays |", "| lodt zstd |",
                "| lodt.Dataset.sequence_arrays |", "| DatasetReader.sequence (Batch) |"):
        assert any(line.startswith(row) for line in lines), (row, run.stdout)
    assert any(line.startswith("zstd / raw, random: arrays ") for line in lines), run.stdout
    assert not (tmp_path / "data").exists()
