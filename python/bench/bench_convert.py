"""Converting about 1 GB of tokens into a lodt dataset: ``lodt convert``
against the source format's own library reading the same data plus lodt's
Python writer writing it (issue 48).

    python python/bench/bench_convert.py [--tokens 250000000] [--reps 3]
        [--dir /work/benchdata] [--lodt target/release/lodt]
        [--layouts megatron,hf,parquet,mds] [--keep]

Needs numpy, pyarrow, the lodt wheel, and per layout its own library:
megatron-core (and torch) for Megatron, ``datasets`` for Hugging Face,
``mosaicml-streaming`` for MDS (a layout whose library does not import is
skipped with a line saying so). MDS's phases run under ``--mds-python``
(default: this interpreter), for a venv of its own: mosaicml-streaming pins
older ``huggingface-hub``/numpy than ``datasets`` 5 wants.

Data (seeded): ``--tokens`` int32 tokens (250 M: 1 GB) in documents of
lognormal lengths (median 400, sigma 1) clipped to 20-4,000 tokens, ids
log-uniform over a 50,257-token vocabulary (density ~ 1/id: Zipf-like).
Each source layout is written by its own library, with one column
``tokens``:

  megatron  megatron-core ``IndexedDatasetBuilder``: ``add_document(doc,
            [len])`` per document (what ``preprocess_data.py`` does without
            sentence splitting), ``finalize``: PREFIX.bin + PREFIX.idx
  hf        ``datasets.Dataset`` of one ``List(Value("int32"))`` column,
            ``save_to_disk(max_shard_size="256MB")``
  parquet   pyarrow ``pq.write_table`` of 8 shards (``part-0000K.parquet``),
            row groups of 8,192 documents, pyarrow's defaults otherwise
            (snappy, dictionary)
  mds       mosaicml-streaming ``MDSWriter(columns={"tokens":
            "ndarray:int32"})``, no compression, its default shard size

Timed per layout, interleaved (a, b, a, b, ...), ``--reps`` times each:

  (a) lodt      ``lodt convert SRC DST`` (the CLI, ``--lodt``) into a new
                lodt dataset directory: the wall time of the process
  (b) baseline  in a process of its own, timed from before the source is
                opened to after the lodt writer is closed (imports not
                counted): the source library reads every document, and
                ``lodt.DatasetWriter`` (the same default shard size, 256
                MiB, and fsync as the CLI) writes them as one 1-level
                ``tokens`` tensor:
      megatron  ``IndexedDataset(prefix, mmap=True)``, contiguous slices
                ``ds[i:j]`` of ~16 MiB of documents (its documented slice
                read: one read, split per document), the documents
                concatenated into a batch
      hf        ``load_from_disk(src).with_format("arrow").iter(batch_size=K)``
                (K documents ~ 16 MiB; arrow is the format with no
                conversion), each table's record batches written as they are
      parquet   ``pyarrow.dataset.dataset(src).to_batches()`` (pyarrow's
                threaded scanner), each record batch written as it is
      mds       ``StreamingDataset(local=src, shuffle=False)``, every sample
                ``d[i]`` in order (its map-style access: iterating it
                instead starts worker threads, ~3 s more on a small set),
                the samples' arrays concatenated into ~16 MiB batches

Before every timed run the source files' pages are dropped from the page
cache with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (after a ``sync``; no root
needed) and the destination removed, so every run reads its source from the
disk (``fincore`` reports what stayed). After every run, outside the timing,
the lodt dataset written is read back: its document count, token count, sum
of tokens (mod 2^64) and CRC32 of the document lengths must equal the
source's (computed when it was made), or the script stops.

The data goes in ``--dir`` (default /work/benchdata) and is deleted at the
end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import zlib

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VOCAB = 50257
SEED = 48
BATCH_TOKENS = 4 << 20  # 16 MiB of int32 tokens per baseline batch
LAYOUTS = ["megatron", "hf", "parquet", "mds"]


# ---------------------------------------------------------------- the data


def make_tokens(n_tokens: int):
    import numpy as np

    rng = np.random.default_rng(SEED)
    lengths = []
    total = 0
    while total < n_tokens:
        ls = np.clip(rng.lognormal(np.log(400.0), 1.0, 100_000), 20, 4000).astype(np.int64)
        cs = np.cumsum(ls) + total
        k = int(np.searchsorted(cs, n_tokens, side="left")) + 1
        ls = ls[:k]
        lengths.append(ls)
        total += int(ls.sum())
    lengths = np.concatenate(lengths)
    values = np.empty(int(lengths.sum()), dtype=np.int32)
    step = 1 << 24
    for s in range(0, len(values), step):
        u = rng.random(min(step, len(values) - s), dtype=np.float32)
        ids = np.power(np.float32(VOCAB), u) - np.float32(1.0)
        values[s : s + len(u)] = np.minimum(ids, VOCAB - 1).astype(np.int32)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return values, lengths, offsets


def checksums(values, lengths) -> dict:
    import numpy as np

    return {
        "documents": int(len(lengths)),
        "tokens": int(len(values)),
        "sum": int(values.sum(dtype=np.uint64)),
        "lengths_crc32": zlib.crc32(np.ascontiguousarray(lengths, dtype=np.int64).tobytes()),
    }


def gen(layout: str, path: str, n_tokens: int) -> dict:
    import numpy as np

    values, lengths, offsets = make_tokens(n_tokens)
    n = len(lengths)
    if layout == "megatron":
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    t0 = time.perf_counter()
    if layout == "megatron":

        os.makedirs(path)
        prefix = os.path.join(path, "corpus_text_document")
        b = IndexedDatasetBuilder(prefix + ".bin", dtype=np.int32)
        for i in range(n):
            # A numpy array, not a torch tensor: the builder's
            # numpy.array(tensor, dtype) takes ~4 ms a document from a torch
            # tensor, and the bytes written are the same.
            b.add_document(values[offsets[i] : offsets[i + 1]], [int(lengths[i])])
        b.finalize(prefix + ".idx")
    elif layout == "hf":
        import datasets
        import pyarrow as pa

        col = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))
        feats = datasets.Features({"tokens": datasets.List(datasets.Value("int32"))})
        d = datasets.Dataset(datasets.table.InMemoryTable(pa.table({"tokens": col})), info=datasets.DatasetInfo(features=feats))
        d.save_to_disk(path, max_shard_size="256MB")
    elif layout == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        os.makedirs(path)
        shards = 8
        bounds = np.linspace(0, n, shards + 1).astype(np.int64)
        for k in range(shards):
            a, z = int(bounds[k]), int(bounds[k + 1])
            off = (offsets[a : z + 1] - offsets[a]).astype(np.int32)
            col = pa.ListArray.from_arrays(pa.array(off), pa.array(values[offsets[a] : offsets[z]]))
            pq.write_table(pa.table({"tokens": col}), os.path.join(path, f"part-{k:05d}.parquet"), row_group_size=8192)
    elif layout == "mds":
        from streaming import MDSWriter

        with MDSWriter(out=path, columns={"tokens": "ndarray:int32"}, compression=None) as w:
            for i in range(n):
                w.write({"tokens": values[offsets[i] : offsets[i + 1]]})
    else:
        raise ValueError(layout)
    made = time.perf_counter() - t0
    out = checksums(values, lengths)
    out["write_s"] = made
    return out


# ------------------------------------------------------------ the baseline


def baseline(layout: str, src: str, dst: str) -> dict:
    import numpy as np
    import pyarrow as pa

    import lodt

    if layout == "megatron":
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    elif layout == "hf":
        import datasets
    elif layout == "parquet":
        import pyarrow.dataset as pads
    elif layout == "mds":
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()

    def batch_of(values, lengths):
        off = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=off[1:])
        arr = pa.LargeListArray.from_arrays(pa.array(off), pa.array(values))
        return {"tokens": lodt.LodTensor.from_arrow(arr)}

    t0 = time.perf_counter()
    w = lodt.DatasetWriter(dst)
    if layout == "megatron":
        ds = IndexedDataset(os.path.join(src, "corpus_text_document"), mmap=True)
        lens = np.asarray(ds.sequence_lengths, dtype=np.int64)
        cs = np.cumsum(lens)
        i = 0
        while i < len(ds):
            base = cs[i - 1] if i else 0
            j = max(i + 1, int(np.searchsorted(cs, base + BATCH_TOKENS, side="right")))
            seqs = ds[i:j]
            w.write(batch_of(np.concatenate(seqs), lens[i:j]))
            i = j
    elif layout == "hf":
        d = datasets.load_from_disk(src).with_format("arrow")
        k = max(1, BATCH_TOKENS // 600)
        for tbl in d.iter(batch_size=k):
            for rb in tbl.to_batches():
                w.write(lodt.Batch.from_arrow(rb))
    elif layout == "parquet":
        for rb in pads.dataset(src, format="parquet").to_batches():
            w.write(lodt.Batch.from_arrow(rb))
    elif layout == "mds":
        d = StreamingDataset(local=src, shuffle=False, batch_size=1)
        got, lens, n = [], [], 0
        for i in range(len(d)):
            a = d[i]["tokens"]
            got.append(a)
            lens.append(len(a))
            n += len(a)
            if n >= BATCH_TOKENS:
                w.write(batch_of(np.concatenate(got), np.asarray(lens, dtype=np.int64)))
                got, lens, n = [], [], 0
        if got:
            w.write(batch_of(np.concatenate(got), np.asarray(lens, dtype=np.int64)))
    totals = w.close()
    return {"time_s": time.perf_counter() - t0, "lodt": lodt.__file__, "totals": {k: totals[k] for k in ("shards", "batches", "sequences", "bytes")}}


# --------------------------------------------------------------- the check


def check(dst: str) -> dict:
    import numpy as np

    import lodt

    # A fresh directory: its shards are the dataset's, in name order.
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(dst, "*.lodt")))
    assert lodt.Dataset(dst).num_shards == len(names), (dst, names)
    total, docs, crc, tokens = 0, 0, 0, 0
    batches = 0
    for name in names:
        f = lodt.File(os.path.join(dst, name))
        for b in f:
            (t,) = list(b.values())
            arr = t.to_arrow()
            vals = np.asarray(arr.values)
            off = np.asarray(arr.offsets).astype(np.int64)
            total += int(vals.sum(dtype=np.uint64))
            tokens += len(vals)
            docs += len(off) - 1
            crc = zlib.crc32(np.diff(off).tobytes(), crc)
            batches += 1
    return {
        "documents": docs,
        "tokens": tokens,
        "sum": total % (1 << 64),
        "lengths_crc32": crc,
        "shards": len(names),
        "batches": batches,
    }


# ------------------------------------------------------------ the driver


def files_under(path: str) -> list[str]:
    return [p for p in glob.glob(os.path.join(path, "**"), recursive=True) if os.path.isfile(p)]


def du(path: str) -> int:
    return sum(os.path.getsize(p) for p in files_under(path))


def drop_cache(path: str) -> None:
    os.sync()
    for p in files_under(path):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident(path: str) -> int:
    """Bytes of ``path``'s files in the page cache (``fincore``), or -1."""
    try:
        out = subprocess.run(["fincore", "-b", "-n", "-o", "RES", *files_under(path)], capture_output=True, text=True, check=True).stdout
        return sum(int(x) for x in out.split())
    except (OSError, subprocess.CalledProcessError, ValueError):
        return -1


