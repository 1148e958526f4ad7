"""A local dataset manifest that is not a regular file (a FIFO, a symlink to
/dev/zero) or is larger than MAX_MANIFEST_BYTES is refused at once with a
clear error (issue 28 §4): never a hang, never a read of gigabytes. Each
case runs in a child process with a time limit, so that a reader that
blocks fails the test instead of hanging it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero are Unix")

_OPEN = """
import sys, lodt
try:
    lodt.Dataset(sys.argv[1])
except Exception as e:
    print(type(e).__name__, e)
else:
    print("opened")
"""


def _open_in_child(directory) -> str:
    out = subprocess.run(
        [sys.executable, "-c", _OPEN, str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_fifo_manifest_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "lodt-dataset.json")
    said = _open_in_child(tmp_path)
    assert "expected a regular file, found a FIFO (named pipe)" in said, said
    assert "lodt-dataset.json" in said


def test_a_manifest_linked_to_dev_zero_is_refused_unread(tmp_path):
    os.symlink("/dev/zero", tmp_path / "lodt-dataset.json")
    said = _open_in_child(tmp_path)
    assert "expected a regular file, found a device" in said, said


def test_a_manifest_above_the_bound_is_refused_unread(tmp_path):
    with open(tmp_path / "lodt-dataset.json", "wb") as f:
        f.truncate((1 << 30) + 1)  # sparse: no disk space used
    said = _open_in_child(tmp_path)
    assert "a manifest is at most 1073741824 bytes (MAX_MANIFEST_BYTES), found 1073741825 bytes" in said, said
