#!/usr/bin/env python3
"""lodt against its peers on one dataset, warm and cold (see README.md here).

The dataset: batches of documents of sentences of tokens, as in issue 12
(1,000 batches, about 6,400 documents, 67,000 sentences, 2.06M int64 tokens,
float32 embeddings [rows, 64]: about 519 MiB per copy). The same arrays are
written to each system:

  lodt         data.lodt: per batch, `tokens` int64 [rows] and `emb` float32
               [rows, 64], each with the LoD documents -> sentences -> tokens
               (written by `examples/peers.rs` from the .npy files)
  npy          tokens.npy, emb.npy, sent_tokens.npy, doc_sents.npy, read with
               np.load(mmap_mode="r")
  safetensors  data.safetensors: the same four arrays (safe_open, numpy)
  ipc          data.arrow: Arrow IPC file, one record batch per batch, one row
               per sentence (doc int64, tokens list<int64>, emb
               list<fixed_size_list<float32, 64>>), memory-mapped
  parquet      data.parquet: the same table, one row group per batch,
               uncompressed, no dictionary
  lance        data.lance: the same table (pylance)
  hdf5         data.h5: the four arrays, contiguous (h5py)

The work, the same for every system, each run starting by opening the files:

  open-doc  one document (the middle one): its tokens and embeddings
  random    10,000 random sentences (seeded, in random order); beside "npy"
            (numpy fancy indexing of the tokens and of the embedding column
            the checksum reads), "npy-take" gathers their whole rows in one
            call, the fair peer of lodt's gather in one call ("lodt-take")
  scan      every token and every embedding row

Each run returns a checksum (the sum of the token ids and of the first
embedding value of every row read; exact in float64), which must be the same
for every system. "cold": before every run, every file of every system is
dropped from the page cache (posix_fadvise DONTNEED; the data was synced
after it was written). "warm": every file of every system was dropped, then
read (read(), not map touches) before the runs, so that every system's pages
came into the cache the same way. Runs are interleaved across systems; the
figure is the median of --reps runs. `write` and `verify` are lodt against
raw write_all / a CRC32 of the same bytes on every core (and on one) (examples/peers.rs).

Usage: python3 bench/peers.py [--dir DIR] [--batches 1000] [--reps 7]
                              [--systems lodt,npy,...] [--tasks ...] [--modes cold,warm]
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import time

import numpy as np

DIM = 64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- data


def generate(d, batches, queries=10000, seed=12):
    """Writes the arrays (.npy) and the offsets; returns nothing."""
    rng = np.random.default_rng(seed)
    docs_per_batch = rng.integers(4, 10, batches)  # 6.4 on average
    n_docs = int(docs_per_batch.sum())
    sents_per_doc = rng.integers(5, 17, n_docs)  # 10.6
    n_sents = int(sents_per_doc.sum())
    tokens_per_sent = rng.integers(10, 52, n_sents)  # 30.5
    n_tokens = int(tokens_per_sent.sum())
    off = lambda lengths: np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    np.save(os.path.join(d, "batch_docs.npy"), off(docs_per_batch))
    np.save(os.path.join(d, "doc_sents.npy"), off(sents_per_doc))
    np.save(os.path.join(d, "sent_tokens.npy"), off(tokens_per_sent))
    np.save(os.path.join(d, "tokens.npy"), rng.integers(0, 30000, n_tokens, dtype=np.int64))
    emb = np.lib.format.open_memmap(
        os.path.join(d, "emb.npy"), mode="w+", dtype="<f4", shape=(n_tokens, DIM))
    step = 1 << 18
    for start in range(0, n_tokens, step):
        n = min(step, n_tokens - start)
        # Multiples of 1/8 below 512: sums are exact in float64, whatever the order.
        emb[start:start + n] = rng.integers(0, 4096, (n, DIM), dtype=np.int16).astype(np.float32) / 8
    emb.flush()
    del emb
    q = np.random.default_rng(seed + 1).choice(n_sents, min(queries, n_sents), replace=False).astype(np.int64)
    np.save(os.path.join(d, "queries.npy"), q)
    print(f"generated {batches} batches, {n_docs} documents, {n_sents} sentences, "
          f"{n_tokens} tokens", flush=True)


class Data:
    """The offsets and the work's parameters, loaded once (not timed)."""

    def __init__(self, d):
        self.dir = d
        load = lambda n: np.load(os.path.join(d, n))
        self.batch_docs = load("batch_docs.npy")
        self.doc_sents = load("doc_sents.npy")
        self.sent_tokens = load("sent_tokens.npy")
        self.queries = load("queries.npy")
        self.batch_sents = self.doc_sents[self.batch_docs]
        self.doc = (len(self.doc_sents) - 1) // 2
        self.doc_batch = int(np.searchsorted(self.batch_docs, self.doc, "right") - 1)
        self.doc_local = self.doc - int(self.batch_docs[self.doc_batch])
        s0, s1 = int(self.doc_sents[self.doc]), int(self.doc_sents[self.doc + 1])
        self.doc_sentences = (s0, s1)
        qb = np.searchsorted(self.batch_sents, self.queries, "right") - 1
        self.query_batch = qb
        self.query_local = self.queries - self.batch_sents[qb]

    def path(self, name):
        return os.path.join(self.dir, name)


