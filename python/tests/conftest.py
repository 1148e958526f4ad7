"""Shared paths and fixtures of the lodt Python tests."""

import os
import pathlib

import numpy as np
import pytest

import lodt

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
VECTORS = REPO / "spec" / "vectors"


@pytest.fixture
def words():
    """The user guide's 2-level example: 3 articles of 3, 1, 2 sentences of words."""
    return lodt.create_lod_tensor(
        np.arange(15, dtype=np.int64).reshape(15, 1), [[3, 1, 2], [3, 2, 4, 1, 2, 3]]
    )


@pytest.fixture
def sample_file(tmp_path, words):
    """A file of 3 batches: words (2 levels), frames (1 level, [n, 2, 3]), labels (no LoD)."""
    path = tmp_path / "sample.lodt"
    rng = np.random.default_rng(7)
    with lodt.Writer(path, metadata={"source": "tests"}) as w:
        for k in range(3):
            lens0 = [int(x) for x in rng.integers(0, 4, size=4)]
            lens1 = [int(x) for x in rng.integers(0, 5, size=sum(lens0))]
            rows = sum(lens1)
            wk = lodt.create_lod_tensor(
                rng.integers(0, 1000, size=(rows, 1)).astype(np.int64), [lens0, lens1]
            )
            flens = [int(x) for x in rng.integers(1, 4, size=4)]
            frames = lodt.create_lod_tensor(
                rng.standard_normal((sum(flens), 2, 3)).astype(np.float32), [flens]
            )
            labels = lodt.LodTensor(np.arange(4, dtype=np.int64) + 10 * k)
            w.write({"words": wk, "frames": frames, "labels": labels}, metadata={"step": str(k)})
    return path


def torch_or_skip():
    """torch, or a skip saying it cannot be installed here."""
    return pytest.importorskip("torch", reason="torch is not installed (pip install 'lodt[torch]')")


def pyarrow_or_skip():
    """pyarrow, or a skip saying it cannot be installed here."""
    return pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'lodt[arrow]')")


def in_span(array, span):
    """Whether a numpy array's data lies inside ``span`` = (address, length)."""
    start, length = span
    address = array.__array_interface__["data"][0]
    return start <= address and address + array.nbytes <= start + length