PYTHON = {}  # layout -> interpreter (--mds-python for MDS)


def sub(args: list[str], python: str | None = None) -> dict:
    r = subprocess.run([python or sys.executable, HERE, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{args}: exit {r.returncode}\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def importable(layout: str, python: str) -> str | None:
    mod = {"megatron": "megatron.core.datasets.indexed_dataset", "hf": "datasets", "parquet": "pyarrow.parquet", "mds": "streaming"}[layout]
    r = subprocess.run([python, "-c", f"import {mod}, lodt, pyarrow"], capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=250_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="/work/benchdata")
    ap.add_argument("--lodt", default=os.path.join(ROOT, "target", "release", "lodt"))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--mds-python", default=sys.executable, help="the interpreter with mosaicml-streaming (a venv of its own)")
    ap.add_argument("--reuse", action="store_true", help="keep sources already made in --dir")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("args", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.phase == "gen":
        print(json.dumps(gen(a.args[0], a.args[1], a.tokens)))
        return
    if a.phase == "baseline":
        print(json.dumps(baseline(*a.args)))
        return
    if a.phase == "check":
        print(json.dumps(check(a.args[0])))
        return

    print(f"lodt CLI: {a.lodt}; python: {sys.executable} (MDS: {a.mds_python}); load average at start: {os.getloadavg()}", flush=True)
    os.makedirs(a.dir, exist_ok=True)
    rows = []
    for layout in a.layouts.split(","):
        py = a.mds_python if layout == "mds" else sys.executable
        why = importable(layout, py)
        if why:
            print(f"{layout}: skipped, its library does not import ({why})", flush=True)
            continue
        src = os.path.join(a.dir, f"src-{layout}")
        meta_path = src + ".json"
        if a.reuse and os.path.exists(meta_path):
            want = json.load(open(meta_path))
        else:
            shutil.rmtree(src, ignore_errors=True)
            want = sub(["--phase", "gen", "--tokens", str(a.tokens), layout, src], py)
            json.dump(want, open(meta_path, "w"))
        size = du(src)
        print(f"{layout}: made {size / 1e9:.3f} GB in {want.pop('write_s', 0):.1f} s: {want}", flush=True)
        cli = [a.lodt, "convert", os.path.join(src, "corpus_text_document.idx") if layout == "megatron" else src]
        times = {"lodt": [], "baseline": []}
        for rep in range(a.reps):
            for system in ("lodt", "baseline"):
                dst = os.path.join(a.dir, f"dst-{layout}-{system}")
                shutil.rmtree(dst, ignore_errors=True)
                drop_cache(src)
                cached = resident(src)
                if system == "lodt":
                    t0 = time.perf_counter()
                    r = subprocess.run([*cli, dst], capture_output=True, text=True)
                    dt = time.perf_counter() - t0
                    if r.returncode != 0:
                        raise RuntimeError(f"{cli}: {r.stderr[-3000:]}")
                    extra = [x for x in (r.stdout + r.stderr).splitlines() if x.startswith("wrote")]
                else:
                    out = sub(["--phase", "baseline", layout, src, dst], py)
                    dt = out["time_s"]
                    extra = [out["totals"], out["lodt"]]
                got = sub(["--phase", "check", dst])
                same = all(got[k] == want[k] for k in ("documents", "tokens", "sum", "lengths_crc32"))
                print(
                    f"  {layout} {system} run {rep + 1}: {dt:.2f} s (source in cache before: {cached} B) "
                    f"checksums {'equal' if same else 'DIFFER'}: {got} {extra}",
                    flush=True,
                )
                if not same:
                    sys.exit(f"{layout} {system}: {got} != {want}")
                times[system].append(dt)
                shutil.rmtree(dst, ignore_errors=True)
        tb, ta = statistics.median(times["baseline"]), statistics.median(times["lodt"])
        rows.append((layout, size, tb, ta, tb / ta, times))
        if not a.keep:
            shutil.rmtree(src, ignore_errors=True)
            os.remove(meta_path)

    print(f"\nload average at end: {os.getloadavg()}")
    print(f"| layout | source size | baseline (median of {a.reps}) | lodt convert | ratio (baseline / lodt) | checksums equal |")
    print("|---|---:|---:|---:|---:|---|")
    for layout, size, tb, ta, ratio, times in rows:
        print(f"| {layout} | {size / 1e9:.3f} GB | {tb:.2f} s | {ta:.2f} s | {ratio:.2f}× | yes |")
    for layout, size, tb, ta, ratio, times in rows:
        print(f"{layout}: baseline runs {['%.2f' % t for t in times['baseline']]}, lodt runs {['%.2f' % t for t in times['lodt']]}")
    if not a.keep and not os.listdir(a.dir):
        os.rmdir(a.dir)


if __name__ == "__main__":
    main()