def table_batches(data):
    """The sentence table, as one record batch per dataset batch."""
    import pyarrow as pa
    tokens = np.load(data.path("tokens.npy"), mmap_mode="r")
    emb = np.load(data.path("emb.npy"), mmap_mode="r")
    doc_of_sent = np.repeat(np.arange(len(data.doc_sents) - 1), np.diff(data.doc_sents))
    schema = pa.schema([
        ("doc", pa.int64()),
        ("tokens", pa.list_(pa.int64())),
        ("emb", pa.list_(pa.list_(pa.float32(), DIM))),
    ])
    for k in range(len(data.batch_docs) - 1):
        s0, s1 = int(data.batch_sents[k]), int(data.batch_sents[k + 1])
        t0, t1 = int(data.sent_tokens[s0]), int(data.sent_tokens[s1])
        offsets = pa.array((data.sent_tokens[s0:s1 + 1] - t0).astype(np.int32))
        values = pa.array(np.ascontiguousarray(tokens[t0:t1]))
        flat = pa.array(np.ascontiguousarray(emb[t0:t1]).reshape(-1))
        rows = pa.FixedSizeListArray.from_arrays(flat, DIM)
        yield pa.record_batch([
            pa.array(doc_of_sent[s0:s1]),
            pa.ListArray.from_arrays(offsets, values),
            pa.ListArray.from_arrays(offsets, rows),
        ], schema=schema)


def write_all(data, systems, lodt_bin):
    d = data.dir
    if "lodt" in systems:
        run([lodt_bin, "write-lodt", d])
    if "safetensors" in systems:
        from safetensors.numpy import save_file
        arrays = {n: np.load(data.path(n + ".npy")) for n in
                  ("tokens", "emb", "sent_tokens", "doc_sents")}
        save_file(arrays, data.path("data.safetensors"))
        del arrays
    if "hdf5" in systems:
        import h5py
        with h5py.File(data.path("data.h5"), "w") as f:
            for n in ("tokens", "emb", "sent_tokens", "doc_sents"):
                f.create_dataset(n, data=np.load(data.path(n + ".npy"), mmap_mode="r"))
    if systems & {"ipc", "parquet", "lance"}:
        import pyarrow as pa
        import pyarrow.parquet as pq
        batches = list(table_batches(data))
        schema = batches[0].schema
        if "ipc" in systems:
            with pa.OSFile(data.path("data.arrow"), "wb") as sink:
                with pa.ipc.new_file(sink, schema) as w:
                    for b in batches:
                        w.write_batch(b)
        if "parquet" in systems:
            with pq.ParquetWriter(data.path("data.parquet"), schema, compression="none",
                                  use_dictionary=False) as w:
                for b in batches:
                    w.write_table(pa.Table.from_batches([b]), row_group_size=b.num_rows)
        if "lance" in systems:
            import lance
            import shutil
            shutil.rmtree(data.path("data.lance"), ignore_errors=True)
            lance.write_dataset(pa.Table.from_batches(batches), data.path("data.lance"))
        del batches
    os.sync()


