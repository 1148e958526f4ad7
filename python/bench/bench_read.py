"""Read benchmark of lodt's Python package against its peers.

    python python/bench/bench_read.py [--sequences 50000] [--dim 32] [--dir DIR]

Data: one 1-level float32 tensor ``x`` of ``--sequences`` sequences of 1..63
rows (32 on average) of ``--dim`` floats, in batches of 1000 sequences, plus a
0-level int64 ``label`` per sequence. The same data is written as:

* ``.lodt`` (lodt, memory-mapped);
* an Arrow IPC file (one record batch per lodt batch; ``large_list`` of the
  tensor extension, as lodt maps it), read memory-mapped by pyarrow;
* a Lance dataset (``pylance``), when it is installed;
* numpy ``.npy`` files of the flat values and the offsets, memory-mapped: the
  floor (no format at all).

Measured, each the best of several runs (a shared machine's noise only adds),
page cache warm:

1. open + fetch one sequence as a numpy array (a fresh open each time);
2. 10,000 random sequence fetches as numpy arrays, one by one (loop; each
   pick's batch and row computed beforehand, for every reader; lodt also
   through ``File.row(i)``, which maps the global index itself);
3. the same 10,000 sequences gathered at once (``File.take``; pyarrow
   ``Table.take``; Lance ``take``; numpy fancy indexing);
4. full scan: every value read once (a sum over every sequence's values).

Prints a table with the ratio of each peer's time to lodt's (above 1: lodt
is faster). Build the release wheel first: ``maturin build --release -m
python/Cargo.toml`` and install it (a debug build measures debug code).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np

import lodt

try:
    import pyarrow as pa
    import pyarrow.ipc as ipc
except ImportError:  # pragma: no cover
    pa = None
try:
    import lance
except ImportError:  # pragma: no cover
    lance = None


def timeit(fn, repeat=7, number=1):
    """Best seconds per call of ``fn`` over ``repeat`` runs of ``number`` calls
    (the minimum: on a shared machine, the other runs measure the neighbours)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def make_data(d, sequences, dim, seed=0):
    rng = np.random.default_rng(seed)
    batch = 1000
    lengths = rng.integers(1, 64, size=sequences)
    path = os.path.join(d, "data.lodt")
    with lodt.Writer(path, fsync=False) as w:
        for b in range(0, sequences, batch):
            lens = lengths[b : b + batch]
            x = rng.standard_normal((int(lens.sum()), dim), dtype=np.float32)
            labels = np.arange(b, b + len(lens), dtype=np.int64)
            w.write({"x": lodt.LodTensor(x, [lens.tolist()]), "label": labels})
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    f = lodt.open(path)
    values = np.concatenate([np.asarray(b["x"]) for b in f])
    np.save(os.path.join(d, "values.npy"), values)
    np.save(os.path.join(d, "offsets.npy"), offsets)
    return path, offsets


def locations(rows, picks):
    """(batch, row in batch) of each global row pick, computed outside the timings."""
    ks = np.searchsorted(rows, picks, side="right") - 1
    return [(int(k), int(i - rows[k])) for k, i in zip(ks, picks)]


def bench_lodt(path, picks, k0, r0):
    def open_fetch():
        return np.asarray(lodt.open(path)[k0]["x"][r0])

    f = lodt.open(path)
    rows = np.cumsum([0] + [f.batch_rows(k) for k in range(len(f))])
    locs = locations(rows, picks)
    xs = [b["x"] for b in f]
    global_picks = [int(i) for i in picks]

    def loop():
        for k, r in locs:
            np.asarray(xs[k][r])

    def loop_rows():
        for i in global_picks:
            np.asarray(f.row(i)["x"])

    def bulk():
        return np.asarray(f.take(global_picks)["x"])

    def scan():
        total = 0.0
        for b in f:
            total += float(np.asarray(b["x"]).sum(dtype=np.float64))
        return total

    return {
        "open + fetch 1": timeit(open_fetch, number=20),
        "10k fetches, loop": timeit(loop),
        "10k fetches, loop via File.row(i)": timeit(loop_rows),
        "10k fetches, bulk take": timeit(bulk),
        "full scan": timeit(scan),
    }


def bench_arrow(d, path, picks, k0, r0):
    arrow_path = os.path.join(d, "data.arrow")
    if not os.path.exists(arrow_path):
        lodt.convert(path, arrow_path)

    def values_of(chunk, r):
        offsets = chunk.offsets
        a, b = offsets[r].as_py(), offsets[r + 1].as_py()
        return chunk.values.storage.values.to_numpy()[a * DIM : b * DIM].reshape(b - a, DIM)

    def open_fetch():
        reader = ipc.open_file(pa.memory_map(arrow_path))
        return values_of(reader.get_batch(k0).column("x"), r0)

    reader = ipc.open_file(pa.memory_map(arrow_path))
    table = reader.read_all()
    chunks = table.column("x").chunks
    rows = np.cumsum([0] + [len(c) for c in chunks])
    # Offsets and flat values as numpy, once per chunk (zero-copy views).
    flat = [(c.offsets.to_numpy(), c.values.storage.values.to_numpy()) for c in chunks]
    locs = locations(rows, picks)

    def loop():
        for k, r in locs:
            offsets, values = flat[k]
            values[offsets[r] * DIM : offsets[r + 1] * DIM].reshape(-1, DIM)

    def bulk():
        taken = table.take(pa.array(picks))
        col = taken.column("x").combine_chunks()
        return col.values.storage.values.to_numpy()

    def scan():
        total = 0.0
        for c in chunks:
            total += float(c.values.storage.values.to_numpy().sum(dtype=np.float64))
        return total

    return {
        "open + fetch 1": timeit(open_fetch, number=20),
        "10k fetches, loop": timeit(loop),
        "10k fetches, bulk take": timeit(bulk),
        "full scan": timeit(scan),
    }


