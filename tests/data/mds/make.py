"""Writes the MDS fixtures in this directory with MosaicML Streaming's own
MDSWriter (mosaicml-streaming 0.13.0, in a virtual environment of its own:
it pins numpy < 2.2 and transformers < 5, which the test suite's venv cannot
take), and the values written, as JSON, for the tests that read them:

    python3 -m venv /tmp/mds && /tmp/mds/bin/pip install mosaicml-streaming==0.13.0
    /tmp/mds/bin/python tests/data/mds/make.py
"""

import json
import os
import pathlib
import shutil

import numpy as np
from streaming import MDSWriter

here = pathlib.Path(__file__).resolve().parent
rng = np.random.default_rng(9)
columns = {"ids": "ndarray:int32", "any": "ndarray", "text": "str", "n": "int", "f": "float32", "grid": "ndarray:uint8:2,2"}
samples = []
for i in range(40):
    samples.append(
        {
            "ids": rng.integers(0, 50000, size=int(rng.integers(1, 40))).astype(np.int32),
            "any": rng.integers(0, 100, size=(int(rng.integers(1, 5)), 3)).astype(np.float64),
            "text": f"document {i}",
            "n": i * 7,
            "f": np.float32(i / 4),
            "grid": np.full((2, 2), i % 256, np.uint8),
        }
    )
for compression in ("raw", "zstd"):
    out = here / compression
    shutil.rmtree(out, ignore_errors=True)
    with MDSWriter(out=str(out), columns=columns, compression=None if compression == "raw" else "zstd", size_limit=2048) as w:
        for s in samples:
            w.write(s)
    if compression == "zstd":
        for raw in out.glob("*.mds"):
            os.remove(raw)  # only the compressed shards: the reader decodes them
expected = [
    {"ids": s["ids"].tolist(), "any": s["any"].tolist(), "text": s["text"], "n": s["n"], "f": float(s["f"]), "grid": s["grid"].tolist()}
    for s in samples
]
(here / "expected.json").write_text(json.dumps(expected))
