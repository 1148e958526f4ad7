"""Sharded-dataset benchmark: lodt.Dataset against Lance and MDS
(``mosaicml-streaming``) on the same data, in the same run.

    python python/bench/bench_dataset.py [--batches 2100] [--reps 5] [--dir DIR] [--keep]

Data (issue 12's shape, generated from a seed): ``--batches`` batches of 4-9
documents of 5-16 sentences of 10-51 tokens; per token an int64 token id and
a float32 embedding row of 64 (multiples of 1/8 below 512, so that sums are
exact in float64). 2,100 batches: about 13,400 documents, 1.09 GB per copy.
The unit every system serves is one **document** (a top-level sequence):

  lodt   a lodt dataset (``lodt.write_dataset``, 128 MiB shards): per batch
         ``tokens`` int64 [tokens, 1] with the LoD documents -> sentences ->
         tokens, ``emb`` float32 [tokens, 64] with the same LoD, ``doc`` int64
  lance  a Lance dataset (``pylance``), one row per document: ``doc`` int64,
         ``sent_tokens`` list<int32> (tokens per sentence), ``tokens``
         list<int64>, ``emb`` list<fixed_size_list<float32, 64>>; fragments of
         a ninth of the rows (Lance has no nested ragged tensors: the sentence
         level is a length column)
  mds    an MDS dataset (``streaming.MDSWriter``, 128 MiB shards, no
         compression), one sample per document: ``doc`` int, ``sent_tokens``
         ndarray:int32, ``tokens`` ndarray:int64, ``emb`` ndarray:float32
         ([n, 64], its shape stored with each sample)

Each run opens the dataset afresh and returns a checksum: the sum of every
token id and of the first embedding value of every token it read (float64,
exact); it must be the same for every system, or the script stops.

  random-take  10,000 random documents (seeded, distinct, in random order)
               fetched as numpy arrays with each system's gather call where
               it has one: ``lodt.Dataset.take(ids)``, Lance ``take(ids)``;
               MDS has none (``ds[i]`` in a loop)
  random-each  the same 10,000 one by one: lodt ``ds[i]``, Lance
               ``take([i])``, MDS ``ds[i]``
  epoch        one shuffled full epoch, mini-batches of 32 documents:
               ``lodt.Dataset(shuffle=True, shuffle_buffer=N)`` (a uniform
               permutation; shards and batches shuffled too) iterated in
               this process; MDS ``StreamingDataset(shuffle=True)`` (its
               default py1e shuffle) iterated in this process; Lance: a
               uniform random permutation of the row ids read by ``take`` 32
               rows at a time (Lance has no shuffling loader of its own)

Page cache warm (every file read once before the runs); runs interleaved
across systems; each figure is the median of ``--reps`` runs. Needs the
release wheel of lodt (``maturin build --release -m python/Cargo.toml``),
``pip install pylance mosaicml-streaming``. The data (about 3.3 GB for the
three copies) goes to ``--dir`` (default ``target/bench-dataset``) and is
deleted at the end unless ``--keep``.
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

import numpy as np

import lodt

DIM = 64
SHARD_BYTES = 128 << 20
BATCH = 32
QUERIES = int(os.environ.get("BENCH_QUERIES", 10_000))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------- data


def make_batch(seed, k, first_doc):
    """Batch ``k``: documents ``first_doc..``, as a dict of lodt tensors."""
    rng = np.random.default_rng([seed, k])
    docs = int(rng.integers(4, 10))
    sents = rng.integers(5, 17, docs)
    tokens = rng.integers(10, 52, int(sents.sum()))
    n = int(tokens.sum())
    lod = [sents.tolist(), tokens.tolist()]
    ids = rng.integers(0, 30000, (n, 1), dtype=np.int64)
    emb = rng.integers(0, 4096, (n, DIM), dtype=np.int16).astype(np.float32) / 8
    return {
        "tokens": lodt.create_lod_tensor(ids, lod),
        "emb": lodt.create_lod_tensor(emb, lod),
        "doc": lodt.LodTensor(np.arange(first_doc, first_doc + docs, dtype=np.int64)),
    }


def write_lodt(path, batches, seed):
    def gen():
        first = 0
        for k in range(batches):
            b = make_batch(seed, k, first)
            first += b["doc"].shape()[0]
            yield b

    return lodt.write_dataset(path, gen(), shard_bytes=SHARD_BYTES, fsync=False)


def documents(batch):
    """The documents of a lodt batch: (doc, sent_tokens, tokens, emb) per document."""
    docs = np.asarray(batch["doc"])
    top, sent = batch["tokens"].lod()
    tokens = np.asarray(batch["tokens"]).reshape(-1)
    emb = np.asarray(batch["emb"])
    for d in range(len(docs)):
        s0, s1 = top[d], top[d + 1]
        t0, t1 = sent[s0], sent[s1]
        yield int(docs[d]), np.diff(sent[s0 : s1 + 1]).astype(np.int32), tokens[t0:t1], emb[t0:t1]


def lance_batches(ds):
    import pyarrow as pa

    schema = lance_schema()
    for batch in stored_batches(ds):
        top, sent = batch["tokens"].lod()
        top = np.asarray(top, dtype=np.int64)
        sent = np.asarray(sent, dtype=np.int64)
        doc_tok = sent[top].astype(np.int32)  # token offsets of each document
        sent_tokens = np.diff(sent).astype(np.int32)
        tokens = np.asarray(batch["tokens"]).reshape(-1)
        emb = np.asarray(batch["emb"]).reshape(-1)
        yield pa.record_batch(
            [
                pa.array(np.asarray(batch["doc"])),
                pa.ListArray.from_arrays(pa.array(top.astype(np.int32)), pa.array(sent_tokens)),
                pa.ListArray.from_arrays(pa.array(doc_tok), pa.array(tokens)),
                pa.ListArray.from_arrays(pa.array(doc_tok), pa.FixedSizeListArray.from_arrays(pa.array(emb), DIM)),
            ],
            schema=schema,
        )


def lance_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("doc", pa.int64()),
            ("sent_tokens", pa.list_(pa.int32())),
            ("tokens", pa.list_(pa.int64())),
            ("emb", pa.list_(pa.list_(pa.float32(), DIM))),
        ]
    )


def stored_batches(ds):
    """The stored batches of a lodt dataset, in dataset order (shard files)."""
    for shard in ds.shards:
        yield from lodt.open(os.path.join(ds.path, shard["name"]))


def write_lance(path, ds):
    import lance
    import pyarrow as pa

    reader = pa.RecordBatchReader.from_batches(lance_schema(), lance_batches(ds))
    per_file = -(-len(ds) // 9)
    lance.write_dataset(reader, path, max_rows_per_file=per_file, max_bytes_per_file=SHARD_BYTES * 2)


def write_mds(path, ds):
    from streaming import MDSWriter

    columns = {"doc": "int", "sent_tokens": "ndarray:int32", "tokens": "ndarray:int64", "emb": "ndarray:float32"}
    with MDSWriter(out=path, columns=columns, size_limit=SHARD_BYTES, compression=None) as w:
        for batch in stored_batches(ds):
            for doc, sent_tokens, tokens, emb in documents(batch):
                w.write({"doc": doc, "sent_tokens": sent_tokens, "tokens": np.ascontiguousarray(tokens), "emb": np.ascontiguousarray(emb)})


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def files(path):
    return [os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs]


def warm(paths):
    for p in paths:
        for f in files(p):
            with open(f, "rb") as fh:
                while fh.read(1 << 24):
                    pass


# ---------------------------------------------------------------- work


class Sum:
    """The checksum: token ids and first embedding values, exact in float64."""

    def __init__(self):
        self.tokens = 0
        self.emb = 0.0
        self.docs = 0

    def add(self, tokens, emb, docs=1):
        self.tokens += int(np.asarray(tokens, dtype=np.int64).sum())
        emb = np.asarray(emb)
        self.emb += float(emb.reshape(-1, DIM)[:, 0].sum(dtype=np.float64))
        self.docs += docs

    def value(self):
        return (self.docs, self.tokens, self.emb)


def lodt_random_take(d, ids):
    ds = lodt.Dataset(d)
    s = Sum()
    b = ds.take(ids)
    s.add(b["tokens"], b["emb"], len(ids))
    return s.value()


def lodt_random_each(d, ids):
    ds = lodt.Dataset(d)
    s = Sum()
    for i in ids:
        b = ds[i]
        s.add(b["tokens"], b["emb"])
    return s.value()


def lodt_epoch(d, n, seed):
    ds = lodt.Dataset(d, batch_size=BATCH, shuffle=True, seed=seed, shuffle_buffer=n)
    s = Sum()
    for b in ds:
        s.add(b["tokens"], b["emb"], b.num_rows)
    return s.value()


def lance_add(s, table):
    tokens = table.column("tokens").combine_chunks()
    emb = table.column("emb").combine_chunks()
    s.add(tokens.values.to_numpy(), emb.values.values.to_numpy(), table.num_rows)


def lance_random_take(d, ids):
    import lance

    ds = lance.dataset(d)
    s = Sum()
    lance_add(s, ds.take(ids, columns=["tokens", "emb"]))
    return s.value()


def lance_random_each(d, ids):
    import lance

    ds = lance.dataset(d)
    s = Sum()
    for i in ids:
        lance_add(s, ds.take([i], columns=["tokens", "emb"]))
    return s.value()


def lance_epoch(d, n, seed):
    import lance

    ds = lance.dataset(d)
    order = np.random.default_rng(seed).permutation(n)
    s = Sum()
    for k in range(0, n, BATCH):
        lance_add(s, ds.take(order[k : k + BATCH], columns=["tokens", "emb"]))
    return s.value()


def mds_open(d, **kw):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    return StreamingDataset(local=d, batch_size=BATCH, **kw)


def mds_random(d, ids):
    ds = mds_open(d)
    s = Sum()
    for i in ids:
        x = ds[int(i)]
        s.add(x["tokens"], x["emb"])
    del ds
    gc.collect()
    return s.value()


def mds_epoch(d, n, seed):
    ds = mds_open(d, shuffle=True, shuffle_seed=seed)
    s = Sum()
    for x in ds:
        s.add(x["tokens"], x["emb"])
    del ds
    gc.collect()
    return s.value()


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=2100)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench-dataset"))
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--tasks", default="random-take,random-each,epoch")
    args = ap.parse_args()

    os.makedirs(args.dir, exist_ok=True)
    paths = {s: os.path.join(args.dir, s) for s in ("lodt", "lance", "mds")}
    try:
        if not os.path.exists(os.path.join(paths["lodt"], "lodt-dataset.json")):
            shutil.rmtree(args.dir)
            os.makedirs(args.dir)
            t = time.perf_counter()
            totals = write_lodt(paths["lodt"], args.batches, args.seed)
            print(f"lodt: {totals} in {time.perf_counter() - t:.1f} s", flush=True)
            ds = lodt.Dataset(paths["lodt"])
            t = time.perf_counter()
            write_lance(paths["lance"], ds)
            print(f"lance: written in {time.perf_counter() - t:.1f} s", flush=True)
            t = time.perf_counter()
            write_mds(paths["mds"], ds)
            print(f"mds: written in {time.perf_counter() - t:.1f} s", flush=True)
        ds = lodt.Dataset(paths["lodt"])
        n = len(ds)
        import lance

        shards = {
            "lodt": ds.num_shards,
            "lance": len(lance.dataset(paths["lance"]).get_fragments()),
            "mds": sum(1 for f in os.listdir(paths["mds"]) if f.endswith(".mds")),
        }
        sizes = {s: du(p) for s, p in paths.items()}
        for s in paths:
            print(f"{s}: {sizes[s] / 1e9:.2f} GB in {shards[s]} shards", flush=True)
        if sizes["lodt"] < 1 << 30 or shards["lodt"] < 8:
            print("note: below the issue's scale (>= 1 GiB in >= 8 shards): a trial run", flush=True)
        ids = np.random.default_rng(args.seed + 1).choice(n, QUERIES, replace=False).astype(np.int64).tolist()
        warm(paths.values())

        work = {
            "random-take": {
                "lodt": lambda: lodt_random_take(paths["lodt"], ids),
                "lance": lambda: lance_random_take(paths["lance"], ids),
                "mds": lambda: mds_random(paths["mds"], ids),
            },
            "random-each": {
                "lodt": lambda: lodt_random_each(paths["lodt"], ids),
                "lance": lambda: lance_random_each(paths["lance"], ids),
                "mds": lambda: mds_random(paths["mds"], ids),
            },
            "epoch": {
                "lodt": lambda: lodt_epoch(paths["lodt"], n, args.seed),
                "lance": lambda: lance_epoch(paths["lance"], n, args.seed),
                "mds": lambda: mds_epoch(paths["mds"], n, args.seed),
            },
        }
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"lodt {lodt.__version__}, pylance {lance.__version__}, "
              f"mosaicml-streaming {__import__('streaming').__version__}; {n} documents; "
              f"median of {args.reps}", flush=True)
        rows = []
        for task in args.tasks.split(","):
            times = {s: [] for s in work[task]}
            sums = {}
            for _ in range(args.reps):
                for system, fn in work[task].items():
                    gc.collect()
                    t = time.perf_counter()
                    value = fn()
                    times[system].append(time.perf_counter() - t)
                    if sums.setdefault(system, value) != value:
                        sys.exit(f"{task}/{system}: checksum changed between runs: {sums[system]} vs {value}")
            if len(set(sums.values())) != 1:
                sys.exit(f"{task}: checksums differ: {sums}")
            med = {s: statistics.median(t) for s, t in times.items()}
            rows.append((task, med, sums["lodt"]))
            print(f"{task}: " + ", ".join(f"{s} {m:.3f} s" for s, m in med.items())
                  + f"  (checksum {sums['lodt']})", flush=True)
        print()
        print("| task | lodt | Lance | MDS | Lance / lodt | MDS / lodt |")
        print("|------|------|-------|-----|--------------|------------|")
        for task, med, _ in rows:
            print(f"| {task} | {med['lodt']:.3f} s | {med['lance']:.3f} s | {med['mds']:.3f} s "
                  f"| {med['lance'] / med['lodt']:.1f}x | {med['mds'] / med['lodt']:.1f}x |")
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
