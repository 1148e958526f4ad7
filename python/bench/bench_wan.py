"""One shuffled epoch from an object store over a stand-in for a WAN: lodt's
loader against the floor of fetching every shard once, and against MDS
(MosaicML Streaming), at 1×1, 1×2 and 2×2 (ranks × workers), in one run.

    python python/bench/bench_wan.py [--mb 100] [--batch-kib 8192,64] [--configs 1x1,1x2,2x2] \\
        [--runs 3] [--mds-python /work/venvs/mds/bin/python] [--slowdown 0.1] [--round-robin] \\
        [--json out.json]

It needs, in the Python that runs it: lodt, numpy, moto[server] (it starts
moto's S3 server on 127.0.0.1) and psutil; for MDS, ``--mds-python``: a
Python with ``mosaicml-streaming`` (it pins numpy < 2.2, so it has a venv of
its own; it brings torch) and boto3. Without ``--mds-python`` MDS is left out.

**The link.** Every client reads through ``wan_proxy.py`` (127.0.0.1): the first
byte of each answer ``--delay-ms`` (30) after its request came, each
connection paced to ``--mbps`` (80 MB/s). Each rank (a "node") reads through a
proxy of its own, so the bytes each node fetched are counted apart.

**The data.** Ragged int32 token documents (``--mb`` MB of tokens, lengths
log-normal around ``--mean-tokens``, 16 to 8,192 tokens, seeded), each with
its id as its first token. lodt: ``lodt.write_dataset`` straight to moto,
one dataset per ``--batch-kib`` file batch size (documents per batch so that
a batch holds about that many bytes), shards of ``max(--shard-mib, 4
batches)``. MDS: the same documents (``tokens`` ndarray:int32, ``id`` int) by
its ``MDSWriter`` with shards of ``--shard-mib``, uploaded to moto.

**A run** of R×W: lodt: R·W processes, consumer ``r·W + w`` of ``R·W`` (what
a DataLoader worker ``w`` of rank ``r`` is), the W of one rank through its
node's proxy and sharing its node's disk cache: a new, empty directory per
node and run (``cache_dir=`` and ``LODT_CACHE_DIR``), deleted after the run,
so that every run starts cold and no node sees another's cache; each
process imports lodt, then waits until all are ready, then times
``lodt.Dataset(...)`` to its last mini-batch (``return_ids=True``; each
document's first token checked against its id). The partition is the
default for a remote dataset (locality); ``--round-robin`` adds rows with
``partition="round_robin"``. MDS: R processes (``RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE=1``: each rank a node with its own ``local=`` cache, a
new directory per run, deleted after), each ``StreamingDataset(shuffle=True)``
into a torch ``DataLoader`` with W workers (0 for one: read in the rank's
process), timed from the ``StreamingDataset`` to the last mini-batch (MDS
joins its ranks with ``torch.distributed``, gloo on 127.0.0.1). MDS keeps
its state in shared memory (``/dev/shm/NNNNNN_locals``, ``_barrier``, ...)
and file locks (``$TMPDIR/NNNNNN_*_filelock``), named by a prefix each
node's leader picks: two "nodes" on one machine would pick the same prefix
and collide, so each rank runs in a mount namespace of its own with a
private ``/dev/shm`` (``unshare``, when it can; else the ranks share it and
more than one rank may fail) and a ``TMPDIR`` of its own; before each MDS run
the stale shared memory and locks MDS left on the machine are removed and
each rank calls ``clean_stale_shared_memory()``. Each DataLoader worker drops
the S3 client it inherited from its rank (see ``own_clients``: a forked
worker would share the rank's pooled connection with its siblings). The
**floor**: every
shard object fetched once, whole, by raw HTTP GETs through the proxy, with
``--floor-per-consumer`` (8) × R·W in flight, timed in its own process.

**Reported**, per configuration, the median of ``--runs`` runs (the systems
interleaved, their order rotating): wall time (the slowest consumer's,
inside the readers), the floor and their ratio; bytes fetched (GET response
bodies) over the dataset's bytes, all nodes together and the largest per
node; GETs (ranged ones); the most requests in flight at once; peak RSS per
worker (VmHWM of each reading process; for MDS the DataLoader workers'); and
whether every document came exactly once over all consumers (MDS repeats a
few to give each rank the same count: reported as repeats). ``--slowdown
0.1`` adds a lodt run per configuration with 10 % of GETs answered 503
SlowDown: its time over the run without, and exactly-once.

moto copies the whole object for each ranged GET, so a reader of many small
ranges pays moto's time as well as the link's: the GET count and the bytes
are the structural part; time ``moto alone`` (``--delay-ms 0 --mbps 0``) to
see it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUCKET = "bench"
CREDS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


def hwm_kb() -> int:
    """This process's peak resident set (VmHWM), KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _wait_go() -> None:
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        sys.exit(3)


