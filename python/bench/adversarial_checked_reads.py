"""An adversarial pass over issue 28's sections 2 and 4 (checked reads, no
hangs): random single-byte flips delivered through the fault proxy in front
of moto's S3 server and through positional reads, and FIFOs, devices and
truncated files given as inputs. Prints counts per outcome.

    PYTHONPATH=target/pylib:python/tests python python/bench/adversarial_checked_reads.py \
        --lodt-cli target/debug/lodt [--seed 28] [--flips 15]

Flip outcomes: ``detected`` (an error), ``harmless`` (no error and every
tensor equal to the original: the byte was padding no check covers, or
outside what was read), ``UNDETECTED`` (a tensor differs: a wrong value
reached the user). Input outcomes: ``clean error`` (an exception or a
non-zero exit with a message, within the time limit), ``ok`` (read right),
``HANG`` (killed after 30 s), ``CRASH`` (a signal).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

import lodt
from conftest import free_port, start_server
from fault_proxy import Fault, FaultProxy
from test_remote import _upload


def _file_batches(n: int, rows: int) -> list[dict]:
    out = []
    for k in range(n):
        v = (np.arange(rows * 4, dtype=np.float32) + k * 1e6).reshape(rows, 4)
        lens = [rows // 4] * 3 + [rows - 3 * (rows // 4)]
        out.append({"v": lodt.create_lod_tensor(v, [lens]), "id": np.arange(4, dtype=np.int64) + 4 * k})
    return out


def _arrays(f) -> list[dict]:
    return [{name: np.array(f[k][name]) for name in ("v", "id")} for k in range(len(f))]


def _same(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x[n], y[n]) for x, y in zip(a, b) for n in ("v", "id")
    )


def _read_dataset(location: str, **kwargs) -> tuple[list[int], float]:
    """Every sequence id of a dataset, sorted, and the sum of its ``v`` values."""
    ids, vs = [], 0.0
    for b in lodt.Dataset(location, batch_size=500, **kwargs):
        ids += [int(i) for i in np.array(b["id"]).ravel()]
        vs += float(np.array(b["v"]).sum())
    return sorted(ids), vs


def _positions(rng: random.Random, data: bytes, bodies: list[tuple[int, int]], count: int) -> list[int]:
    """Half inside tensor bodies, half outside them (headers, metadata, LoD,
    checksum tables, padding, footer)."""
    out = []
    for i in range(count):
        if i % 2 == 0:
            start, end = rng.choice(bodies)
            out.append(rng.randrange(start, end))
        else:
            while True:
                pos = rng.randrange(len(data))
                if not any(s <= pos < e for s, e in bodies):
                    out.append(pos)
                    break
    return out


def _bodies(data: bytes, batches: list[dict]) -> list[tuple[int, int]]:
    out = []
    for b in batches:
        for name in ("v", "id"):
            raw = np.array(b[name]).tobytes() if name == "id" else np.array(b["v"]).tobytes()
            at = data.find(raw)
            assert at >= 0
            out.append((at, at + len(raw)))
    return out


def flips(rng: random.Random, count: int, tmp: str) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    batches = _file_batches(6, 16_000)  # ~300 KiB a batch: ranged GETs after the open's 256 KiB
    path = os.path.join(tmp, "orig.lodt")
    lodt.save(path, batches)
    data = open(path, "rb").read()
    want = _arrays(lodt.open(path))
    bodies = _bodies(data, batches)
    # Through the proxy, in front of moto.
    port = free_port()
    moto = start_server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port, "moto")
    try:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/data", method="PUT"), timeout=60).close()
        _upload(port, "adv.lodt", data)
        options = {
            "aws_allow_http": "true",
            "aws_access_key_id": "test",
            "aws_secret_access_key": "test",
            "aws_region": "us-east-1",
        }
        for i, pos in enumerate(_positions(rng, data, bodies, count)):
            with FaultProxy(port) as proxy:
                proxy.add(Fault("flip", method="GET", path="adv.lodt", at=pos, times=None, mask=1 << rng.randrange(8)))
                opts = {**options, "aws_endpoint": proxy.endpoint}
                where = "body" if any(s <= pos < e for s, e in bodies) else "elsewhere"
                try:
                    f = lodt.open("s3://data/adv.lodt", storage_options=opts)
                    got = _arrays(f)
                    outcome = "harmless" if _same(got, want) else "UNDETECTED"
                except Exception:
                    outcome = "detected"
                counts[("proxy File", where, outcome)] += 1
        # Through the proxy, a dataset whose one shard is the file.
        ds_local = os.path.join(tmp, "ds")
        lodt.write_dataset(ds_local, batches, shard_bytes=1 << 30)
        (shard,) = [p for p in os.listdir(ds_local) if p.endswith(".lodt")]
        for p in os.listdir(ds_local):
            _upload(port, f"advds/{p}", open(os.path.join(ds_local, p), "rb").read())
        sdata = open(os.path.join(ds_local, shard), "rb").read()
        sbodies = _bodies(sdata, batches)
        want_ds = _read_dataset(ds_local)
        for pos in _positions(rng, sdata, sbodies, count):
            with FaultProxy(port) as proxy:
                proxy.add(Fault("flip", method="GET", path=shard, at=pos, times=None, mask=1 << rng.randrange(8)))
                opts = {**options, "aws_endpoint": proxy.endpoint}
                where = "body" if any(s <= pos < e for s, e in sbodies) else "elsewhere"
                try:
                    got = _read_dataset("s3://data/advds", storage_options=opts)
                    outcome = "harmless" if got == want_ds else "UNDETECTED"
                except Exception:
                    outcome = "detected"
                counts[("proxy Dataset", where, outcome)] += 1
    finally:
        moto.kill()
        moto.wait()
    # Positional reads (File(mmap=False) reads into memory; Dataset(mmap=False) uses pread).
    for pos in _positions(rng, data, bodies, count):
        bad = bytearray(data)
        bad[pos] ^= 1 << rng.randrange(8)
        p = os.path.join(tmp, "flipped.lodt")
        open(p, "wb").write(bad)
        where = "body" if any(s <= pos < e for s, e in bodies) else "elsewhere"
        try:
            outcome = "harmless" if _same(_arrays(lodt.File(p, mmap=False)), want) else "UNDETECTED"
        except Exception:
            outcome = "detected"
        counts[("pread File", where, outcome)] += 1
    for pos in _positions(rng, sdata, sbodies, count):
        bad = bytearray(sdata)
        bad[pos] ^= 1 << rng.randrange(8)
        open(os.path.join(ds_local, shard), "wb").write(bad)
        where = "body" if any(s <= pos < e for s, e in sbodies) else "elsewhere"
        try:
            outcome = "harmless" if _read_dataset(ds_local, mmap=False) == want_ds else "UNDETECTED"
        except Exception:
            outcome = "detected"
        counts[("pread Dataset", where, outcome)] += 1
    return counts


def _child(code: str) -> str:
    try:
        done = subprocess.run([sys.executable, "-c", "import lodt\n" + textwrap.dedent(code)],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "HANG"
    if done.returncode < 0:
        return "CRASH"
    out = done.stdout.strip()
    return out if out in ("ok", "clean error") else f"CRASH ({done.returncode}: {done.stderr[-200:]})"


def _py(call: str) -> str:
    return _child(f"""
        try:
            {call}
        except Exception as e:
            print("clean error" if str(e) else "CRASH (empty message)")
        else:
            print("ok")
        """)


def _cli(cli: str, args: list[str]) -> str:
    try:
        done = subprocess.run([cli, *args], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "HANG"
    if done.returncode < 0 or "panicked" in done.stderr:
        return "CRASH"
    return "clean error" if done.returncode != 0 and done.stderr.strip() else "ok"


def inputs(rng: random.Random, cli: str, tmp: str) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    fifo = os.path.join(tmp, "pipe.lodt")
    os.mkfifo(fifo)
    fparquet = os.path.join(tmp, "pipe.parquet")
    os.mkfifo(fparquet)
    farrow = os.path.join(tmp, "pipe.arrow")
    os.mkfifo(farrow)
    out = os.path.join(tmp, "out.lodt")
    for call in ["lodt.open(p)", "lodt.open(p, mmap=False)", "lodt.File(p, check_bodies=True)", "lodt.verify(p)"]:
        counts[("FIFO .lodt", "python", _py(f"p = {fifo!r}; {call}"))] += 1
    for a in (["info"], ["info", "--no-mmap"], ["verify"], ["verify", "--no-mmap"], ["info", "--check-bodies"]):
        counts[("FIFO .lodt", "cli", _cli(cli, [*a, fifo]))] += 1
    for p in (fparquet, farrow):
        counts[("FIFO parquet/arrow", "python", _py(f"lodt.convert({p!r}, {out!r})"))] += 1
        for a in (["head", "-n", "1"], ["stats"], ["info"]):
            counts[("FIFO parquet/arrow", "cli", _cli(cli, [*a, p]))] += 1
    ds = os.path.join(tmp, "fifods")
    lodt.write_dataset(ds, [{"v": np.arange(4, dtype=np.int64) + k} for k in range(6)], shard_bytes=1)
    shards = sorted(p for p in os.listdir(ds) if p.endswith(".lodt"))
    victim = os.path.join(ds, shards[rng.randrange(len(shards))])
    os.remove(victim)
    os.mkfifo(victim)
    for mmap in (True, False):
        counts[("FIFO shard", "python", _py(f"list(lodt.Dataset({ds!r}, batch_size=2, mmap={mmap}))"))] += 1
    for a in (["verify"], ["verify", "--no-mmap"]):
        counts[("FIFO shard", "cli", _cli(cli, [*a, ds]))] += 1
    link = os.path.join(tmp, "zero.lodt")
    os.symlink("/dev/zero", link)
    for dev in ("/dev/zero", "/dev/null", "/dev/urandom", link):
        counts[("device", "python", _py(f"lodt.open({dev!r})"))] += 1
        counts[("device", "python", _py(f"lodt.open({dev!r}, mmap=False)"))] += 1
        counts[("device", "cli", _cli(cli, ["info", dev]))] += 1
    # Truncated files: before opening, and (positional reads) after.
    src = os.path.join(tmp, "t.lodt")
    lodt.save(src, _file_batches(4, 4000))
    data = open(src, "rb").read()
    for i in range(5):
        cut = rng.randrange(1, len(data))
        p = os.path.join(tmp, f"cut{i}.lodt")
        open(p, "wb").write(data[:cut])
        counts[("truncated before open", "python", _py(f"f = lodt.open({p!r}); [f[k] for k in range(len(f))]"))] += 1
        counts[("truncated before open", "cli", _cli(cli, ["verify", p]))] += 1
    for i in range(5):
        ds = os.path.join(tmp, f"late{i}")
        lodt.write_dataset(ds, _file_batches(6, 4000), shard_bytes=1 << 30)
        (shard,) = [os.path.join(ds, p) for p in os.listdir(ds) if p.endswith(".lodt")]
        cut = rng.randrange(64, os.path.getsize(shard) // 2)
        code = f"""
            import os
            it = iter(lodt.Dataset({ds!r}, batch_size=1, mmap=False, prefetch=0))
            next(it)
            os.truncate({shard!r}, {cut})
            try:
                list(it)
            except Exception as e:
                print("clean error")
            else:
                print("ok")
            """
        counts[("truncated after open (Dataset mmap=False)", "python", _child(code))] += 1
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lodt-cli", required=True)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--flips", type=int, default=15, help="flips per way (4 ways)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        fc = flips(rng, args.flips, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        ic = inputs(rng, args.lodt_cli, tmp)
    print("single-byte flips (way, where, outcome): count")
    for k, v in sorted(fc.items()):
        print(f"  {k}: {v}")
    print(f"  total {sum(fc.values())}: " + ", ".join(
        f"{o} {sum(v for k, v in fc.items() if k[2] == o)}" for o in ("detected", "harmless", "UNDETECTED")))
    print("FIFO / device / truncated inputs (what, via, outcome): count")
    for k, v in sorted(ic.items()):
        print(f"  {k}: {v}")
    outcomes = collections.Counter()
    for k, v in ic.items():
        outcomes[k[2]] += v
    print(f"  total {sum(ic.values())}: " + ", ".join(f"{o} {n}" for o, n in sorted(outcomes.items())))


if __name__ == "__main__":
    main()
