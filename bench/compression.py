"""File size and full-scan read speed of compressed lodt files against
Parquet and MDS, on the same data, in one run.

    python bench/compression.py [--tokens 16000000] [--emb-tokens 1000000] [--reps 5] [--dir DIR] [--no-s3]

Data (generated from a seed): token ids drawn from a Zipf-Mandelbrot law
over a 50,257-token vocabulary (frequent tokens get small ids, as a BPE
vocabulary orders them; the draws are independent, so this is a lower bound
of what real text compresses to), in documents of paragraphs of sentences of
8-40 tokens; and float32 embeddings of 64 per token. Four datasets:

  ids32-1   int32 ids, 1 LoD level (documents -> tokens)
  ids64-2   int64 ids, 2 levels (documents -> sentences -> tokens)
  ids32-3   int32 ids, 3 levels (documents -> paragraphs -> sentences -> tokens)
  emb-1     float32 [tokens, 64], 1 level (documents -> tokens)

Systems, each writing every dataset:

  lodt 1.0       format 1.0 (no compression), batches of 256 documents
  lodt none/lz4/zstd
                 format 2.0 with that compression (zstd at the writer's
                 default level), the same batches
  parquet zstd/snappy
                 pyarrow, one row per document (the levels as nested lists),
                 row groups of 4,096 documents, pyarrow's defaults otherwise
                 (dictionary encoding on; zstd at its default level)
  mds zstd       mosaicml-streaming's MDSWriter, one sample per document (the
                 values and each level's lengths as ndarray columns),
                 compression ``zstd``, 64 MiB shards

Measured: the bytes on disk; a full scan with the page cache warm (every
value delivered as numpy arrays, summed into a checksum that must agree
across systems; MDS: its local decompressed cache is deleted before each
run, so each run decompresses as a first epoch does); and, unless
``--no-s3``, a full scan from moto's S3 server on 127.0.0.1 through a
counting proxy: the bytes fetched and the time (the server is the
bottleneck there: compare bytes). Runs are interleaved across systems;
each time is the median of ``--reps`` runs. The load average is printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import lodt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

VOCAB = 50_257
DOCS_PER_BATCH = 256
ROW_GROUP_DOCS = 4096
DATASETS = {  # name: (dtype, levels, element width)
    "ids32-1": (np.int32, 1, None),
    "ids64-2": (np.int64, 2, None),
    "ids32-3": (np.int32, 3, None),
    "emb-1": (np.float32, 1, 64),
}
LODT = [("lodt 1.0", "1.0", "none"), ("lodt none", "2.0", "none"), ("lodt lz4", "2.0", "lz4"), ("lodt zstd", "2.0", "zstd")]
PARQUET = [("parquet zstd", "zstd"), ("parquet snappy", "snappy")]


def zipf_ids(rng, n):
    ranks = np.arange(1, VOCAB + 1, dtype=np.float64)
    p = 1.0 / (ranks + 2.7)
    p /= p.sum()
    return rng.choice(VOCAB, size=n, p=p)


def structure(rng, tokens):
    """Sentence lengths (8-40), paragraphs of 2-8 sentences, documents of
    2-10 paragraphs, until ``tokens`` tokens: the offsets of each level."""
    sent = []
    total = 0
    while total < tokens:
        n = int(rng.integers(8, 41))
        sent.append(n)
        total += n
    sent = np.array(sent, dtype=np.int64)
    para = _groups(rng, len(sent), 2, 9)
    doc = _groups(rng, len(para) - 1, 2, 11)
    return doc, para, np.concatenate([[0], np.cumsum(sent)])


def _groups(rng, n, lo, hi):
    out = [0]
    while out[-1] < n:
        out.append(min(n, out[-1] + int(rng.integers(lo, hi))))
    return np.array(out, dtype=np.int64)


def make(name, tokens, seed=7):
    """The dataset: values and the offsets of each level (top first), each
    level's offsets into the next level (the last into rows)."""
    dtype, levels, width = DATASETS[name]
    rng = np.random.default_rng(seed)
    doc, para, sent = structure(rng, tokens)
    rows = int(sent[-1])
    if width is None:
        values = zipf_ids(rng, rows).astype(dtype)
    else:
        values = rng.standard_normal((rows, width), dtype=np.float32)
    if levels == 1:
        lod = [sent[para[doc]]]
    elif levels == 2:
        lod = [para[doc], sent]
    else:
        lod = [doc, para, sent]
    return values, lod


