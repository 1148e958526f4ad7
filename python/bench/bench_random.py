"""Random access one document at a time, raw and compressed, from Python:
lodt against the numpy floor, Megatron's ``.bin``/``.idx`` layout and
megatron-core's own ``IndexedDataset`` on those files.

    python python/bench/bench_random.py [--docs 50000] [--reps 5] [--queries 10000] [--dir DIR] [--keep]
                                        [--no-megatron-core]

Data (generated from a seed): ``--docs`` documents of 20-2,000 int32 tokens
(about 1,000 on average: 200 MB at 50,000 documents), written as

  lodt raw    a lodt dataset (``lodt.write_dataset``), one tensor ``tokens``
              int32 with one LoD level (documents), batches of 64 documents
  lodt zstd   the same with ``compression="zstd"`` (format 2.0)
  floor       one flat ``.npy`` of the tokens and one of the document
              offsets, memory-mapped: a document is ``tokens[o[i]:o[i+1]]``
  megatron    Megatron-LM's documented ``MMapIndexedDataset`` layout: a
              ``.bin`` of the tokens and an ``.idx`` (magic ``MMIDIDX``,
              version 1, dtype code, counts, int32 sizes, int64 byte
              pointers, int64 document index), read as Megatron's reader
              does: the index arrays as ``np.frombuffer`` views of the
              ``.idx`` map, a document as ``np.frombuffer(bin_map, dtype,
              count=size, offset=pointer)`` (megatron-core's
              ``IndexedDataset.__getitem__`` is this call)
  megatron-core  megatron-core's own reader of the same two files,
              ``megatron.core.datasets.indexed_dataset.IndexedDataset(prefix,
              mmap=True)``, a document ``ds[i]``; it runs in a process of its
              own (``python -c``, the interpreter of this script: it needs
              torch, and importing it beside the other frameworks once aborted
              the test process), started once and told each run's task over a
              pipe, so the runs stay interleaved; it times each run with the
              same clock and returns the time and the checksum. Left out, with
              a line saying so, when megatron-core does not import or with
              ``--no-megatron-core``. (The files are the script's own writer's;
              they are the bytes megatron-core's ``IndexedDatasetBuilder``
              writes for one sequence per document, which
              ``python/tests/test_megatron.py`` checks for lodt's converter.)

Page cache warm (every file read once before the runs), runs interleaved
across systems, each figure the median of ``--reps`` runs. Each run returns
a checksum (the sum of every token read, and of the lengths); it must agree
across systems, or the script stops.

  random       ``--queries`` random documents (seeded, distinct, random
               order), one by one, each as a numpy array, every run opening
               its dataset afresh (lodt's random-access cache starts empty,
               so every batch touched is decoded once): lodt
               ``ds.sequence_arrays(i)["tokens"]`` (``arrays``) and
               ``ds[i]["tokens"].numpy()`` (``batch``); ``zstd, no cache``
               is ``cache_bytes=0``, every read decoding its batch (how
               every compressed read went before the cache)
  random-hot   the same ids, the dataset opened once and read once before
               the runs (the cache holds the batches, within its default
               budget of 256 MiB)
  random-hot-dropped  the same, each document dropped once its length is
               taken (as a training step uses an item), not kept
  epoch        a shuffled epoch, one document per step: lodt
               ``lodt.Dataset(batch_size=1, shuffle=True)``; the floor,
               megatron and megatron-core over a seeded permutation
  per call     where one ``ds[i]`` spends its time, raw, hot (µs per call,
               the same ids): a bare binding call (``num_sequences``),
               ``DatasetReader.sequence`` (the native Batch),
               ``lodt.Dataset.sequence``, ``ds[i]`` plus its numpy view, and
               the fast path ``DatasetReader.sequence_arrays`` and
               ``lodt.Dataset.sequence_arrays``

The megatron and megatron-core rows open afresh where lodt does (``random``,
``epoch``) and are opened once and read once where lodt is hot.

Needs the release wheel of lodt (``scripts/wheel``). The data (about twice
the tokens' bytes) goes to ``--dir`` (default ``target/bench-random``),
deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

import lodt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS_PER_BATCH = 64
# Megatron's dtype codes (megatron/core/datasets/indexed_dataset.py, DType).
MEGATRON_INT32 = 4
MEGATRON_MAGIC = b"MMIDIDX\x00\x00"


# ---------------------------------------------------------------- data


def lengths_of(docs, seed):
    return np.random.default_rng(seed).integers(20, 2001, docs)


def tokens_of(lengths, seed):
    return np.random.default_rng(seed + 1).integers(0, 50_000, int(lengths.sum()), dtype=np.int32)


def write_all(root, docs, seed):
    lengths = lengths_of(docs, seed)
    tokens = tokens_of(lengths, seed)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    def batches():
        for first in range(0, docs, DOCS_PER_BATCH):
            last = min(first + DOCS_PER_BATCH, docs)
            lo, hi = int(offsets[first]), int(offsets[last])
            yield {"tokens": lodt.create_lod_tensor(tokens[lo:hi], [lengths[first:last].tolist()])}

    for name, compression in (("raw", "none"), ("zstd", "zstd")):
        lodt.write_dataset(os.path.join(root, name), batches(), compression=compression, fsync=False)
    np.save(os.path.join(root, "tokens.npy"), tokens)
    np.save(os.path.join(root, "offsets.npy"), offsets)
    tokens.tofile(os.path.join(root, "megatron.bin"))
    with open(os.path.join(root, "megatron.idx"), "wb") as f:
        f.write(MEGATRON_MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", MEGATRON_INT32))
        f.write(struct.pack("<Q", docs))
        f.write(struct.pack("<Q", docs + 1))
        f.write(lengths.astype(np.int32).tobytes(order="C"))
        f.write((offsets[:-1] * 4).astype(np.int64).tobytes(order="C"))
        f.write(np.arange(docs + 1, dtype=np.int64).tobytes(order="C"))


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def warm(root):
    for d, _, fs in os.walk(root):
        for f in fs:
            with open(os.path.join(d, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass


# ---------------------------------------------------------------- readers


class Megatron:
    """Megatron's MMapIndexedDataset reader of the layout above (its
    ``_IndexReader`` and ``get``)."""

    def __init__(self, prefix):
        self._idx = np.memmap(prefix + ".idx", mode="r", order="C")
        buf = memoryview(self._idx)
        assert bytes(buf[:9]) == MEGATRON_MAGIC
        (version,) = struct.unpack("<Q", bytes(buf[9:17]))
        (code,) = struct.unpack("<B", bytes(buf[17:18]))
        assert version == 1 and code == MEGATRON_INT32
        (count,) = struct.unpack("<Q", bytes(buf[18:26]))
        offset = 34
        self.sizes = np.frombuffer(buf, dtype=np.int32, count=count, offset=offset)
        self.pointers = np.frombuffer(buf, dtype=np.int64, count=count, offset=offset + self.sizes.nbytes)
        self._bin = np.memmap(prefix + ".bin", mode="r", order="C")
        self._bin_buffer = memoryview(self._bin)

    def __len__(self):
        return len(self.sizes)

    def __getitem__(self, i):
        return np.frombuffer(self._bin_buffer, dtype=np.int32, count=int(self.sizes[i]), offset=int(self.pointers[i]))


class Floor:
    def __init__(self, root):
        # A plain ndarray over the map (slices of an np.memmap are memmap
        # objects, slower to make).
        self.tokens = np.load(os.path.join(root, "tokens.npy"), mmap_mode="r").view(np.ndarray)
        self.offsets = np.load(os.path.join(root, "offsets.npy")).tolist()

    def __getitem__(self, i):
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]


# megatron-core's IndexedDataset, in a process of its own. Its first stdin
# line is the job (prefix, ids, permutation); then each line is a task, and
# each answer one JSON line on the original stdout (anything megatron-core
# prints goes to stderr): the run's time by the same clock as ``timed``, and
# its checksum by the same sum as ``checksum``.
_MEGATRON_CORE = r"""
import gc, json, os, sys, time
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
import numpy as np
import torch
import megatron.core
from megatron.core.datasets.indexed_dataset import IndexedDataset, _IndexReader