FILES = {
    "lodt": ["data.lodt"],
    "npy": ["tokens.npy", "emb.npy", "sent_tokens.npy", "doc_sents.npy"],
    "safetensors": ["data.safetensors"],
    "ipc": ["data.arrow"],
    "parquet": ["data.parquet"],
    "lance": ["data.lance"],
    "hdf5": ["data.h5"],
}


def files_of(data, system):
    out = []
    for name in FILES[system]:
        p = data.path(name)
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                out.extend(os.path.join(root, n) for n in names)
        elif os.path.exists(p):
            out.append(p)
    return out


def evict(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm(paths):
    buf = bytearray(1 << 20)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout


# ---------------------------------------------------------------- the work


# lodt's ways of reading the random sentences, each run as a system of its
# own in the random task: one by one (zero-copy; "lodt": a tensor per
# sentence), the same loop reading each sentence's rows (Lod::row_range) from
# the bodies ("lodt-rows"), the first after LodtFile::prefetch of them all,
# and gathered in one call (take_level, a copy).
LODT_RANDOM = {"lodt": "random", "lodt-rows": "random-rows", "lodt-prefetch": "random-prefetch",
               "lodt-take": "random-take"}

# numpy's gather of the same sentences' whole rows in one call (fancy indexing
# of both arrays: a copy, like lodt-take), run beside "npy" in the random task.
# "npy" gathers only the embedding column the checksum reads, so it is the
# peer of the loops above, and "npy-take" the fair peer of lodt-take.
NPY_TAKE = "npy-take"


def lodt(task, data, lodt_bin, system="lodt"):
    args = {"open-doc": [str(data.doc_batch), str(data.doc_local)]}.get(task, [])
    if task == "random":
        task = LODT_RANDOM[system]
    out = json.loads(run([lodt_bin, "run", task, data.dir] + args))
    return out["seconds"], out["checksum"]


def consume(tokens, emb_rows):
    """The checksum of some token ids and embedding rows."""
    return float(np.asarray(tokens).sum()) + float(np.asarray(emb_rows)[:, 0].astype(np.float64).sum())


def ranges_index(starts, ends):
    """The concatenation of arange(s, e) for each pair, in order."""
    lengths = ends - starts
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return shift + np.arange(int(lengths.sum()))


def npy(task, data):
    load = lambda n: np.load(data.path(n), mmap_mode="r")
    tokens, emb, st = load("tokens.npy"), load("emb.npy"), load("sent_tokens.npy")
    if task == "open-doc":
        ds = load("doc_sents.npy")
        a, b = int(st[ds[data.doc]]), int(st[ds[data.doc + 1]])
        return consume(tokens[a:b], emb[a:b])
    if task in ("random", "random-take"):
        idx = ranges_index(st[data.queries], st[data.queries + 1])
        if task == "random-take":
            # The whole rows gathered in one call, as lodt-take and Lance's
            # take return them (not only the column the checksum reads).
            return consume(tokens[idx], emb[idx])
        return float(tokens[idx].sum()) + float(emb[idx, 0].astype(np.float64).sum())
    return float(tokens.sum()) + float(emb[:, 0].astype(np.float64).sum())


def safetensors(task, data):
    from safetensors import safe_open
    with safe_open(data.path("data.safetensors"), framework="np") as f:
        if task == "open-doc":
            s0, s1 = f.get_slice("doc_sents")[data.doc:data.doc + 2]
            st = f.get_slice("sent_tokens")
            a, b = int(st[int(s0):int(s0) + 1][0]), int(st[int(s1):int(s1) + 1][0])
            return consume(f.get_slice("tokens")[a:b], f.get_slice("emb")[a:b])
        if task == "random":
            st = f.get_tensor("sent_tokens")
            tok, emb = f.get_slice("tokens"), f.get_slice("emb")
            total = 0.0
            for q in data.queries:
                a, b = int(st[q]), int(st[q + 1])
                total += consume(tok[a:b], emb[a:b])
            return total
        return consume(f.get_tensor("tokens"), f.get_tensor("emb"))


def hdf5(task, data):
    import h5py
    with h5py.File(data.path("data.h5"), "r") as f:
        tokens, emb, st = f["tokens"], f["emb"], f["sent_tokens"]
        if task == "open-doc":
            s0, s1 = f["doc_sents"][data.doc:data.doc + 2]
            a, b = int(st[s0]), int(st[s1])
            return consume(tokens[a:b], emb[a:b])
        if task == "random":
            st = st[:]
            total = 0.0
            for q in data.queries:
                a, b = int(st[q]), int(st[q + 1])
                total += consume(tokens[a:b], emb[a:b, 0:1])
            return total
        return consume(tokens[:], emb[:, 0:1])


def arrow_rows(batch, rows=None):
    """(tokens, emb rows) of a record batch (or of `rows` = (start, count))."""
    t, e = batch.column("tokens"), batch.column("emb")
    if rows is not None:
        t, e = t.slice(*rows), e.slice(*rows)
    return (t.flatten().to_numpy(),
            e.flatten().flatten().to_numpy().reshape(-1, DIM))


def arrow_sum(batch, rows=None):
    return consume(*arrow_rows(batch, rows))


def ipc(task, data):
    import pyarrow as pa
    with pa.memory_map(data.path("data.arrow")) as src:
        r = pa.ipc.open_file(src)
        if task == "open-doc":
            s0, s1 = data.doc_sentences
            k = data.doc_batch
            return arrow_sum(r.get_batch(k), (s0 - int(data.batch_sents[k]), s1 - s0))
        if task == "random":
            cache, total = {}, 0.0
            for k, l in zip(data.query_batch, data.query_local):
                b = cache.get(k)
                if b is None:
                    b = cache[k] = r.get_batch(int(k))
                total += arrow_sum(b, (int(l), 1))
            return total
        return sum(arrow_sum(r.get_batch(i)) for i in range(r.num_record_batches))


def parquet(task, data):
    import pyarrow.parquet as pq
    pf = pq.ParquetFile(data.path("data.parquet"))
    cols = ["tokens", "emb"]
    if task == "open-doc":
        s0, s1 = data.doc_sentences
        k = data.doc_batch
        t = pf.read_row_group(k, columns=cols).slice(s0 - int(data.batch_sents[k]), s1 - s0)
        return sum(arrow_sum(b) for b in t.to_batches())
    if task == "random":
        cache, total = {}, 0.0
        for k, l in zip(data.query_batch, data.query_local):
            b = cache.get(k)
            if b is None:
                b = cache[k] = pf.read_row_group(int(k), columns=cols).combine_chunks().to_batches()[0]
            total += arrow_sum(b, (int(l), 1))
        return total
    return sum(arrow_sum(b) for b in pf.iter_batches(batch_size=1 << 16, columns=cols))


def lance_(task, data):
    import lance
    ds = lance.dataset(data.path("data.lance"))
    cols = ["tokens", "emb"]
    if task == "open-doc":
        s0, s1 = data.doc_sentences
        t = ds.take(list(range(s0, s1)), columns=cols)
        return sum(arrow_sum(b) for b in t.to_batches())
    if task == "random":
        t = ds.take(data.queries.tolist(), columns=cols)
        return sum(arrow_sum(b) for b in t.to_batches())
    return sum(arrow_sum(b) for b in ds.to_batches(columns=cols))


PEERS = {"npy": npy, "safetensors": safetensors, "ipc": ipc, "parquet": parquet,
         "lance": lance_, "hdf5": hdf5}


def timed(system, task, data, lodt_bin):
    if system in LODT_RANDOM:
        return lodt(task, data, lodt_bin, system)
    gc.collect()
    t = time.perf_counter()
    checksum = npy("random-take", data) if system == NPY_TAKE else PEERS[system](task, data)
    seconds = time.perf_counter() - t
    gc.collect()  # drop maps before the next eviction
    return seconds, checksum


def write_calls(data, lodt_bin):
    """The sizes of the write calls the lodt writer issues for the file (one
    traced run under strace), in a file for `peers write` to replay with a
    raw writer; [] (no replay) without strace."""
    trace = data.path("write-calls.strace")
    try:
        subprocess.run(["strace", "-f", "-e", "trace=openat,write,writev,pwrite64,pwritev",
                        "-o", trace, lodt_bin, "write-only", data.dir, "1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError):
        return []
    import re
    fd, sizes = None, []
    with open(trace) as f:
        for line in f:
            m = re.search(r'openat\(.*"[^"]*write-test\.lodt[^"]*\.tmp".* = (\d+)$', line)
            if m:
                fd, sizes = m.group(1), []
                continue
            m = re.search(r'(?:write|writev|pwrite64|pwritev)\((\d+),.* = (\d+)$', line)
            if m and m.group(1) == fd:
                sizes.append(int(m.group(2)))
    os.remove(trace)
    out = data.path("write-calls.txt")
    with open(out, "w") as f:
        f.write("".join(f"{n}\n" for n in sizes))
    return [out] if sizes else []


# ---------------------------------------------------------------- driver


def uptime():
    """`uptime`'s line (the load of the shared machine goes with every figure)."""
    try:
        return run(["uptime"]).strip()
    except (OSError, subprocess.CalledProcessError):
        return f"load average {os.getloadavg()}"


def machine():
    """What the figures were measured on."""
    out = {"cores": os.cpu_count(), "kernel": os.uname().release,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    try:
        with open("/proc/cpuinfo") as f:
            out["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        out["commit"] = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


def fmt(seconds):
    return f"{seconds * 1e3:.1f} ms" if seconds >= 0.01 else f"{seconds * 1e3:.2f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "peers-data"))
    ap.add_argument("--batches", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--queries", type=int, default=10000,
                    help="random sentences per run (at most the dataset's sentences)")
    ap.add_argument("--systems", default="lodt,npy,safetensors,ipc,parquet,lance,hdf5")
    ap.add_argument("--tasks", default="open-doc,random,scan,write,verify")
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--lodt-bin", default=os.path.join(ROOT, "target", "release", "examples", "peers"))
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()

    systems = [s for s in a.systems.split(",") if s]
    for s in list(systems):
        if s in ("ipc", "parquet", "lance", "hdf5", "safetensors"):
            mod = {"ipc": "pyarrow", "parquet": "pyarrow", "lance": "lance", "hdf5": "h5py",
                   "safetensors": "safetensors"}[s]
            try:
                __import__(mod)
            except ImportError:
                print(f"skipping {s}: no module {mod}", file=sys.stderr)
                systems.remove(s)
    if not os.path.exists(a.lodt_bin):
        run(["cargo", "build", "--release", "--example", "peers"], cwd=ROOT)
    os.makedirs(a.dir, exist_ok=True)
    if a.regenerate or not os.path.exists(os.path.join(a.dir, "queries.npy")):
        generate(a.dir, a.batches, a.queries)
    data = Data(a.dir)
    missing = {s for s in systems if not files_of(data, s)}
    if a.regenerate or missing:
        write_all(data, set(systems) if a.regenerate else missing, a.lodt_bin)
    sizes = {s: sum(os.path.getsize(p) for p in files_of(data, s)) for s in systems}
    print("sizes: " + ", ".join(f"{s} {sizes[s] / 2**20:.0f} MiB" for s in systems), flush=True)
    every_file = [p for s in systems for p in files_of(data, s)]

    results = {"load_before": os.getloadavg(), "sizes": sizes, "reps": a.reps,
               "machine": machine(), "uptime": [uptime()],
               "dataset": {"batches": len(data.batch_docs) - 1, "documents": len(data.doc_sents) - 1,
                           "sentences": len(data.sent_tokens) - 1,
                           "tokens": int(data.sent_tokens[-1])},
               "reads": {}}
    tasks = [t for t in a.tasks.split(",") if t]
    for mode in [m for m in a.modes.split(",") if m]:
        for task in [t for t in tasks if t in ("open-doc", "random", "scan")]:
            if mode == "warm":
                # Dropped first, so that every system's pages come from read()
                # alike (how a page got into the cache decides its size, and
                # so what a mapped read of it costs).
                evict(every_file)
                warm(every_file)
            # lodt's other ways of reading random sentences run alongside.
            task_systems = list(systems)
            if task == "random" and "lodt" in systems:
                task_systems[1:1] = [v for v in LODT_RANDOM if v != "lodt"]
            if task == "random" and "npy" in systems:
                task_systems.insert(task_systems.index("npy") + 1, NPY_TAKE)
            runs = {s: [] for s in task_systems}
            sums = {}
            load = os.getloadavg()
            for _ in range(a.reps):
                for s in task_systems:
                    if mode == "cold":
                        evict(every_file)
                    seconds, checksum = timed(s, task, data, a.lodt_bin)
                    runs[s].append(seconds)
                    sums.setdefault(s, checksum)
                    if sums[s] != checksum:
                        print(f"{s}: checksum changed", file=sys.stderr)
            med = {s: float(np.median(v)) for s, v in runs.items()}
            bad = {s for s in task_systems if sums[s] != sums[task_systems[0]]}
            results["reads"][f"{task}/{mode}"] = {"median": med, "runs": runs, "checksums": sums,
                                                  "load": [load, os.getloadavg()]}
            line = ", ".join(f"{s} {fmt(med[s])}" for s in task_systems)
            print(f"{task:9} {mode}: {line}  ({uptime()}){' CHECKSUMS DIFFER: ' + str(bad) if bad else ''}",
                  flush=True)
    if "write" in tasks:
        calls = write_calls(data, a.lodt_bin)
        results["write"] = json.loads(run([a.lodt_bin, "write", a.dir, str(a.reps)] + calls))
        results["write"]["uptime"] = uptime()
        w = results["write"]
        print("write: " + ", ".join(f"{k} {fmt(v['median'])}" for k, v in w.items() if k not in ("bytes", "uptime"))
              + f"  ({w['uptime']})", flush=True)
    if "verify" in tasks:
        evict(files_of(data, "lodt"))
        warm(files_of(data, "lodt"))
        results["verify"] = json.loads(run([a.lodt_bin, "verify", a.dir, str(a.reps)]))
        verify_uptime = uptime()
        try:
            one = json.loads(run(["taskset", "-c", "0", a.lodt_bin, "verify", a.dir, str(a.reps)]))
            results["verify"]["lodt_verify_one_core"] = one["lodt_verify_read_back"]
        except (OSError, subprocess.CalledProcessError):
            pass
        v = results["verify"]
        print("verify: " + ", ".join(f"{k} {fmt(x['median'])}" for k, x in v.items() if k != "bytes")
              + f"  ({verify_uptime})", flush=True)
    results["load_after"] = os.getloadavg()
    results["uptime"].append(uptime())
    print_table(results, systems)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


def print_table(results, systems):
    peers = [s for s in systems if s not in LODT_RANDOM]
    lodts = [s for s in LODT_RANDOM if s in systems or any(s in r["median"] for r in results["reads"].values())]
    print()
    print("| what | " + " | ".join(lodts + peers) + " | best peer | "
          + " | ".join(f"{s} / best" for s in lodts) + " |")
    print("|---|" + "---:|" * (len(lodts) + len(peers)) + "---|" + "---:|" * len(lodts))
    for key, r in results["reads"].items():
        med = r["median"]
        if "lodt" not in med or not peers:
            continue
        best = min(peers, key=lambda s: med[s])
        cells = " | ".join(fmt(med[s]) if s in med else "—" for s in lodts + peers)
        ratios = " | ".join(f"{med[s] / med[best]:.2f}×" if s in med else "—" for s in lodts)
        print(f"| {key} | {cells} | {best} | {ratios} |")
    takes = {k: r["median"] for k, r in results["reads"].items()
             if "lodt-take" in r["median"] and NPY_TAKE in r["median"]}
    if takes:
        # The gathers in one call side by side: each returns the whole rows.
        print()
        print("| random sentences gathered in one call (whole rows) | lodt-take | npy-take | lodt-take / npy-take |")
        print("|---|---:|---:|---:|")
        for key, med in takes.items():
            l, n = med["lodt-take"], med[NPY_TAKE]
            print(f"| {key} | {fmt(l)} | {fmt(n)} | {l / n:.2f}× |")
    if "write" in results:
        w = results["write"]
        print()
        print("| write (throughput: raw time / lodt time; goal ≥ 0.95×) | lodt | raw | lodt / raw |")
        print("|---|---:|---:|---:|")
        for lodt_key, raw_key in (("lodt_writer", "raw_write_all"), ("lodt_writer", "raw_write_all_1MiB"),
                                  ("lodt_writer_fsync", "raw_write_all_fsync"),
                                  ("lodt_writer", "raw_same_calls"), ("raw_same_calls", "raw_write_all"),
                                  ("raw_same_calls", "raw_write_all_1MiB"),
                                  ("lodt_writer", "raw_write_all_1MiB_crc"),
                                  ("raw_write_all_1MiB_crc", "raw_write_all_1MiB")):
            if lodt_key not in w or raw_key not in w:
                continue
            l, r = w[lodt_key]["median"], w[raw_key]["median"]
            print(f"| {w['bytes'] / 2**20:.0f} MiB: {lodt_key} vs {raw_key} | {fmt(l)} | {fmt(r)} | "
                  f"{r / l:.2f}× |")
    if "verify" in results:
        v = results["verify"]
        c = v["crc32_all_cores"]["median"]
        print()
        print("| verify (time; goal ≤ 1.1× the CRC on every core) | lodt | CRC32 | lodt / CRC |")
        print("|---|---:|---:|---:|")
        for key in ("lodt_verify_just_written", "lodt_verify_read_back"):
            l = v[key]["median"]
            print(f"| verify, {key[12:].replace('_', ' ')}, vs the CRC32 of the same bytes on every core | "
                  f"{fmt(l)} | {fmt(c)} | {l / c:.2f}× |")
        # The kernel's part: the same CRC over the file mapped (the page
        # cache's pages mapped and unmapped), and what is left for lodt.
        for state in ("just_written", "read_back"):
            mapped = v.get("crc32_mapped_" + state)
            if mapped is None:
                continue
            l, m = v["lodt_verify_" + state]["median"], mapped["median"]
            what = state.replace("_", " ")
            print(f"| the same CRC32 over the file mapped ({what}) vs in memory: the kernel's part | "
                  f"{fmt(m)} | {fmt(c)} | {m / c:.2f}× |")
            print(f"| verify, {what}, vs the CRC32 over the file mapped: lodt's part | "
                  f"{fmt(l)} | {fmt(m)} | {l / m:.2f}× |")
            pread = v.get("crc32_pread_" + state)
            if pread is not None:
                p = pread["median"]
                print(f"| the same CRC32 over the file read with pread (1 MiB, every core; {what}) vs in memory | "
                      f"{fmt(p)} | {fmt(c)} | {p / c:.2f}× |")
        if "sum_all_cores" in v:
            r = v["sum_all_cores"]["median"]
            print(f"| reading the bytes alone (a sum, every core) vs the CRC32 on every core | "
                  f"{fmt(r)} | {fmt(c)} | {r / c:.2f}× |")
        if "lodt_verify_one_core" in v:
            l, c1 = v["lodt_verify_one_core"]["median"], v["crc32_one_core"]["median"]
            print(f"| verify on one core vs a one-core CRC32 | {fmt(l)} | {fmt(c1)} | {l / c1:.2f}× |")
    print(f"\nload average before {results['load_before']}, after {results['load_after']}")
    m = results.get("machine", {})
    print(f"machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, Linux {m.get('kernel', '?')}; "
          f"commit {m.get('commit', '?')}; {m.get('date', '?')}; {results['reps']} runs per figure (medians)")
    for line in results.get("uptime", []):
        print("uptime: " + line)


if __name__ == "__main__":
    main()