def batches(values, lod, docs_per_batch):
    """(values, offsets of each level rebased to the batch) per batch of documents."""
    n = len(lod[0]) - 1
    for d0 in range(0, n, docs_per_batch):
        d1 = min(n, d0 + docs_per_batch)
        levels, lo, hi = [], d0, d1
        for off in lod:
            part = off[lo : hi + 1]
            levels.append(part - part[0])
            lo, hi = int(part[0]), int(part[-1])
        yield values[lo:hi], levels


# ---------------------------------------------------------------- writers


def write_lodt(path, values, lod, version, compression):
    kw = {} if version == "1.0" else {"format_version": version, "compression": compression}
    with lodt.Writer(path, fsync=False, **kw) as w:
        for v, levels in batches(values, lod, DOCS_PER_BATCH):
            w.write({"ids": lodt.LodTensor(v, lod=[lv.tolist() for lv in levels])})


def arrow_table(values, lod, docs):
    flat = pa.array(values.reshape(-1))
    if values.ndim == 2:
        flat = pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
    arr = flat
    for off in reversed(lod):
        arr = pa.LargeListArray.from_arrays(pa.array(off), arr)
    return pa.table({"ids": arr})


def write_parquet(path, values, lod, compression):
    pq.write_table(arrow_table(values, lod, None), path, compression=compression, row_group_size=ROW_GROUP_DOCS)


def write_mds(path, values, lod):
    from streaming import MDSWriter

    cols = {"values": f"ndarray:{values.dtype.name}"}
    cols.update({f"len{k}": "ndarray:int64" for k in range(1, len(lod))})
    with MDSWriter(out=path, columns=cols, compression="zstd", size_limit=64 << 20) as w:
        for v, levels in batches(values, lod, 1):
            sample = {"values": np.ascontiguousarray(v)}
            for k in range(1, len(levels)):
                sample[f"len{k}"] = np.diff(levels[k]).astype(np.int64)
            w.write(sample)


# ---------------------------------------------------------------- readers


def scan_lodt(path, storage_options=None):
    s = 0.0
    with lodt.File(path, storage_options=storage_options) as f:
        for b in f:
            s += float(np.asarray(b["ids"]).sum(dtype=np.float64))
    return s


def scan_parquet(path, filesystem=None):
    import pyarrow.compute as pc

    s = 0.0
    f = pq.ParquetFile(path, filesystem=filesystem) if filesystem else pq.ParquetFile(path)
    for rb in f.iter_batches(columns=["ids"]):
        col = rb.column(0)
        while pa.types.is_large_list(col.type) or pa.types.is_list(col.type):
            col = pc.list_flatten(col)
        if pa.types.is_fixed_size_list(col.type):
            col = col.flatten()
        s += float(col.to_numpy().sum(dtype=np.float64))
    return s


def scan_mds(local, remote=None):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    if remote is None:
        for f in os.listdir(local):
            if f.endswith(".mds"):
                os.remove(os.path.join(local, f))
    ds = StreamingDataset(local=local, remote=remote, shuffle=False, batch_size=1)
    s = 0.0
    for x in ds:
        s += float(x["values"].sum(dtype=np.float64))
    del ds
    return s


