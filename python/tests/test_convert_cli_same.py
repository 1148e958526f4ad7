"""``lodt.convert`` and ``lodt convert`` are one function (the crate's
``lodt::convert::convert``): for the same input and options they write the
same bytes: a ``.lodt`` file, a Parquet file, a dataset's shards.

The CLI is the binary the test command built (``LODT_CLI``, set by
``scripts/test``); run by hand without it, the test skips and says so."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import lodt


def _cli():
    path = os.environ.get("LODT_CLI")
    if path is None:
        guess = pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "lodt"
        path = str(guess) if guess.exists() else None
    if path is None or not os.path.exists(path):
        if os.environ.get("LODT_EXPECT_WHEEL"):
            pytest.fail(f"the test command set no usable LODT_CLI ({path!r})")
        pytest.skip("no lodt binary: set LODT_CLI (scripts/test sets it)")
    return path


def _run(*args):
    out = subprocess.run([_cli(), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _file(path):
    """8 batches of 3 sentences of (n, 4) float32 words, with metadata."""
    rng = np.random.default_rng(7)
    with lodt.Writer(path, metadata={"source": "test"}) as w:
        for k in range(8):
            lengths = [[int(x) for x in rng.integers(1, 40, size=3)]]
            rows = sum(lengths[0])
            words = lodt.create_lod_tensor(rng.random((rows, 4), dtype=np.float32), lengths)
            w.write({"words": words, "label": np.array([k, k + 1, k + 2], dtype=np.int64)})


@pytest.mark.parametrize(
    "out, flags, kwargs",
    [
        ("a.lodt", [], {}),
        ("b.lodt", ["--compression", "zstd:5"], {"compression": "zstd:5"}),
        ("c.lodt", ["--batch-rows", "5"], {"batch_rows": 5}),
        ("d.lodt", ["--batch-bytes", "auto"], {"batch_bytes": "auto"}),
        ("e.lodt", ["--batch-bytes", "2K"], {"batch_bytes": "2K"}),
        ("f.parquet", [], {}),
        ("g.parquet", ["--compression", "zstd", "--batch-rows", "4"], {"compression": "zstd", "batch_rows": 4}),
        ("h.arrow", ["--small-lists"], {"small_lists": True}),
    ],
)
def test_the_cli_and_lodt_convert_write_the_same_bytes(tmp_path, out, flags, kwargs):
    src = tmp_path / "in.lodt"
    _file(src)
    cli, py = tmp_path / f"cli-{out}", tmp_path / f"py-{out}"
    _run("convert", src, cli, *flags)
    lodt.convert(src, py, **kwargs)
    a, b = cli.read_bytes(), py.read_bytes()
    assert len(a) > 500
    assert a == b, f"{out}: {len(a)} bytes from the CLI, {len(b)} from lodt.convert, not the same"


def test_batch_bytes_takes_a_count_a_size_or_auto(tmp_path):
    src = tmp_path / "in.lodt"
    _file(src)
    assert lodt.convert(src, tmp_path / "auto.lodt", batch_bytes="auto")["batches"] == 1
    assert lodt.convert(src, tmp_path / "n.lodt", batch_bytes=2048) == lodt.convert(
        src, tmp_path / "k.lodt", batch_bytes="2k"
    )
    assert (tmp_path / "n.lodt").read_bytes() == (tmp_path / "k.lodt").read_bytes()
    with pytest.raises(ValueError, match="batch_bytes: .*unknown unit"):
        lodt.convert(src, tmp_path / "bad.lodt", batch_bytes="3 parsecs")
    with pytest.raises(ValueError, match="batch_bytes: .*at least 1"):
        lodt.convert(src, tmp_path / "zero.lodt", batch_bytes=0)


def test_the_cli_and_lodt_convert_write_the_same_dataset_shards(tmp_path):
    src = tmp_path / "in.lodt"
    _file(src)
    _run("convert", src, tmp_path / "cli-ds/", "--shard-bytes", "4K")
    lodt.convert(src, tmp_path / "py-ds", shard_bytes=4096)
    cli, py = lodt.Dataset(tmp_path / "cli-ds"), lodt.Dataset(tmp_path / "py-ds")
    assert cli.num_sequences == py.num_sequences == 24
    names = sorted(p.name for p in (tmp_path / "cli-ds").glob("*.lodt"))
    assert len(names) > 1
    assert names == sorted(p.name for p in (tmp_path / "py-ds").glob("*.lodt"))
    for name in names:
        assert (tmp_path / "cli-ds" / name).read_bytes() == (tmp_path / "py-ds" / name).read_bytes(), name