job = json.loads(sys.stdin.readline())
prefix, ids, perm = job["prefix"], job["ids"], job["perm"]


def checksum(arrays):
    s = n = 0
    for a in arrays:
        if isinstance(a, int):
            n += a
            continue
        s += int(a.sum(dtype=np.int64))
        n += len(a)
    return [s, n]


def each(get, ids):
    return [get(i) for i in ids]


def each_dropped(get, ids):
    return [len(get(i)) for i in ids]


# A document of megatron-core's is a view of a map that the dataset's
# __del__ closes (numpy does not hold the map open): a dataset opened in a
# run is kept here until its documents are summed, or reading them crashes.
opened = []


def fresh():
    ds = IndexedDataset(prefix, mmap=True)
    opened.append(ds)
    return ds


hot = IndexedDataset(prefix, mmap=True)
each(hot.__getitem__, ids)
work = {
    "random": lambda: each(fresh().__getitem__, ids),
    "random-hot": lambda: each(hot.__getitem__, ids),
    "random-hot-dropped": lambda: each_dropped(hot.__getitem__, ids),
    "epoch": lambda: each(fresh().__getitem__, perm),
}
print(json.dumps({"megatron-core": megatron.core.__version__, "torch": torch.__version__}), file=out, flush=True)
for line in sys.stdin:
    gc.collect()
    t = time.perf_counter()
    docs = work[line.strip()]()
    dt = time.perf_counter() - t
    value = checksum(docs)
    del docs
    opened.clear()
    # The index reader's lru_cache (8 entries, keyed by the reader) would
    # keep a fresh dataset's index reader alive into the next run, whose
    # first reads would then close its map on the clock; every other
    # system's dataset is dropped here, off the clock.
    _IndexReader.__getitem__.cache_clear()
    gc.collect()
    print(json.dumps({"dt": dt, "checksum": value}), file=out, flush=True)
