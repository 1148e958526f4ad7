"""One packed epoch (token budget 16,384) from Python into torch tensors:
lodt against a numpy floor and Hugging Face ``datasets``, in one run.

    python python/bench/bench_pack.py [--docs 40000] [--reps 5] [--budget 16384] [--dir DIR]

Data (from a seed): ``--docs`` documents of 5-16 sentences of 10-51 tokens
(bench/peers.py's shape, about 320 tokens each), int64 token ids. Every
system delivers, per packed mini-batch, the torch tensors ``values`` (flat
token ids), ``cu_seqlens`` (int32) and ``position_ids`` (int64), for the
same mini-batches in the same order:

  lodt   ``lodt.Dataset(shuffle=True, pack_tokens=B, pack_buffer=1000)`` and
         ``lodt.torch.varlen`` (packing best-fit and the offsets in Rust)
  numpy  the floor: the mini-batches lodt delivered (their ids, recorded
         first), gathered with numpy fancy indexing from a memory-mapped flat
         ``tokens.npy`` and document offsets; ``cu_seqlens`` and
         ``position_ids`` with numpy; ``torch.from_numpy``
  hf     Hugging Face ``datasets`` (one row per document, ``tokens``
         list<int64>, saved to disk, memory-mapped, Arrow format): the same
         mini-batches' rows taken by index, flattened with numpy (the work of
         ``transformers``' ``DataCollatorWithFlattening``, which is not
         installed here); ``torch.from_numpy``

Page cache warm (every file read once first); runs interleaved across
systems; each figure is the median of ``--reps`` runs, with the range. Each
run returns a checksum that must agree across systems.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time

import numpy as np
import torch

import lodt
import lodt.torch as lt


def generate(d, docs, seed=12):
    rng = np.random.default_rng(seed)
    sents = rng.integers(5, 17, docs)
    doc_tokens = np.array([int(rng.integers(10, 52, s).sum()) for s in sents])
    offsets = np.concatenate([[0], np.cumsum(doc_tokens)]).astype(np.int64)
    tokens = rng.integers(0, 30000, int(offsets[-1]), dtype=np.int64)
    np.save(os.path.join(d, "tokens.npy"), tokens)
    np.save(os.path.join(d, "doc_tokens.npy"), offsets)

    def batches():
        first = 0
        while first < docs:
            n = min(int(rng.integers(4, 10)), docs - first)
            t0, t1 = int(offsets[first]), int(offsets[first + n])
            yield lodt.Batch({"tokens": lodt.LodTensor(tokens[t0:t1], lod=[(offsets[first : first + n + 1] - t0).tolist()])})
            first += n

    lodt.write_dataset(os.path.join(d, "lodt"), batches(), fsync=False)
    try:
        import datasets
        import pyarrow as pa

        table = pa.table({"tokens": pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(tokens))})
        datasets.Dataset(table).save_to_disk(os.path.join(d, "hf"))
    except ImportError:
        pass
    return int(offsets[-1])


def checksum(values, cu, pos):
    return int(values.sum()) + int(cu.sum()) + int(pos.sum())


def lodt_epoch(d, budget, seed):
    ds = lodt.Dataset(os.path.join(d, "lodt"), shuffle=True, seed=seed, pack_tokens=budget, pack_buffer=1000)
    s = 0
    for b in ds:
        v = lt.varlen(b)
        s += checksum(v.values, v.cu_seqlens, v.position_ids)
    return s


def lodt_order(d, budget, seed):
    ds = lodt.Dataset(os.path.join(d, "lodt"), shuffle=True, seed=seed, pack_tokens=budget, pack_buffer=1000, return_ids=True)
    return [np.asarray(ids) for ids, _ in ds]


def flatten(lengths):
    """cu_seqlens (int32) and position_ids (int64) of sequences of ``lengths``."""
    cu = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=cu[1:])
    pos = np.arange(int(cu[-1]), dtype=np.int64) - np.repeat(cu[:-1].astype(np.int64), lengths)
    return cu, pos


class NumpyFloor:
    def __init__(self, d):
        self.tokens = np.load(os.path.join(d, "tokens.npy"), mmap_mode="r")
        self.offsets = np.load(os.path.join(d, "doc_tokens.npy"))

    def epoch(self, order):
        s = 0
        for ids in order:
            starts = self.offsets[ids]
            lengths = self.offsets[ids + 1] - starts
            cu, pos = flatten(lengths)
            rows = np.repeat(starts - cu[:-1], lengths) + np.arange(int(cu[-1]))
            values = torch.from_numpy(self.tokens[rows])
            s += checksum(values, torch.from_numpy(cu), torch.from_numpy(pos))
        return s


def hf_epoch(ds, order):
    s = 0
    for ids in order:
        col = ds[ids]["tokens"].combine_chunks()
        offsets = col.offsets.to_numpy()
        values = torch.from_numpy(col.values.to_numpy()[offsets[0] : offsets[-1]])
        cu, pos = flatten(np.diff(offsets))
        s += checksum(values, torch.from_numpy(cu), torch.from_numpy(pos))
    return s


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=40000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--budget", type=int, default=16384)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--dir", default=None)
    a = p.parse_args()
    d = a.dir or tempfile.mkdtemp(prefix="lodt-bench-pack-")
    try:
        t0 = time.perf_counter()
        tokens = generate(d, a.docs)
        print(f"data: {a.docs} documents, {tokens} tokens ({time.perf_counter() - t0:.1f} s to write)", flush=True)
        order = lodt_order(d, a.budget, a.seed)
        packed = sum(len(ids) for ids in order)
        efficiency = tokens / (len(order) * a.budget)
        print(f"{len(order)} packed mini-batches of {packed} documents; efficiency {efficiency:.4f}", flush=True)
        floor = NumpyFloor(d)
        systems = {"lodt": lambda: lodt_epoch(d, a.budget, a.seed), "numpy": lambda: floor.epoch(order)}
        try:
            import datasets

            hf = datasets.load_from_disk(os.path.join(d, "hf")).with_format("arrow")
            systems["hf"] = lambda: hf_epoch(hf, order)
        except ImportError:
            print("hf: datasets is not installed; skipped")
        for f in systems.values():  # warm the page cache, check the sums
            f()
        sums = {name: f() for name, f in systems.items()}
        assert len(set(sums.values())) == 1, sums
        times = {name: [] for name in systems}
        for _ in range(a.reps):
            for name, f in systems.items():
                t = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - t)
        print(f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}, {os.cpu_count()} cpus")
        floor_med = statistics.median(times["numpy"])
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{name:6s} {med * 1e3:8.1f} ms  ({min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f})  "
                  f"{tokens / med / 1e6:7.1f} Mtok/s  {floor_med / med:5.2f}x the numpy floor")
    finally:
        if a.dir is None:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
