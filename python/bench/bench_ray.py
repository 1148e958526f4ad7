"""Ray Data read benchmark: ``lodt.ray.read_lodt`` against Ray's own
``ray.data.read_parquet`` of the same data, in the same run.

    python python/bench/bench_ray.py [--gib 1.0] [--reps 3] [--dir DIR] [--keep]

Data (generated from a seed): batches of 512 documents of 16-112 tokens; per
token an int64 token id and a float32 embedding row of 64. ``--gib`` is the
size of the lodt dataset (256 MiB shards). The Parquet copy holds the same
tables as read_lodt yields (one row per document: ``tokens``
``large_list<fixed_size_list<int64, 1>>``, ``emb``
``large_list<fixed_size_list<float32, 64>>``), one file per lodt shard, row
groups of one lodt batch, pyarrow's default (snappy) compression.

Each run reads the whole dataset on a local Ray (``ray.init(num_cpus=2)``)
with 16 read tasks and at most ``concurrency`` of them at once (1, then 2),
iterating ``iter_batches(batch_format="pyarrow")`` on the driver and summing
the rows and every token id (the checksum must agree), after an untimed
warm-up read of both (worker processes start). Rows/s is documents
per second; the best of ``--reps`` runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray

import lodt
import lodt.ray as lray

DOCS = 512
EMB = 64


def batches(total_bytes: int):
    rng = np.random.default_rng(7)
    written = 0
    doc = 0
    while written < total_bytes:
        lens = rng.integers(16, 113, DOCS)
        n = int(lens.sum())
        tokens = rng.integers(0, 50_000, (n, 1), dtype=np.int64)
        emb = rng.standard_normal((n, EMB), dtype=np.float32)
        lod = [lens.tolist()]
        yield lodt.Batch(
            {"tokens": lodt.create_lod_tensor(tokens, lod), "emb": lodt.create_lod_tensor(emb, lod)}
        )
        written += n * (8 + 4 * EMB)
        doc += DOCS


def consume(ds) -> tuple[int, int]:
    rows = 0
    total = 0
    for t in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        rows += t.num_rows
        total += pc.sum(pc.list_flatten(pc.list_flatten(t["tokens"]))).as_py() or 0
    return rows, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="lodt-bench-ray-")
    src = os.path.join(root, "lodt")
    par = os.path.join(root, "parquet")
    if not os.path.exists(os.path.join(src, "lodt-dataset.json")):
        lodt.write_dataset(src, batches(int(args.gib * (1 << 30))), shard_bytes=256 << 20)
        os.makedirs(par, exist_ok=True)
        for shard in lodt.Dataset(src)._manifest["shards"]:
            with lodt.open(os.path.join(src, shard["name"])) as f:
                tables = [lray._ray_table(pa.record_batch(b)) for b in f]
            with pq.ParquetWriter(os.path.join(par, shard["name"] + ".parquet"), tables[0].schema) as w:
                for t in tables:
                    w.write_table(t)
    size = sum(os.path.getsize(os.path.join(src, n)) for n in os.listdir(src))
    psize = sum(os.path.getsize(os.path.join(par, n)) for n in os.listdir(par))
    print(f"lodt {size / 2**30:.2f} GiB, parquet {psize / 2**30:.2f} GiB, {len(lodt.Dataset(src))} documents")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    # Untimed: worker processes start and import lodt and Parquet's reader.
    consume(lray.read_lodt(src, override_num_blocks=2).limit(10))
    consume(ray.data.read_parquet(par, override_num_blocks=2).limit(10))
    results = {}
    for conc in (1, 2):
        for name, make in (
            ("read_lodt", lambda: lray.read_lodt(src, override_num_blocks=16, concurrency=conc)),
            ("read_parquet", lambda: ray.data.read_parquet(par, override_num_blocks=16, concurrency=conc)),
        ):
            best = None
            check = None
            for _ in range(args.reps):
                t0 = time.perf_counter()
                rows, total = consume(make())
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
                check = (rows, total)
            results[(name, conc)] = (check, rows / best)
            print(f"{name:13s} concurrency {conc}: {rows / best:12,.0f} rows/s ({best:.2f} s, {rows} rows)")
    checks = {c for c, _ in results.values()}
    assert len(checks) == 1, f"checksums differ: {results}"
    for conc in (1, 2):
        ratio = results[("read_lodt", conc)][1] / results[("read_parquet", conc)][1]
        print(f"concurrency {conc}: read_lodt / read_parquet = {ratio:.2f}x")
    ray.shutdown()
    if not args.keep and not args.dir:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
