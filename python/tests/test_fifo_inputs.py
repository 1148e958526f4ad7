"""A FIFO (named pipe) or a device where a file is read by ranges (a ``.lodt``
file, a dataset shard, a Parquet or Arrow IPC file) is a clear error at once,
never a wait for a writer. Each case runs in a child process with a timeout,
so that a reader that blocks fails the test instead of hanging it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lodt

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def _run(code: str, **paths) -> str:
    """Runs ``code`` (with ``paths`` as variables) in a child Python; returns
    what it printed. Fails if the child runs for more than a minute."""
    prelude = "".join(f"{k} = {str(v)!r}\n" for k, v in paths.items())
    script = "import lodt\n" + prelude + textwrap.dedent(code)
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=os.environ.copy()
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"blocked on a FIFO: {code}")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _error_of(call: str, **paths) -> str:
    """The exception type and message that ``call`` raises in a child."""
    return _run(
        f"""
        try:
            {call}
        except Exception as e:
            print(type(e).__name__ + ": " + str(e))
        else:
            print("no error")
        """,
        **paths,
    ).strip()


@pytest.mark.parametrize(
    "call",
    [
        "lodt.open(path)",
        "lodt.open(path, mmap=False)",
        "lodt.File(path, check_bodies=True)",
        "lodt.verify(path)",
    ],
)
def test_a_fifo_lodt_file_is_refused(tmp_path, call):
    path = tmp_path / "pipe.lodt"
    os.mkfifo(path)
    err = _error_of(call, path=path)
    assert err.startswith("OSError") or err.startswith("ValueError"), err
    assert f"{path} is a FIFO (named pipe), not a regular file" in err, err


def test_a_device_is_refused():
    err = _error_of("lodt.open('/dev/zero')")
    assert "/dev/zero is a character device, not a regular file" in err, err


def test_a_fifo_shard_is_an_error_from_dataset(tmp_path):
    d = tmp_path / "ds"
    batches = [{"v": np.arange(4 * k, 4 * k + 4, dtype=np.int64)} for k in range(6)]
    lodt.write_dataset(d, batches, shard_bytes=1)
    shards = sorted(p for p in d.iterdir() if p.suffix == ".lodt")
    assert len(shards) >= 2
    os.remove(shards[1])
    os.mkfifo(shards[1])
    for mmap in (True, False):
        err = _error_of(f"list(lodt.Dataset(d, batch_size=2, mmap={mmap}))", d=d)
        assert f"{shards[1]} is a FIFO (named pipe)" in err, err


@pytest.mark.parametrize("name", ["pipe.parquet", "pipe.arrow"])
def test_a_fifo_parquet_or_arrow_file_is_refused(tmp_path, name):
    pytest.importorskip("pyarrow")
    path = tmp_path / name
    os.mkfifo(path)
    err = _error_of("lodt.convert(path, out)", path=path, out=tmp_path / "out.lodt")
    assert f"{path} is a pipe or a device" in err, err


def test_convert_still_reads_a_lodt_file_from_a_fifo(tmp_path):
    src = tmp_path / "src.lodt"
    lodt.save(src, [{"v": np.arange(10, dtype=np.int64)}, {"v": np.arange(10, 15, dtype=np.int64)}])
    path = tmp_path / "pipe.lodt"
    os.mkfifo(path)
    out = tmp_path / "out.lodt"
    writer = subprocess.Popen(["sh", "-c", f"cat '{src}' > '{path}'"])
    try:
        printed = _run(
            """
            lodt.convert(path, out)
            f = lodt.open(out)
            print([int(x) for k in range(len(f)) for x in __import__("numpy").array(f[k]["v"]).ravel()])
            """,
            path=path,
            out=out,
        )
    finally:
        writer.wait(timeout=60)
    assert printed.strip() == str(list(range(15)))