"""


class MegatronCore:
    """The worker above: ``run(task)`` is one timed run, ``(seconds,
    checksum)``."""

    def __init__(self, prefix, ids, perm, log_path):
        self._log = open(log_path, "w")
        self._log_path = log_path
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _MEGATRON_CORE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, text=True,
        )
        self._send(json.dumps({"prefix": prefix, "ids": ids, "perm": perm}))
        self.versions = self._receive()

    def _send(self, line):
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def _receive(self):
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait()
            self._log.flush()
            with open(self._log_path) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"megatron-core's process ended (exit {self._proc.returncode}):\n{tail}")
        return json.loads(line)

    def run(self, task):
        self._send(task)
        r = self._receive()
        return r["dt"], tuple(r["checksum"])

    def close(self):
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=60)
        self._log.close()


def megatron_core_imports():
    """Whether megatron-core imports in this interpreter (in a process of its
    own), and if not the last line it printed."""
    run = subprocess.run([sys.executable, "-c", "import megatron.core.datasets.indexed_dataset"],
                         capture_output=True, text=True)
    lines = run.stderr.strip().splitlines()
    return run.returncode == 0, (lines[-1] if lines else f"exit {run.returncode}")


def checksum(arrays):
    s = n = 0
    for a in arrays:
        if isinstance(a, int):  # a length alone (a document dropped)
            n += a
            continue
        s += int(a.sum(dtype=np.int64))
        n += len(a)
    return s, n


def each(get, ids):
    # The documents are kept (a list) and summed after the clock stops.
    return [get(i) for i in ids]


def each_dropped(get, ids):
    # Each document dropped once its length is taken (a training step's
    # use): memory is reused, no page faulted in for copies kept.
    return [len(get(i)) for i in ids]


# ---------------------------------------------------------------- main


def timed(fn):
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def per_call(root, ids, reps):
    """Microseconds per call of each step of one ``ds[i]``, hot (raw, and
    the fast path on zstd with its batches cached)."""
    path = os.path.join(root, "raw")
    ds = lodt.Dataset(path)
    reader = ds._native()
    zstd = lodt.Dataset(os.path.join(root, "zstd"))._native()
    steps = {
        "binding call (num_sequences)": lambda i: reader.num_sequences,
        "DatasetReader.sequence (Batch)": reader.sequence,
        "lodt.Dataset.sequence": ds.sequence,
        "ds[i]['tokens'].numpy()": lambda i: ds[i]["tokens"].numpy(),
        "DatasetReader.sequence_arrays": reader.sequence_arrays,
        "lodt.Dataset.sequence_arrays": ds.sequence_arrays,
        "DatasetReader.sequence_arrays, zstd, cached": zstd.sequence_arrays,
    }
    for fn in steps.values():
        for i in ids:
            fn(i)
    out = {}
    for name, fn in steps.items():
        times = []
        for _ in range(reps):
            dt, _ = timed(lambda: [fn(i) for i in ids])
            times.append(dt / len(ids) * 1e6)
        out[name] = statistics.median(times)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=47)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench-random"))
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--no-megatron-core", action="store_true", help="leave out megatron-core's IndexedDataset")
    args = ap.parse_args()

    root = args.dir
    core = None
    try:
        if not os.path.exists(os.path.join(root, "megatron.idx")):
            shutil.rmtree(root, ignore_errors=True)
            os.makedirs(root)
            t = time.perf_counter()
            write_all(root, args.docs, args.seed)
            print(f"written in {time.perf_counter() - t:.1f} s", flush=True)
        for name in ("raw", "zstd", "tokens.npy", "megatron.bin"):
            print(f"{name}: {du(os.path.join(root, name)) / 1e6:.1f} MB", flush=True)
        n = len(lodt.Dataset(os.path.join(root, "raw")))
        queries = min(args.queries, n)
        ids = np.random.default_rng(args.seed + 2).choice(n, queries, replace=False).tolist()
        perm = np.random.default_rng(args.seed + 3).permutation(n).tolist()
        warm(root)
        if args.no_megatron_core:
            print("megatron-core: left out (--no-megatron-core)", flush=True)
        else:
            found, why = megatron_core_imports()
            if found:
                core = MegatronCore(os.path.join(root, "megatron"), ids, perm, os.path.join(root, "megatron-core.log"))
                print(f"megatron-core {core.versions['megatron-core']}, torch {core.versions['torch']}, "
                      "in a process of its own", flush=True)
            else:
                print(f"megatron-core: left out, it does not import here ({why})", flush=True)

        def lodt_arrays(name, **kw):
            ds = lodt.Dataset(os.path.join(root, name), **kw)
            return each(lambda i: ds.sequence_arrays(i)["tokens"], ids)

        def lodt_batch(name):
            ds = lodt.Dataset(os.path.join(root, name))
            return each(lambda i: ds[i]["tokens"].numpy(), ids)

        def lodt_epoch(name):
            ds = lodt.Dataset(os.path.join(root, name), batch_size=1, shuffle=True, seed=args.seed, shuffle_buffer=n)
            return [b["tokens"].numpy() for b in ds]

        hot = {
            "floor": Floor(root),
            "megatron": Megatron(os.path.join(root, "megatron")),
            "raw": lodt.Dataset(os.path.join(root, "raw")),
            "zstd": lodt.Dataset(os.path.join(root, "zstd")),
        }
        for name in ("raw", "zstd"):
            each(hot[name].sequence_arrays, ids)
        work = {
            "random": {
                "floor": lambda: each(Floor(root).__getitem__, ids),
                "megatron": lambda: each(Megatron(os.path.join(root, "megatron")).__getitem__, ids),
                "megatron-core": "random",
                "lodt raw arrays": lambda: lodt_arrays("raw"),
                "lodt zstd arrays": lambda: lodt_arrays("zstd"),
                "lodt raw batch": lambda: lodt_batch("raw"),
                "lodt zstd batch": lambda: lodt_batch("zstd"),
                "lodt zstd arrays, no cache": lambda: lodt_arrays("zstd", cache_bytes=0),
            },
            "random-hot": {
                "floor": lambda: each(hot["floor"].__getitem__, ids),
                "megatron": lambda: each(hot["megatron"].__getitem__, ids),
                "megatron-core": "random-hot",
                "lodt raw arrays": lambda: each(lambda i: hot["raw"].sequence_arrays(i)["tokens"], ids),
                "lodt zstd arrays": lambda: each(lambda i: hot["zstd"].sequence_arrays(i)["tokens"], ids),
                "lodt raw batch": lambda: each(lambda i: hot["raw"][i]["tokens"].numpy(), ids),
                "lodt zstd batch": lambda: each(lambda i: hot["zstd"][i]["tokens"].numpy(), ids),
            },
            "random-hot-dropped": {
                "floor": lambda: each_dropped(hot["floor"].__getitem__, ids),
                "megatron": lambda: each_dropped(hot["megatron"].__getitem__, ids),
                "megatron-core": "random-hot-dropped",
                "lodt raw arrays": lambda: each_dropped(lambda i: hot["raw"].sequence_arrays(i)["tokens"], ids),
                "lodt zstd arrays": lambda: each_dropped(lambda i: hot["zstd"].sequence_arrays(i)["tokens"], ids),
                "lodt raw batch": lambda: each_dropped(lambda i: hot["raw"][i]["tokens"].numpy(), ids),
                "lodt zstd batch": lambda: each_dropped(lambda i: hot["zstd"][i]["tokens"].numpy(), ids),
            },
            "epoch": {
                "floor": lambda: each(Floor(root).__getitem__, perm),
                "megatron": lambda: each(Megatron(os.path.join(root, "megatron")).__getitem__, perm),
                "megatron-core": "epoch",
                "lodt raw": lambda: lodt_epoch("raw"),
                "lodt zstd": lambda: lodt_epoch("zstd"),
            },
        }
        # megatron-core's entries name its worker's task (absent without it).
        for systems in work.values():
            if core is None:
                del systems["megatron-core"]
            else:
                systems["megatron-core"] = (lambda task: lambda: core.run(task))(systems["megatron-core"])
        remote = {"megatron-core"}
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
              f"Python {platform.python_version()}, numpy {np.__version__}, lodt {lodt.__version__}; "
              f"{n} documents, {queries} random, median of {args.reps}", flush=True)
        medians = {}
        for task, systems in work.items():
            times = {s: [] for s in systems}
            sums = {}
            for _ in range(args.reps):
                for system, fn in systems.items():
                    if system in remote:
                        dt, value = fn()
                    else:
                        dt, docs = timed(fn)
                        value = checksum(docs)
                        del docs
                    times[system].append(dt)
                    if sums.setdefault(system, value) != value:
                        sys.exit(f"{task}/{system}: checksum changed between runs")
            if len(set(sums.values())) != 1:
                sys.exit(f"{task}: checksums differ: {sums}")
            medians[task] = {s: statistics.median(t) for s, t in times.items()}
            print(f"{task}: " + ", ".join(f"{s} {m * 1e3:.1f} ms" for s, m in medians[task].items())
                  + f"  (checksum {sums['floor']})", flush=True)
        calls = per_call(root, ids, args.reps)

        peers = ["floor", "megatron"] + (["megatron-core"] if core is not None else [])

        def table(title, r):
            print(f"| {title} | ms | " + " | ".join(f"/ {p}" for p in peers) + " |")
            print("|---|---|" + "---|" * len(peers))
            for s, m in r.items():
                print(f"| {s} | {m * 1e3:.1f} | " + " | ".join(f"{m / r[p]:.2f}x" for p in peers) + " |")

        e = medians["epoch"]
        for task in ("random", "random-hot", "random-hot-dropped"):
            r = medians[task]
            print()
            table(f"{queries} random documents, one by one ({task})", r)
            print()
            print(f"zstd / raw, {task}: arrays {r['lodt zstd arrays'] / r['lodt raw arrays']:.2f}x, "
                  f"batch {r['lodt zstd batch'] / r['lodt raw batch']:.2f}x")
            if core is not None:
                c = r["megatron-core"]
                print(f"lodt / megatron-core, {task}: raw arrays {r['lodt raw arrays'] / c:.2f}x, "
                      f"zstd arrays {r['lodt zstd arrays'] / c:.2f}x, raw batch {r['lodt raw batch'] / c:.2f}x, "
                      f"zstd batch {r['lodt zstd batch'] / c:.2f}x")
        r = medians["random"]
        print(f"zstd without the cache / with it, random: {r['lodt zstd arrays, no cache'] / r['lodt zstd arrays']:.1f}x")
        print()
        table(f"shuffled epoch of {n} documents, one per step", e)
        print()
        print("| one call, hot | µs |")
        print("|---|---|")
        for s, us in calls.items():
            print(f"| {s} | {us:.2f} |")
    finally:
        if core is not None:
            core.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
