"""Writing format 1.0 against 2.0 (uncompressed) and a raw write of the same
bytes, from Python, in one run.

    python bench/write_versions.py

8 batches of 8 M int64 token ids (documents of 1,000) and 2 M float32 rows
of 4 (732 MiB), written with ``lodt.Writer(fsync=False)`` in each version and
with plain ``file.write`` of every tensor's bytes; 7 interleaved runs,
medians. Needs a release build of the wheel on ``PYTHONPATH``.
"""
import os
import statistics
import tempfile
import time

import numpy as np

import lodt

DIR = tempfile.mkdtemp()
rng = np.random.default_rng(1)
batches = []
for k in range(8):
    n = 8_000_000
    lengths = [1000] * (n // 1000)
    batches.append({"emb": lodt.create_lod_tensor(rng.standard_normal((n // 4, 4)).astype(np.float32).reshape(-1, 4), [[250] * (n // 1000)]),
                    "ids": lodt.create_lod_tensor(rng.integers(0, 50000, n, dtype=np.int64), [lengths])})
raw = sum(sum(t.nbytes for t in b.values()) for b in batches)
def run(version):
    p = os.path.join(DIR, f"wb-{version}.lodt")
    t = time.perf_counter()
    with lodt.Writer(p, fsync=False, format_version=version) as w:
        for b in batches:
            w.write(b)
    dt = time.perf_counter() - t
    os.remove(p)
    return dt
def raw_write():
    p = os.path.join(DIR, "wb-raw.bin")
    t = time.perf_counter()
    with open(p, "wb") as f:
        for b in batches:
            for tt in b.values():
                f.write(memoryview(np.asarray(tt)).cast("B"))
    dt = time.perf_counter() - t
    os.remove(p)
    return dt
res = {"1.0": [], "2.0": [], "raw": []}
for rep in range(7):
    for k in (["1.0", "2.0", "raw"] if rep % 2 else ["raw", "2.0", "1.0"]):
        res[k].append(run(k) if k != "raw" else raw_write())
print(f"{raw/2**20:.0f} MiB; load {os.getloadavg()}")
for k, v in res.items():
    print(k, f"{statistics.median(v)*1e3:.0f} ms", f"{raw/statistics.median(v)/1e9:.2f} GB/s")
print("2.0 / 1.0 time:", round(statistics.median(res["2.0"]) / statistics.median(res["1.0"]), 3))