def bench_lance(d, path, picks, r0_global):
    lance_path = os.path.join(d, "data.lance")
    if not os.path.exists(lance_path):
        table = pa.RecordBatchReader.from_stream(lodt.open(path)).read_all()
        lance.write_dataset(table, lance_path)
    ds = lance.dataset(lance_path)

    def fetch(ds, idx):
        t = ds.take(idx, columns=["x"])
        return t.column("x").combine_chunks()

    def open_fetch():
        return fetch(lance.dataset(lance_path), [r0_global])

    global_picks = [int(i) for i in picks]

    def loop():
        for i in global_picks:
            fetch(ds, [i])

    def bulk():
        return fetch(ds, picks.tolist())

    def scan():
        total = 0.0
        for b in ds.to_batches(columns=["x"]):
            col = b.column("x")
            values = col.values
            values = values.storage if isinstance(values, pa.ExtensionArray) else values
            total += float(values.values.to_numpy().sum(dtype=np.float64))
        return total

    return {
        "open + fetch 1": timeit(open_fetch, number=5),
        "10k fetches, loop": timeit(loop, repeat=1),
        "10k fetches, bulk take": timeit(bulk, repeat=3),
        "full scan": timeit(scan, repeat=3),
    }


def bench_npy(d, picks, r0_global):
    vpath, opath = os.path.join(d, "values.npy"), os.path.join(d, "offsets.npy")

    def open_fetch():
        v = np.load(vpath, mmap_mode="r")
        o = np.load(opath, mmap_mode="r")
        return v[o[r0_global] : o[r0_global + 1]]

    values = np.load(vpath, mmap_mode="r")
    offsets = np.load(opath, mmap_mode="r")
    global_picks = [int(i) for i in picks]

    def loop():
        for i in global_picks:
            values[offsets[i] : offsets[i + 1]]

    def bulk():
        starts, ends = offsets[picks], offsets[picks + 1]
        lens = ends - starts
        idx = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(lens.sum())
        return values[idx]

    def scan():
        return float(values.sum(dtype=np.float64))

    return {
        "open + fetch 1": timeit(open_fetch, number=20),
        "10k fetches, loop": timeit(loop),
        "10k fetches, bulk take": timeit(bulk),
        "full scan": timeit(scan),
    }


DIM = 32


def main():
    global DIM
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--fetches", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="where to write the data (default: a temp dir, removed)")
    args = parser.parse_args()
    DIM = args.dim
    d = args.dir or tempfile.mkdtemp(prefix="lodt-bench-")
    os.makedirs(d, exist_ok=True)
    try:
        path, offsets = make_data(d, args.sequences, args.dim)
        size = os.path.getsize(path)
        rng = np.random.default_rng(1)
        picks = rng.integers(0, args.sequences, size=args.fetches)
        k0, r0 = len(lodt.open(path)) // 2, 7
        r0_global = k0 * 1000 + r0
        print(f"lodt {lodt.__version__}, numpy {np.__version__}" + (f", pyarrow {pa.__version__}" if pa else "")
              + (f", pylance {lance.__version__}" if lance else ", pylance not installed"))
        print(f"data: {args.sequences} sequences, {int(offsets[-1])} rows of {args.dim} float32, "
              f".lodt {size / 2**20:.1f} MiB\n")
        results = {"lodt": bench_lodt(path, picks, k0, r0)}
        if pa is not None:
            results["pyarrow IPC (mmap)"] = bench_arrow(d, path, picks, k0, r0)
        if lance is not None and pa is not None:
            results["Lance"] = bench_lance(d, path, picks, r0_global)
        results["numpy .npy (mmap)"] = bench_npy(d, picks, r0_global)
        rows = list(results["lodt"])
        peers = [p for p in results if p != "lodt"]
        header = f"{'measure':38} {'lodt':>11} " + " ".join(f"{p:>26}" for p in peers)
        print(header)
        print("-" * len(header))
        for row in rows:
            base = results["lodt"][row]
            cells = []
            for p in peers:
                key = row if row in results[p] else None
                v = results[p].get(key) if key else None
                cells.append(f"{v * 1e3:9.3f} ms ({v / base:6.2f}x)" if v else " " * 26)
            print(f"{row:38} {base * 1e3:8.3f} ms " + " ".join(f"{c:>26}" for c in cells))
        print("\nratio = peer time / lodt time (above 1: lodt is faster)")
    finally:
        if args.dir is None:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
