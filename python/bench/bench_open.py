"""What a big manifest costs each process: a simulated dataset of many shards
(one real shard of 1,024 sequences listed under ``--shards`` names, hard
links of a few copies of it), opened in a fresh interpreter per measurement,
through its shard index (``spec/DATASET.md`` 3.2) and through its JSON
manifest alone (the index moved aside).

    python python/bench/bench_open.py [--shards 100000,1000000] [--consumers 64] [--dir DIR]
        [--listings index,json]

Per shard count, listing and partition, in a new process each (time from
before ``lodt.Dataset(dir)`` on, RSS over the interpreter's baseline with
numpy and lodt imported):

  open    ``lodt.Dataset(dir, shuffle=True, rank=0, world_size=C)`` + ``len``
  first   its first shuffled mini-batch of 32 (consumer 0 of ``--consumers``)
  resume  the first mini-batch after loading a state at 90 % of the epoch
          (every consumer's count at 0 of a tail starting at 90 %: for round
          robin a frontier, for locality a range). For round robin the state
          is the one a loader saves there, with its cursor (spec/DATASET.md
          7.3): made once, before the timed processes, by a loader that walks
          to the frontier; ``--no-cursor`` times the same state without it
          (the walk from the epoch's start)

The figures are the medians of ``--reps`` processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

_CHILD = r"""
import json, os, resource, sys, time
import numpy as np
import lodt
def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
base = rss()
path, consumers, partition, what = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
t = time.perf_counter()
ds = lodt.Dataset(path, batch_size=32, shuffle=True, seed=1, rank=0, world_size=consumers, partition=partition)
n = len(ds)
opened = time.perf_counter() - t
if what == "resume":
    with open(sys.argv[5]) as f:
        ds.load_state_dict(json.load(f))
if what == "prepare":
    # The state at 90 %: every consumer's count at 0 of a tail from there.
    state = ds.state_dict()
    loader = state["loader"]
    total = loader["sequences"]
    start = total * 9 // 10
    loader["consumed"] = {str(c): 0 for c in range(consumers)}
    if partition == "locality":
        loader["ranges"], loader["frontier"] = [[start, total]], start
    else:
        loader["frontier"] = start
    ds.load_state_dict(state)
    if partition == "round_robin":
        # What this loader saves after walking there: the same counts, and
        # the cursor of its walk (none with --no-cursor).
        it = iter(ds)
        next(it)
        saved = ds.state_dict()
        cursor = saved["loader"].pop("cursor", None)
        assert cursor is not None and cursor["position"] <= start, "a state at 90 % has a cursor"
        if sys.argv[6] == "cursor":
            state["loader"]["cursor"] = cursor
    with open(sys.argv[5], "w") as f:
        json.dump(state, f)
if what not in ("open", "prepare"):
    next(iter(ds))
print(json.dumps({"seconds": time.perf_counter() - t, "open": opened, "rss": rss() - base, "len": n}))
"""


def build(path: str, shards: int) -> None:
    """The simulated dataset: one real shard, ``shards`` names."""
    import lodt

    tokens = np.arange(4096, dtype=np.int32).reshape(-1, 1)
    lodt.write_dataset(path, [{"tokens": lodt.create_lod_tensor(tokens, [[4] * 1024])}])
    with open(os.path.join(path, "lodt-dataset.json")) as f:
        manifest = json.load(f)
    entry = manifest["shards"][0]
    real = os.path.join(path, entry["name"])
    entries = []
    for i in range(shards):
        name = f"s{i:07d}.lodt"
        if i % 60_000 == 0:  # a file has at most 65,000 links on ext4: copies of it
            shutil.copyfile(real, os.path.join(path, name))
            source = os.path.join(path, name)
        else:
            os.link(source, os.path.join(path, name))
        entries.append({**entry, "name": name})
    os.remove(real)
    manifest["shards"] = entries
    # An edited manifest names no index (spec/DATASET.md 3.2); write_index
    # then writes one for it.
    manifest.pop("index", None)
    for name in os.listdir(path):
        if name.startswith("lodt-dataset.index."):
            os.remove(os.path.join(path, name))
    with open(os.path.join(path, "lodt-dataset.json"), "w") as f:
        json.dump(manifest, f, separators=(",", ":"))
    assert lodt.write_index(path)


def index_of(path: str) -> str:
    """The path of the dataset's shard index."""
    (name,) = [n for n in os.listdir(path) if n.startswith("lodt-dataset.index.")]
    return os.path.join(path, name)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shards", default="100000,1000000")
    p.add_argument("--consumers", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--dir", default=None)
    p.add_argument("--listings", default="index,json")
    p.add_argument("--no-cursor", action="store_true", help="resume round robin from a state without its cursor")
    a = p.parse_args()
    root = a.dir or tempfile.mkdtemp(prefix="lodt-open-")
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| shards | manifest MB | index MB | listing | partition | step | seconds (median) | RSS over baseline, MB |")
    print("|---:|---:|---:|---|---|---|---:|---:|")
    for shards in [int(x) for x in a.shards.split(",")]:
        path = os.path.join(root, f"ds-{shards}")
        if not os.path.exists(os.path.join(path, "lodt-dataset.json")):
            build(path, shards)
        mb = os.path.getsize(os.path.join(path, "lodt-dataset.json")) / 1e6
        index = index_of(path)
        index_mb = os.path.getsize(index) / 1e6
        for listing in a.listings.split(","):
            if listing == "json":
                os.rename(index, index + ".aside")
            try:
                for partition in ("round_robin", "locality"):
                    state = os.path.join(root, f"state-{shards}-{partition}.json")
                    cursor = "none" if a.no_cursor else "cursor"
                    subprocess.run(
                        [sys.executable, "-c", _CHILD, path, str(a.consumers), partition, "prepare", state, cursor],
                        capture_output=True, text=True, check=True,
                    )
                    for what in ("open", "first", "resume"):
                        runs = []
                        for _ in range(a.reps):
                            out = subprocess.run(
                                [sys.executable, "-c", _CHILD, path, str(a.consumers), partition, what, state],
                                capture_output=True, text=True, check=True,
                            )
                            runs.append(json.loads(out.stdout))
                        secs = statistics.median(r["seconds"] for r in runs)
                        rss = statistics.median(r["rss"] for r in runs) / 1e6
                        print(f"| {shards:,} | {mb:.0f} | {index_mb:.0f} | {listing} | {partition} | {what} | {secs:.2f} | {rss:.0f} |", flush=True)
            finally:
                if listing == "json":
                    os.rename(index + ".aside", index)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