# ---------------------------------------------------------------- the data


def documents(mb: float, mean_tokens: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens int32, offsets int64)``: documents whose first token is their id."""
    rng = np.random.default_rng(seed)
    total = int(mb * 1e6) // 4
    n = max(1, total // mean_tokens)
    lengths = np.clip(rng.lognormal(np.log(mean_tokens) - 0.5, 1.0, size=n), 16, 8192).astype(np.int64)
    # Scale to the asked size (the clip moves the mean).
    lengths = np.maximum(16, (lengths * (total / lengths.sum())).astype(np.int64))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = rng.integers(0, 50257, size=int(offsets[-1]), dtype=np.int32)
    tokens[offsets[:-1]] = np.arange(n, dtype=np.int32)
    return tokens, offsets


def lodt_batches(tokens, offsets, batch_bytes):
    import lodt

    n = len(offsets) - 1
    i = 0
    while i < n:
        j = int(np.searchsorted(offsets, offsets[i] + batch_bytes // 4, side="right")) - 1
        j = min(n, max(j, i + 1))
        lengths = np.diff(offsets[i : j + 1])
        yield {"tokens": lodt.create_lod_tensor(tokens[offsets[i] : offsets[j]].reshape(-1, 1), [lengths.tolist()])}
        i = j


# ---------------------------------------------------------------- processes


def lodt_consumer(cfg: dict) -> None:
    import lodt

    opts = cfg["options"]
    extra = dict(cfg.get("extra") or {})
    _wait_go()
    t0 = time.perf_counter()
    ds = lodt.Dataset(
        cfg["url"], batch_size=cfg["batch_size"], shuffle=True, seed=cfg["seed"], rank=cfg["consumer"],
        world_size=cfg["consumers"], return_ids=True, storage_options=opts, **extra,
    )
    got, first, batches, bad = [], None, 0, 0
    for ids, b in ds:
        t = b["tokens"]
        head = np.asarray(t)[np.asarray(t.lod()[0][:-1], dtype=np.int64), 0]
        bad += int((head != ids.astype(np.int32)).sum())
        got.append(ids)
        batches += 1
        if first is None:
            first = time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    ids = np.concatenate(got) if got else np.zeros(0, np.int64)
    np.save(cfg["ids"], ids)
    print(json.dumps({"seconds": seconds, "first": first, "batches": batches, "bad": bad, "hwm_kb": [hwm_kb()]}), flush=True)


def mds_rank(cfg: dict) -> None:
    os.environ.update(CREDS)
    os.environ.update(
        S3_ENDPOINT_URL=cfg["endpoint"], RANK=str(cfg["rank"]), WORLD_SIZE=str(cfg["ranks"]),
        LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", NODE_RANK=str(cfg["rank"]),
        # MDS joins its ranks with torch.distributed (gloo) when WORLD_SIZE > 1.
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(cfg["master_port"]),
    )
    import torch.utils.data as tud
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    try:
        clean_stale_shared_memory()
    except FileNotFoundError:
        pass  # another process removed a block between MDS's look and its unlink

    class Tail(tud.IterableDataset):
        """The dataset, then each worker's peak RSS."""

        def __init__(self, ds):
            self.ds = ds

        def __iter__(self):
            yield from self.ds
            yield {"hwm_kb": hwm_kb()}

    def collate(items):
        ids, hwms, bad = [], [], 0
        for x in items:
            if "hwm_kb" in x:
                hwms.append(x["hwm_kb"])
                continue
            ids.append(int(x["id"]))
            bad += int(x["tokens"][0]) != int(x["id"])
        return ids, hwms, bad

    def own_clients(_):
        """In each DataLoader worker: drop the S3 client MDS made in the rank
        process (to fetch index.json). A forked worker inherits it with its
        pooled keep-alive connection, and two workers on one socket mix their
        answers: a shard fetched twice, a download hung to MDS's 60 s timeout.
        Each worker then makes its own client on first use."""
        info = tud.get_worker_info()
        for stream in getattr(info.dataset.ds, "streams", None) or []:
            downloader = getattr(stream, "_downloader", None)
            if downloader is not None and hasattr(downloader, "clean_up"):
                downloader.clean_up()

    _wait_go()
    t0 = time.perf_counter()
    ds = StreamingDataset(remote=cfg["remote"], local=cfg["local"], shuffle=True, shuffle_seed=cfg["seed"],
                          batch_size=cfg["batch_size"])
    workers = cfg["workers"] if cfg["workers"] > 1 else 0
    loader = tud.DataLoader(Tail(ds), batch_size=cfg["batch_size"], num_workers=workers, collate_fn=collate,
                            worker_init_fn=own_clients if workers else None)
    got, hwms, first, batches, bad = [], [], None, 0, 0
    for ids, h, b in loader:
        got += ids
        hwms += h
        bad += b
        batches += 1
        if first is None:
            first = time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    np.save(cfg["ids"], np.asarray(got, dtype=np.int64))
    if workers == 0:
        hwms = [hwm_kb()]
    print(json.dumps({"seconds": seconds, "first": first, "batches": batches, "bad": bad, "hwm_kb": hwms}), flush=True)


