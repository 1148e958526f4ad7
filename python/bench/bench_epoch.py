"""One shuffled training epoch from Python: lodt.Dataset against the numpy
gather floor and Hugging Face ``datasets``, mini-batches of 32 and of 256
documents, in one run.

    python python/bench/bench_epoch.py [--batches 1150] [--reps 5] [--batch-sizes 32,256] [--dir DIR]

Data (``bench_dataset.py``'s generator, from a seed): ``--batches`` batches of
4-9 documents of 5-16 sentences of 10-51 tokens; per token an int64 token id
and a float32 embedding row of 64. 1,150 batches: about 7,400 documents,
600 MB per copy. Every system delivers, per mini-batch of documents, the
token ids (flat, int64), the embeddings (flat rows, float32 [tokens, 64]) and
the sentence lengths, as numpy arrays:

  lodt   ``lodt.Dataset(shuffle=True)``: a lodt dataset (128 MiB shards; the
         tensors ``tokens`` [tokens, 1] and ``emb`` [tokens, 64] with the LoD
         documents -> sentences -> tokens); each batch's tensors as numpy
         arrays (``np.asarray``: no copy of the gathered batch)
  numpy  the floor: the same mini-batches (the order lodt delivered, recorded
         first) gathered with numpy fancy indexing from memory-mapped flat
         arrays (``tokens.npy``, ``emb.npy``) and offset arrays
  hf     Hugging Face ``datasets`` (Arrow format, saved to disk, memory-mapped):
         one row per document (``tokens`` list<int64>, ``sent_lens``
         list<int32>, ``emb`` list<fixed_size_list<float32, 64>>),
         ``shuffle(seed)``, ``iter(batch_size)`` with the Arrow format, each
         batch's columns flattened to numpy arrays

Each system is opened once per mini-batch size, before the clock, as a
training loop opens its data once and runs epoch after epoch: the lodt
``Dataset`` (its shard maps), the numpy memory maps, the HF dataset
(``load_from_disk``); what an epoch does (for HF: ``shuffle`` too) is timed.
``--fresh`` opens each system inside every timed epoch instead (maps faulted
in again, every batch checked again on first read). Page cache warm (every
file read once first); runs interleaved across systems (the first system
rotates from one repetition to the next); each figure is the median of
``--reps`` runs, with the range. Each run returns a checksum (token ids and
first embedding values, exact in float64), which must agree across systems.
The load average is printed at the start and at the end: on a busy machine,
compare ratios within one run only. OpenBLAS runs one thread (no BLAS call
is made; its spinning threads would only take a core from the systems).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import lodt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dataset import DIM, ROOT, Sum, files, warm, write_lodt  # noqa: E402


def flat_arrays(ds_path, out):
    """The dataset as flat arrays (dataset order): tokens, emb, and offsets of
    documents in sentences and of sentences in tokens."""
    ds = lodt.Dataset(ds_path)
    toks, embs, doc_lens, sent_lens = [], [], [], []
    for shard in ds.shards:
        for batch in lodt.open(os.path.join(ds_path, shard["name"])):
            top, sent = batch["tokens"].lod()
            doc_lens.append(np.diff(np.asarray(top, dtype=np.int64)))
            sent_lens.append(np.diff(np.asarray(sent, dtype=np.int64)))
            toks.append(np.asarray(batch["tokens"]).reshape(-1))
            embs.append(np.asarray(batch["emb"]))
    np.save(os.path.join(out, "tokens.npy"), np.concatenate(toks))
    np.save(os.path.join(out, "emb.npy"), np.concatenate(embs))
    np.save(os.path.join(out, "doc_sents.npy"), np.concatenate([[0], np.cumsum(np.concatenate(doc_lens))]))
    np.save(os.path.join(out, "sent_tokens.npy"), np.concatenate([[0], np.cumsum(np.concatenate(sent_lens))]))


def write_hf(np_dir, out):
    import datasets
    import pyarrow as pa

    tokens = np.load(os.path.join(np_dir, "tokens.npy"), mmap_mode="r")
    emb = np.load(os.path.join(np_dir, "emb.npy"), mmap_mode="r")
    doc_sents = np.load(os.path.join(np_dir, "doc_sents.npy"))
    sent_tokens = np.load(os.path.join(np_dir, "sent_tokens.npy"))
    doc_tok = sent_tokens[doc_sents]
    tables = []
    step = 1000
    for d0 in range(0, len(doc_sents) - 1, step):
        d1 = min(d0 + step, len(doc_sents) - 1)
        t0, t1 = int(doc_tok[d0]), int(doc_tok[d1])
        s0, s1 = int(doc_sents[d0]), int(doc_sents[d1])
        tok_off = pa.array((doc_tok[d0 : d1 + 1] - t0).astype(np.int32))
        sent_off = pa.array((doc_sents[d0 : d1 + 1] - s0).astype(np.int32))
        rows = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(emb[t0:t1]).reshape(-1)), DIM)
        tables.append(pa.table({
            "tokens": pa.ListArray.from_arrays(tok_off, pa.array(np.ascontiguousarray(tokens[t0:t1]))),
            "sent_lens": pa.ListArray.from_arrays(sent_off, pa.array(np.diff(sent_tokens[s0 : s1 + 1]).astype(np.int32))),
            "emb": pa.ListArray.from_arrays(tok_off, rows),
        }))
    datasets.Dataset(pa.concat_tables(tables)).save_to_disk(out)


# ---------------------------------------------------------------- the epochs


def lodt_open(path, n, seed, batch):
    return lodt.Dataset(path, batch_size=batch, shuffle=True, seed=seed, shuffle_buffer=n)


def lodt_epoch(ds):
    s = Sum()
    for b in ds:
        tokens = np.asarray(b["tokens"])
        emb = np.asarray(b["emb"])
        _, sent = b["tokens"].lod()
        s.add(tokens, emb, b.num_rows)
    return s.value()


def lodt_order(path, n, seed, batch):
    ds = lodt.Dataset(path, batch_size=batch, shuffle=True, seed=seed, shuffle_buffer=n, return_ids=True)
    return [ids for ids, _ in ds]


class NumpyFloor:
    def __init__(self, d):
        self.tokens = np.load(os.path.join(d, "tokens.npy"), mmap_mode="r")
        self.emb = np.load(os.path.join(d, "emb.npy"), mmap_mode="r")
        self.doc_sents = np.load(os.path.join(d, "doc_sents.npy"))
        self.sent_tokens = np.load(os.path.join(d, "sent_tokens.npy"))

    @staticmethod
    def ranges(starts, lengths):
        """The indices of ranges ``starts[i] .. starts[i] + lengths[i]``, concatenated."""
        total = int(lengths.sum())
        shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        return shift + np.arange(total)

    def epoch(self, order):
        s = Sum()
        for ids in order:
            sent = self.ranges(self.doc_sents[ids], self.doc_sents[ids + 1] - self.doc_sents[ids])
            lens = self.sent_tokens[sent + 1] - self.sent_tokens[sent]
            rows = self.ranges(self.sent_tokens[sent], lens)
            tokens = self.tokens[rows]
            emb = self.emb[rows]
            s.add(tokens, emb, len(ids))
        return s.value()


def hf_open(path):
    import datasets

    return datasets.load_from_disk(path)


def hf_epoch(ds, seed, batch):
    ds = ds.shuffle(seed=seed).with_format("arrow")
    s = Sum()
    for t in ds.iter(batch_size=batch):
        tokens = t.column("tokens").combine_chunks().flatten().to_numpy()
        emb = t.column("emb").combine_chunks().flatten().flatten().to_numpy().reshape(-1, DIM)
        _lens = t.column("sent_lens").combine_chunks().flatten().to_numpy()
        s.add(tokens, emb, t.num_rows)
    return s.value()


def load():
    return f"{os.getloadavg()[0]:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=1150)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--batch-sizes", default="32,256")
    ap.add_argument("--systems", default="lodt,numpy,hf")
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench-epoch"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="open every system inside each timed epoch")
    a = ap.parse_args()
    paths = {s: os.path.join(a.dir, s) for s in ("lodt", "numpy", "hf")}
    systems = [s for s in a.systems.split(",") if s]
    try:
        if not os.path.exists(os.path.join(paths["lodt"], "lodt-dataset.json")):
            shutil.rmtree(a.dir, ignore_errors=True)
            os.makedirs(paths["numpy"])
            print(f"lodt: {write_lodt(paths['lodt'], a.batches, a.seed)}", flush=True)
            flat_arrays(paths["lodt"], paths["numpy"])
            if "hf" in systems:
                write_hf(paths["numpy"], paths["hf"])
        n = len(lodt.Dataset(paths["lodt"]))
        sizes = {s: sum(os.path.getsize(f) for f in files(p)) for s, p in paths.items() if os.path.exists(p)}
        print("sizes: " + ", ".join(f"{s} {v / 1e6:.0f} MB" for s, v in sizes.items()), flush=True)
        versions = f"lodt {lodt.__version__}, numpy {np.__version__}"
        if "hf" in systems:
            versions += f", datasets {__import__('datasets').__version__}"
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"{versions}; {n} documents; median of {a.reps}; "
              f"{'each system opened in every epoch' if a.fresh else 'each system opened once, before the clock'}; "
              f"load {load()} at the start", flush=True)
        rows = []
        for batch in [int(b) for b in a.batch_sizes.split(",")]:
            warm([p for p in paths.values() if os.path.exists(p)])
            order = lodt_order(paths["lodt"], n, a.seed, batch)
            opens = {
                "lodt": lambda: lodt_open(paths["lodt"], n, a.seed, batch),
                "numpy": lambda: NumpyFloor(paths["numpy"]),
                "hf": lambda: hf_open(paths["hf"]),
            }
            epochs = {
                "lodt": lodt_epoch,
                "numpy": lambda floor: floor.epoch(order),
                "hf": lambda ds: hf_epoch(ds, a.seed, batch),
            }
            opened = {} if a.fresh else {s: opens[s]() for s in systems}
            times = {s: [] for s in systems}
            sums = {}
            for rep in range(a.reps):
                for k in range(len(systems)):
                    s = systems[(rep + k) % len(systems)]
                    gc.collect()
                    t = time.perf_counter()
                    v = epochs[s](opens[s]() if a.fresh else opened[s])
                    times[s].append(time.perf_counter() - t)
                    sums.setdefault(s, v)
            if len({v for v in sums.values()}) != 1:
                sys.exit(f"batch {batch}: checksums differ: {sums}")
            med = {s: statistics.median(t) for s, t in times.items()}
            rng = {s: (min(t), max(t)) for s, t in times.items()}
            rows.append((batch, med, rng))
            print(f"batch {batch}: " + ", ".join(f"{s} {med[s]:.3f} s [{rng[s][0]:.3f}-{rng[s][1]:.3f}]" for s in systems)
                  + f"; load {load()}", flush=True)
        print()
        print("| mini-batch | " + " | ".join(systems) + " | lodt / numpy floor | " + ("hf / lodt |" if "hf" in systems else ""))
        print("|---|" + "---:|" * len(systems) + "---:|" + ("---:|" if "hf" in systems else ""))
        for batch, med, rng in rows:
            cells = " | ".join(f"{med[s]:.3f} s ({rng[s][0]:.3f}-{rng[s][1]:.3f})" for s in systems)
            ratio = f"{med['lodt'] / med['numpy']:.2f}×" if "numpy" in med and "lodt" in med else ""
            hf = f" {med['hf'] / med['lodt']:.2f}× |" if "hf" in med and "lodt" in med else ""
            print(f"| {batch} | {cells} | {ratio} |{hf}")
        if len(rows) == 2:
            (b0, m0, _), (b1, m1, _) = rows
            print(f"\nepoch time (the same bytes), batches of {b1} / of {b0}: "
                  + ", ".join(f"{s} {m1[s] / m0[s]:.2f}×" for s in systems))
        print(f"load {load()} at the end")
    finally:
        if not a.keep:
            shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