def du(path):
    """A file's size, or a directory's (MDS: its shards and index, not the
    decompressed ``.mds`` cache a read leaves)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if not f.endswith(".mds"))


# ---------------------------------------------------------------- S3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3:
    def __init__(self):
        from fault_proxy import FaultProxy

        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1).close()
                break
            except Exception:
                time.sleep(0.1)
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}/bench", method="PUT")).close()
        self.proxy = FaultProxy(self.port)
        self.endpoint = self.proxy.endpoint
        self.options = {
            "aws_endpoint": self.endpoint,
            "aws_allow_http": "true",
            "aws_access_key_id": "test",
            "aws_secret_access_key": "test",
            "aws_region": "us-east-1",
        }
        os.environ.update(
            AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION="us-east-1", S3_ENDPOINT_URL=self.endpoint
        )

    def upload(self, local, key):
        import boto3

        c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.port}")
        if os.path.isdir(local):
            for f in os.listdir(local):
                if not f.endswith(".mds"):
                    c.upload_file(os.path.join(local, f), "bench", f"{key}/{f}")
        else:
            c.upload_file(local, "bench", key)

    def pyarrow_fs(self):
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key="test", secret_key="test", region="us-east-1", scheme="http", endpoint_override=f"127.0.0.1:{self.proxy.port}"
        )

    def fetched(self, fn):
        before = self.proxy.bytes_sent()
        t = time.perf_counter()
        check = fn()
        return time.perf_counter() - t, self.proxy.bytes_sent() - before, check

    def close(self):
        self.proxy.close()
        self.proc.kill()
        self.proc.wait()


# ---------------------------------------------------------------- main


def timed(fn):
    t = time.perf_counter()
    check = fn()
    return time.perf_counter() - t, check


def warm(path):
    for p in [path] if os.path.isfile(path) else [os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs]:
        with open(p, "rb") as fh:
            while fh.read(1 << 24):
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=16_000_000)
    ap.add_argument("--emb-tokens", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join(HERE, "..", "target", "compression-data"))
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--systems", default="", help="only the systems whose names start with one of these (comma-separated)")
    ap.add_argument("--no-mds", action="store_true")
    ap.add_argument("--no-s3", action="store_true")
    args = ap.parse_args()
    root = os.path.abspath(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    print(f"# lodt {lodt.__version__}, pyarrow {pa.__version__}, {platform.machine()}, load {os.getloadavg()}")
    wanted = [w for w in args.systems.split(",") if w]

    def want(label):
        return not wanted or any(label.startswith(w) for w in wanted)

    s3 = None if args.no_s3 else S3()
    results = {}
    try:
        for name in args.datasets.split(","):
            tokens = args.emb_tokens if name.startswith("emb") else args.tokens
            values, lod = make(name, tokens)
            raw = values.nbytes
            systems = {}
            for label, version, comp in LODT:
                if not want(label):
                    continue
                p = os.path.join(root, f"{name}-{label.replace(' ', '-')}.lodt")
                write_lodt(p, values, lod, version, comp)
                systems[label] = (p, lambda p=p: scan_lodt(p), du(p))
            for label, comp in PARQUET:
                if not want(label):
                    continue
                p = os.path.join(root, f"{name}-{label.replace(' ', '-')}.parquet")
                write_parquet(p, values, lod, comp)
                systems[label] = (p, lambda p=p: scan_parquet(p), du(p))
            if not args.no_mds and want("mds zstd"):
                p = os.path.join(root, f"{name}-mds")
                write_mds(p, values, lod)
                systems["mds zstd"] = (p, lambda p=p: scan_mds(p), du(p))
            expect = float(values.sum(dtype=np.float64))
            del values, lod
            for p, _, _ in systems.values():
                warm(p)
            times = {k: [] for k in systems}
            for rep in range(args.reps):
                order = list(systems)
                order = order[rep % len(order) :] + order[: rep % len(order)]
                for k in order:
                    dt, check = timed(systems[k][1])
                    assert abs(check - expect) <= 1e-6 * max(1.0, abs(expect)), (k, check, expect)
                    times[k].append(dt)
            remote = {}
            if s3 is not None:
                for k, (p, _, _) in systems.items():
                    key = f"{name}/{os.path.basename(p)}"
                    s3.upload(p, key)
                    if k.startswith("lodt"):
                        fn = lambda key=key: scan_lodt(f"s3://bench/{key}", storage_options=s3.options)  # noqa: E731
                    elif k.startswith("parquet"):
                        fn = lambda key=key: scan_parquet(f"bench/{key}", filesystem=s3.pyarrow_fs())  # noqa: E731
                    else:
                        cache = os.path.join(root, "mds-cache", name)
                        shutil.rmtree(cache, ignore_errors=True)
                        fn = lambda key=key, cache=cache: scan_mds(cache, remote=f"s3://bench/{key}")  # noqa: E731
                    dt, fetched, check = s3.fetched(fn)
                    assert abs(check - expect) <= 1e-6 * max(1.0, abs(expect)), (k, check, expect)
                    remote[k] = (dt, fetched)
            results[name] = (raw, {k: (v[2], statistics.median(times[k]), remote.get(k)) for k, v in systems.items()})
            report(name, *results[name])
    finally:
        if s3 is not None:
            s3.close()
    print(f"# load at the end {os.getloadavg()}")


def report(name, raw, rows):
    base = rows["lodt 1.0"][1] if "lodt 1.0" in rows else next(iter(rows.values()))[1]
    print(f"\n### {name}: {raw / 2**20:.1f} MiB of values\n")
    print("| system | bytes | of raw | warm scan | scan / first | GB/s of values | S3 bytes fetched | S3 scan |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k, (size, t, remote) in rows.items():
        r = f"{remote[1] / 2**20:.1f} MiB | {remote[0]:.2f} s" if remote else "— | —"
        print(f"| {k} | {size / 2**20:.1f} MiB | {size / raw:.3f} | {t * 1e3:.1f} ms | {t / base:.2f}× | {raw / t / 1e9:.2f} | {r} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