def mds_write(cfg: dict) -> None:
    """Writes the documents with MDSWriter and uploads the shards to moto."""
    import boto3
    from streaming import MDSWriter

    d = np.load(cfg["docs"])
    tokens, offsets = d["tokens"], d["offsets"]
    out = cfg["out"]
    with MDSWriter(out=out, columns={"id": "int64", "tokens": "ndarray:int32"}, compression=None,
                   size_limit=cfg["shard_bytes"]) as w:
        for i in range(len(offsets) - 1):
            w.write({"id": i, "tokens": tokens[offsets[i] : offsets[i + 1]]})
    c = boto3.client("s3", endpoint_url=cfg["upstream"], region_name="us-east-1",
                     aws_access_key_id="test", aws_secret_access_key="test")
    sizes = {}
    for f in sorted(os.listdir(out)):
        c.upload_file(os.path.join(out, f), BUCKET, f"{cfg['key']}/{f}")
        sizes[f"{cfg['key']}/{f}"] = os.path.getsize(os.path.join(out, f))
    print(json.dumps(sizes), flush=True)


def floor_fetch(cfg: dict) -> None:
    """Every object once, whole, ``concurrency`` GETs in flight (boto3, one
    pooled connection per thread)."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    from botocore.config import Config

    c = boto3.client("s3", endpoint_url=cfg["endpoint"], region_name="us-east-1", aws_access_key_id="test",
                     aws_secret_access_key="test",
                     config=Config(max_pool_connections=cfg["concurrency"], retries={"max_attempts": 10}))
    c.head_bucket(Bucket=BUCKET)  # the client made before the clock

    def get(key):
        return len(c.get_object(Bucket=BUCKET, Key=key)["Body"].read())

    keys = cfg["keys"]
    _wait_go()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(cfg["concurrency"]) as pool:
        got = sum(pool.map(get, keys))
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "bytes": got, "hwm_kb": [hwm_kb()]}), flush=True)


# ---------------------------------------------------------------- the orchestra


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Group:
    """Processes started together, released together (after every one is
    ready), their last JSON line each."""

    def __init__(self, argvs, envs=None, timeout=600.0):
        self.timeout = timeout
        # stderr to files: a child that writes more than a pipe holds before
        # "ready" (warnings) would block on a pipe nobody reads yet.
        self.errs = [tempfile.TemporaryFile(mode="w+") for _ in argvs]
        self.procs = [
            subprocess.Popen(a, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errs[i], text=True,
                             env=(envs[i] if envs else None), start_new_session=True)
            for i, a in enumerate(argvs)
        ]

    def _err(self, i):
        f = self.errs[i]
        f.flush()
        f.seek(0)
        return f.read()[-3000:]

    def _line(self, p, want):
        line = p.stdout.readline()
        if line.strip() != want:
            time.sleep(0.5)
            err = self._err(self.procs.index(p))
            self.kill()
            raise RuntimeError(f"expected {want!r} from {p.args[:3]}..., got {line!r}\n{err}")

    def run(self, stagger: str | None = None) -> list[dict]:
        for p in self.procs:
            self._line(p, "ready")
        for p in self.procs:
            p.stdin.write("go\n")
            p.stdin.flush()
            if stagger:
                self._line(p, stagger)
        timer = threading.Timer(self.timeout, self.kill)
        timer.start()
        out = []
        try:
            for i, p in enumerate(self.procs):
                stdout, _ = p.communicate()
                if p.returncode != 0:
                    raise RuntimeError(f"{p.args[:3]}... exit {p.returncode}\n{self._err(i)}")
                out.append(json.loads(stdout.strip().splitlines()[-1]))
        finally:
            timer.cancel()
            self.kill()
            for f in self.errs:
                f.close()
        return out

    def kill(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class Bench:
    def __init__(self, args):
        self.args = args
        self.root = tempfile.mkdtemp(prefix="lodt-wan-", dir=args.dir)
        self.port = free_port()
        self.moto = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1).close()
                break
            except Exception:
                time.sleep(0.1)
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}/{BUCKET}", method="PUT")).close()
        self.upstream = f"http://127.0.0.1:{self.port}"
        sys.path.insert(0, HERE)
        from wan_proxy import wan_proxy

        ranks = max(r for r, _ in args.configs)
        self.proxies = [
            wan_proxy(self.port, delay=args.delay_ms / 1e3, rate=args.mbps * 1e6 or None, seed=args.seed + i)
            for i in range(ranks)
        ]

    def options(self, proxy):
        return {"aws_endpoint": proxy.endpoint, "aws_allow_http": "true", "aws_access_key_id": "test",
                "aws_secret_access_key": "test", "aws_region": "us-east-1"}

    def close(self):
        for p in self.proxies:
            p.close()
        os.killpg(self.moto.pid, signal.SIGKILL)
        self.moto.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- data -------------------------------------------------------------

    def make(self):
        import lodt

        a = self.args
        t = time.perf_counter()
        tokens, offsets = documents(a.mb, a.mean_tokens, a.seed)
        self.n = len(offsets) - 1
        self.docs_bytes = tokens.nbytes
        direct = {"aws_endpoint": self.upstream, "aws_allow_http": "true", "aws_access_key_id": "test",
                  "aws_secret_access_key": "test", "aws_region": "us-east-1"}
        self.datasets = {}
        for kib in a.batch_kib:
            batch = kib << 10
            shard = max(a.shard_mib << 20, 4 * batch)
            url = f"s3://{BUCKET}/lodt-{kib}k"
            totals = lodt.write_dataset(url, lodt_batches(tokens, offsets, batch), shard_bytes=shard,
                                        storage_options=direct)
            ds = lodt.Dataset(url, storage_options=direct)
            assert len(ds) == self.n, (len(ds), self.n)
            keys = [f"lodt-{kib}k/{s['name']}" for s in ds.shards]
            self.datasets[kib] = {"url": url, "bytes": ds.num_bytes, "shards": ds.num_shards,
                                  "batches": ds.num_batches, "keys": keys, "totals": totals}
        self.mds = None
        if a.mds_python:
            docs = os.path.join(self.root, "docs.npz")
            np.savez(docs, tokens=tokens, offsets=offsets)
            cfg = {"docs": docs, "out": os.path.join(self.root, "mds-src"), "shard_bytes": a.shard_mib << 20,
                   "upstream": self.upstream, "key": "mds"}
            r = subprocess.run([a.mds_python, __file__, "--mds-write", json.dumps(cfg)], capture_output=True,
                               text=True, env={**os.environ, **CREDS})
            if r.returncode != 0:
                raise RuntimeError(f"MDS write failed:\n{r.stderr[-3000:]}")
            sizes = json.loads(r.stdout.strip().splitlines()[-1])
            shutil.rmtree(cfg["out"])
            os.remove(docs)
            self.mds = {"remote": f"s3://{BUCKET}/mds", "bytes": sum(sizes.values()), "keys": sorted(sizes),
                        "shards": sum(k.endswith(".mds") for k in sizes)}
        del tokens
        self.make_seconds = time.perf_counter() - t

    # -- runs -------------------------------------------------------------

    def _stats(self, ranks):
        return [p.stats() for p in self.proxies[:ranks]]

    def _reset(self):
        for p in self.proxies:
            p.reset_stats()

    def _node_dirs(self, system, ranks):
        """A new, empty directory per node for one run (never one an earlier
        run used): the run starts cold."""
        self.run_no = getattr(self, "run_no", 0) + 1
        base = os.path.join(self.root, "nodes", f"{system}-{self.run_no}")
        dirs = [os.path.join(base, str(r)) for r in range(ranks)]
        for d in dirs:
            os.makedirs(d)
        return base, dirs

    def run_lodt(self, kib, ranks, workers, faults=0.0, partition=None):
        a = self.args
        d = self.datasets[kib]
        n = ranks * workers
        base, caches = self._node_dirs("lodt", ranks)
        argvs, paths, envs = [], [], []
        for c in range(n):
            r = c // workers
            extra = dict(a.lodt_opt)
            # Always explicit: lodt.Dataset's signature hides behind its
            # __new__(*args, **kwargs), so inspect.signature cannot tell
            # whether it takes cache_dir (it does), and without it every
            # process of every run shares the machine's node cache (warm).
            extra.setdefault("cache_dir", caches[r])
            if partition:
                extra["partition"] = partition
            path = os.path.join(self.root, f"ids-{c}.npy")
            paths.append(path)
            cfg = {"url": d["url"], "options": self.options(self.proxies[r]), "batch_size": a.batch_size,
                   "seed": a.seed, "consumer": c, "consumers": n, "ids": path, "extra": extra}
            argvs.append([sys.executable, __file__, "--lodt-consumer", json.dumps(cfg)])
            envs.append({**os.environ, "LODT_CACHE_DIR": caches[r]})
        if faults:
            from fault_proxy import slow_down

            for p in self.proxies:
                p.add(slow_down(faults))
        self._reset()
        try:
            out = Group(argvs, envs, timeout=a.timeout).run()
        finally:
            for p in self.proxies:
                p.clear()
            shutil.rmtree(base, ignore_errors=True)
        return self._result(out, paths, self._stats(ranks), d["bytes"])

    def clean_mds_shm(self):
        """Removes what earlier MDS runs left on this machine: its shared
        memory blocks (``/dev/shm/NNNNNN_<name>``, the names of MDS's
        ``SHM_TO_CLEAN``) and its file locks (``<tmp>/NNNNNN_*_filelock``),
        whose presence makes MDS skip (or trip over) a prefix."""
        import re

        names = ("locals", "barrier", "next_epoch", "cache_usage", "shard_states", "shard_access_times", "resume",
                 "epoch_shape", "epoch_data", "barrier_filelock", "cache_filelock")
        pat = re.compile(r"^\d{6}_(%s)$" % "|".join(names))
        for d in ("/dev/shm", tempfile.gettempdir()):
            try:
                entries = os.listdir(d)
            except OSError:
                continue
            for e in entries:
                if pat.match(e):
                    try:
                        os.remove(os.path.join(d, e))
                    except OSError:
                        pass

    def mds_isolation(self):
        """The argv prefix that runs an MDS rank in a mount namespace of its
        own with a private /dev/shm (a node of its own), or [] when this
        machine does not allow it."""
        if self.args.mds_shared_shm:
            return []
        if getattr(self, "_isolation", None) is None:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount -t tmpfs tmpfs /dev/shm && exec "$@"', "sh"]
            try:
                ok = subprocess.run(argv + ["true"], capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            self._isolation = argv if ok else []
            if not ok:
                print("# MDS: no private /dev/shm per rank (unshare failed): ranks share it", flush=True)
        return self._isolation

    def run_mds(self, ranks, workers):
        a = self.args
        self.clean_mds_shm()
        base, locals_ = self._node_dirs("mds", ranks)
        argvs, paths, envs = [], [], []
        master = free_port()
        for r in range(ranks):
            path = os.path.join(self.root, f"ids-{r}.npy")
            paths.append(path)
            tmp = os.path.join(base, f"tmp-{r}")
            os.makedirs(tmp)
            cfg = {"remote": self.mds["remote"], "local": locals_[r], "endpoint": self.proxies[r].endpoint,
                   "rank": r, "ranks": ranks, "master_port": master, "workers": workers, "batch_size": a.batch_size, "seed": a.seed,
                   "ids": path}
            argvs.append(self.mds_isolation() + [a.mds_python, __file__, "--mds-rank", json.dumps(cfg)])
            envs.append({**os.environ, "TMPDIR": tmp})
        self._reset()
        try:
            out = Group(argvs, envs, timeout=a.timeout).run()
        finally:
            shutil.rmtree(base, ignore_errors=True)
            self.clean_mds_shm()
        return self._result(out, paths, self._stats(ranks), self.mds["bytes"])

    def run_floor(self, keys, ranks, workers):
        a = self.args
        p = self.proxies[0]
        cfg = {"endpoint": p.endpoint, "keys": keys, "concurrency": a.floor_per_consumer * ranks * workers}
        self._reset()
        out = Group([[sys.executable, __file__, "--floor", json.dumps(cfg)]], timeout=a.timeout).run()
        s = self._stats(1)[0]
        return {"seconds": out[0]["seconds"], "get_bytes": s["get_bytes"], "gets": s["gets"]}

    def _result(self, out, paths, stats, dataset_bytes):
        ids = np.concatenate([np.load(p) for p in paths])
        for p in paths:
            os.remove(p)
        counts = np.bincount(ids, minlength=self.n) if len(ids) else np.zeros(self.n, np.int64)
        missing = int((counts == 0).sum())
        repeats = int(counts[counts > 1].sum() - (counts > 1).sum())
        per_node = [s["get_bytes"] for s in stats]
        return {
            "seconds": max(o["seconds"] for o in out),
            "first": max((o["first"] or 0.0) for o in out),
            "bad": sum(o["bad"] for o in out),
            "missing": missing, "repeats": repeats, "extra_ids": int(len(ids) > 0 and ids.max() >= self.n),
            "fetched": sum(per_node) / dataset_bytes, "fetched_node_max": max(per_node) / dataset_bytes,
            "gets": sum(s["gets"] for s in stats), "ranged": sum(s["ranged_gets"] for s in stats),
            "faults": sum(s["faults"] for s in stats),
            "in_flight": sum(s["in_flight_max"] for s in stats),
            "hwm_mb": max(h for o in out for h in o["hwm_kb"]) / 1024,
        }


# ---------------------------------------------------------------- report


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def once(rows):
    worst = max(rows, key=lambda r: (r["missing"], r["repeats"], r["bad"]))
    if worst["missing"] == 0 and worst["repeats"] == 0 and worst["bad"] == 0:
        return "✓"
    parts = []
    if worst["missing"]:
        parts.append(f"{worst['missing']} missing")
    if worst["repeats"]:
        parts.append(f"{worst['repeats']} repeated")
    if worst["bad"]:
        parts.append(f"{worst['bad']} wrong")
    return "✗ " + ", ".join(parts)


def report(b, results, args):
    lines = []
    a = args
    lines.append(
        f"{b.n:,} documents, {b.docs_bytes / 1e6:.1f} MB of int32 tokens; link: {a.delay_ms:g} ms to the first byte, "
        f"{a.mbps:g} MB/s per connection; mini-batches of {a.batch_size}; medians of {a.runs} runs "
        f"(range in brackets), systems interleaved."
    )
    for kib, d in b.datasets.items():
        lines.append(f"- lodt, {kib} KiB batches: {d['bytes'] / 1e6:.1f} MB in {d['shards']} shards, {d['batches']} file batches")
    if b.mds:
        lines.append(f"- MDS: {b.mds['bytes'] / 1e6:.1f} MB in {b.mds['shards']} shards")
    lines.append("")
    lines.append("| R×W | system | wall (s) | floor (s) | wall / floor | first mini-batch (s) | fetched / dataset (max per node) "
                 "| GETs (ranged) | max in flight | peak RSS per worker (MB) | exactly once |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for (r, w) in a.configs:
        for name, rows in results.items():
            rows = rows.get((r, w))
            if not rows or name.startswith("floor"):
                continue
            floor = results[f"floor {name.split()[1]}" if name.startswith("lodt") else "floor mds"][(r, w)]
            fl = med(floor, "seconds")
            secs = [x["seconds"] for x in rows]
            lines.append(
                f"| {r}×{w} | {name} | {statistics.median(secs):.2f} [{min(secs):.2f}–{max(secs):.2f}] | {fl:.2f} | "
                f"{statistics.median(secs) / fl:.1f}× | {med(rows, 'first'):.2f} | {med(rows, 'fetched'):.2f}× "
                f"({med(rows, 'fetched_node_max'):.2f}×) | {med(rows, 'gets'):.0f} ({med(rows, 'ranged'):.0f}) | "
                f"{med(rows, 'in_flight'):.0f} | {max(x['hwm_mb'] for x in rows):.0f} | {once(rows)} |"
            )
    lines.append("")
    lines.append(f"Floor: every shard object once, whole, {a.floor_per_consumer} × R·W GETs in flight through the proxy "
                 "(the same floor for lodt's and MDS's rows is each one's own objects). Peak RSS: the largest of the runs. "
                 "Every run cold: a new disk cache (lodt) or `local=` (MDS) per node and run.")
    if a.round_robin:
        lines.append("")
        lines.append('`lodt … rr`: `partition="round_robin"` (every consumer reads from the whole dataset; the workers of '
                     'a node share its cache); the other lodt rows: the default for a remote dataset, `"locality"`.')
    if a.slowdown:
        lines.append("")
        lines.append("`lodt … +503`: the `lodt …` run (locality) with the injected 503s (table below).")
    if a.slowdown:
        lines.append("")
        lines.append(f"With {a.slowdown:.0%} of GETs answered 503 SlowDown (lodt):")
        lines.append("")
        lines.append("| R×W | batches | wall (s) | over no faults | 503s answered | GETs | exactly once |")
        lines.append("|---|---|---:|---:|---:|---:|---|")
        for (r, w) in a.configs:
            for kib in b.datasets:
                rows = results.get(f"lodt {kib}k +503", {}).get((r, w))
                if not rows:
                    continue
                base = med(results[f"lodt {kib}k"][(r, w)], "seconds")
                lines.append(f"| {r}×{w} | {kib} KiB | {med(rows, 'seconds'):.2f} | {med(rows, 'seconds') / base:.2f}× | "
                             f"{med(rows, 'faults'):.0f} | {med(rows, 'gets'):.0f} | {once(rows)} |")
    return "\n".join(lines)


def parse_configs(text):
    out = []
    for c in text.split(","):
        r, w = c.lower().split("x")
        out.append((int(r), int(w)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100.0, help="MB of tokens")
    ap.add_argument("--mean-tokens", type=int, default=1000)
    ap.add_argument("--batch-kib", default="8192,64", help="file batch sizes (KiB), comma-separated")
    ap.add_argument("--shard-mib", type=int, default=8)
    ap.add_argument("--configs", default="1x1,1x2,2x2", help="ranks x workers, comma-separated")
    ap.add_argument("--batch-size", type=int, default=32, help="documents per mini-batch")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=30.0)
    ap.add_argument("--mbps", type=float, default=80.0, help="MB/s per connection (0: unpaced)")
    ap.add_argument("--floor-per-consumer", type=int, default=8)
    ap.add_argument("--mds-python", default=os.environ.get("LODT_MDS_PYTHON"), help="a Python with mosaicml-streaming")
    ap.add_argument("--no-lodt", action="store_true")
    ap.add_argument("--mds-shared-shm", action="store_true",
                    help="run the MDS ranks without a private /dev/shm each (more than one rank then collides)")
    ap.add_argument("--round-robin", action="store_true",
                    help='also run lodt with partition="round_robin" (rows "lodt <kib>k rr")')
    ap.add_argument("--slowdown", type=float, default=0.0, help="also run lodt with this fraction of GETs answered 503")
    ap.add_argument("--lodt-opt", action="append", default=[], metavar="KEY=JSON",
                    help="an extra lodt.Dataset keyword (e.g. cache_bytes=67108864), repeatable")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a run may take before it fails")
    ap.add_argument("--dir", default=None, help="where the temporary files go")
    ap.add_argument("--json", default=None, help="write every run's figures here")
    ap.add_argument("--lodt-consumer")
    ap.add_argument("--mds-rank")
    ap.add_argument("--mds-write")
    ap.add_argument("--floor")
    args = ap.parse_args()
    for flag, fn in (("lodt_consumer", lodt_consumer), ("mds_rank", mds_rank), ("mds_write", mds_write),
                     ("floor", floor_fetch)):
        if getattr(args, flag):
            fn(json.loads(getattr(args, flag)))
            return
    args.configs = parse_configs(args.configs)
    args.batch_kib = [int(x) for x in args.batch_kib.split(",") if x]
    opts = {}
    for kv in args.lodt_opt:
        k, v = kv.split("=", 1)
        try:
            opts[k] = json.loads(v)
        except json.JSONDecodeError:
            opts[k] = v
    args.lodt_opt = opts

    started = time.time()
    print(f"# bench_wan {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    b = Bench(args)
    try:
        b.make()
        print(f"# data made in {b.make_seconds:.1f} s", flush=True)
        systems = []
        if not args.no_lodt:
            for kib in args.batch_kib:
                systems.append((f"lodt {kib}k", lambda r, w, kib=kib: b.run_lodt(kib, r, w)))
                if args.round_robin:
                    systems.append((f"lodt {kib}k rr", lambda r, w, kib=kib: b.run_lodt(kib, r, w, partition="round_robin")))
                systems.append((f"floor {kib}k", lambda r, w, kib=kib: b.run_floor(b.datasets[kib]["keys"], r, w)))
                if args.slowdown:
                    systems.append((f"lodt {kib}k +503", lambda r, w, kib=kib: b.run_lodt(kib, r, w, args.slowdown)))
        if b.mds:
            systems.append(("mds", lambda r, w: b.run_mds(r, w)))
            systems.append(("floor mds", lambda r, w: b.run_floor(b.mds["keys"], r, w)))
        results = {name: {} for name, _ in systems}
        for rep in range(args.runs):
            for (r, w) in args.configs:
                k = rep % len(systems)
                for name, fn in systems[k:] + systems[:k]:
                    got = fn(r, w)
                    results[name].setdefault((r, w), []).append(got)
                    if name.startswith("lodt") and r == 1 and got["fetched"] < 1.0:
                        print(f"# WARNING: {name} at {r}x{w} fetched {got['fetched']:.2f}x the dataset: not cold?",
                              flush=True)
                    print(f"# run {rep + 1}, {r}x{w}, {name}: {got['seconds']:.2f} s "
                          + (f"(fetched {got['fetched']:.2f}x, {got['gets']} GETs, {got['hwm_mb']:.0f} MB, "
                             f"missing {got['missing']}, repeats {got['repeats']})" if "fetched" in got else ""),
                          flush=True)
        print()
        print(report(b, results, args))
        print()
        print(f"# total {time.time() - started:.0f} s, load {os.getloadavg()[0]:.2f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({name: {f"{r}x{w}": v for (r, w), v in rows.items()} for name, rows in results.items()}, f,
                          indent=1)
    finally:
        b.close()


if __name__ == "__main__":
    main()
