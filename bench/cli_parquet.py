"""Writes the 100k-row Parquet file of issue 11 with pyarrow's defaults (one
row group): tokens list<int64>, sentences list<list<int32>>, embeddings
list<fixed_size_list<float32, 16>>, label int64 and name string.

    python bench/cli_parquet.py 100000 big.parquet

Then time pyarrow reading lodt's output (see README, Performance):

    python bench/cli_parquet.py --read FILE.parquet ...
"""

import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def write(n, path):
    rng = np.random.default_rng(0)
    tokens = pa.array([rng.integers(0, 30000, k) for k in rng.integers(1, 60, n)], pa.list_(pa.int64()))
    sentences = pa.array(
        [[list(rng.integers(0, 100, rng.integers(1, 12)).astype(np.int32)) for _ in range(k)] for k in rng.integers(1, 6, n)],
        pa.list_(pa.list_(pa.int32())),
    )
    embeddings = pa.array(
        [[list(rng.random(16, dtype=np.float32)) for _ in range(k)] for k in rng.integers(1, 8, n)],
        pa.list_(pa.list_(pa.float32(), 16)),
    )
    label = pa.array(rng.integers(0, 10, n))
    name = pa.array([f"row{i}" for i in range(n)])
    table = pa.table({"tokens": tokens, "sentences": sentences, "embeddings": embeddings, "label": label, "name": name})
    pq.write_table(table, path)


def read(paths):
    for path in paths:
        best = min(_timed(path) for _ in range(3))
        groups = pq.ParquetFile(path).num_row_groups
        print(f"{path}: {groups} row groups, pyarrow read_table best of 3: {best:.2f} s")


def _timed(path):
    start = time.perf_counter()
    pq.read_table(path)
    return time.perf_counter() - start


if __name__ == "__main__":
    if sys.argv[1] == "--read":
        read(sys.argv[2:])
    else:
        write(int(sys.argv[1]), sys.argv[2])
