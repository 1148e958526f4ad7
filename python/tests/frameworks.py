"""The LoD tensors every framework round trip (test_tf.py, test_jax.py) runs
over: 1, 2 and 3 LoD levels with empty sequences, element shapes [] and
[2, 4], and a tensor with no LoD."""

from __future__ import annotations

import numpy as np

import lodt

# Lengths, top level first; every one has an empty sequence somewhere.
LENGTHS = {
    "1-level": [[2, 0, 3]],
    "2-level": [[2, 0, 1], [3, 0, 2]],
    "3-level": [[1, 2], [2, 0, 1], [1, 3, 0]],
    "all-empty": [[0, 0]],
}
ELEMENT_SHAPES = [[], [2, 4]]


def make(dtype: str, lengths: list[list[int]], element_shape: list[int]) -> lodt.LodTensor:
    """A tensor of distinct values (of ``dtype``) with the given LoD."""
    rows = sum(lengths[-1]) if lengths else 3
    n = rows * int(np.prod(element_shape, dtype=np.int64))
    if dtype == "bool":
        values = np.arange(n) % 3 == 1
    else:
        values = (np.arange(n) * 3 - 7).astype(dtype)
    return lodt.LodTensor(values.reshape([rows, *element_shape]), lengths or None)


def cases(dtypes: list[str]) -> list[tuple[str, str, list[list[int]], list[int]]]:
    """(id, dtype, lengths, element shape) for every combination."""
    out = []
    for dtype in dtypes:
        for name, lengths in [*LENGTHS.items(), ("no-lod", [])]:
            for shape in ELEMENT_SHAPES:
                out.append((f"{dtype}-{name}-{shape}", dtype, lengths, shape))
    return out
