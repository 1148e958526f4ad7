"""What the body checks of every copied batch (spec/FORMAT.md 7.1, issue 28
section 2) cost: reads of every batch of a `.lodt` file from moto's S3 server,
from the disk cache (every read a hit) and with positional reads (the file in
the page cache), by `examples/checked_reads.rs` built from two commits: one
without the checks (BASE) and one with them (NEW). Also what
`check_bodies` costs a memory map (NEW alone: `mmap-check` against `mmap`).

    cargo build --release --features remote --example checked_reads   # in each tree
    python3 bench/checked_reads.py --base BASE_BIN --new NEW_BIN [--reps 7]

The two builds run alternately (their order swapped every repetition), each
run timing `--passes` passes of its own; every figure is the median of all
the passes of one build and mode: wall time, and the process's CPU time
(every thread's), which other processes on a busy machine disturb less. moto's server (`python -m moto.server`, from
the Python that runs this script) is started on 127.0.0.1 and stopped at the
end. Prints a table (and `--json FILE` keeps every pass).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline:
                proc.kill()
                raise RuntimeError("moto did not start")
            time.sleep(0.1)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/bench", method="PUT")
    urllib.request.urlopen(req, timeout=60).close()
    return proc, port


def upload(port: int, key: str, data: bytes) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/bench/{key}",
        data=data,
        method="PUT",
        headers={"Content-Type": "application/octet-stream"},
    )
    urllib.request.urlopen(req, timeout=600).close()


def run(binary: str, args: list[str], env: dict) -> list[tuple[float, float]]:
    """(wall, cpu) seconds of each pass."""
    out = subprocess.run([binary, *args], capture_output=True, text=True, env=env, check=True)
    return [(float(line.split()[1]), float(line.split()[2])) for line in out.stdout.splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="checked_reads built without the checks")
    ap.add_argument("--new", required=True, help="checked_reads built with the checks")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--local-batches", type=int, default=64, help="batches of the local file (4 MiB each)")
    ap.add_argument("--s3-batches", type=int, default=16, help="batches of the S3 object (4 MiB each)")
    ap.add_argument("--modes", default="s3,cache,pread,mmap,mmap-check")
    ap.add_argument("--json", help="write every pass here")
    args = ap.parse_args()
    modes = args.modes.split(",")

    work = tempfile.mkdtemp(prefix="lodt-checked-reads-")
    local = os.path.join(work, "local.lodt")
    remote = os.path.join(work, "remote.lodt")
    subprocess.run([args.new, "write", local, str(args.local_batches), "4096"], check=True)
    subprocess.run([args.new, "write", remote, str(args.s3_batches), "4096"], check=True)
    proc, port = start_moto()
    try:
        with open(remote, "rb") as f:
            upload(port, "remote.lodt", f.read())
        env = {**os.environ, "BENCH_S3_ENDPOINT": f"http://127.0.0.1:{port}"}
        uri = "s3://bench/remote.lodt"
        times: dict = {(m, b): [] for m in modes for b in ("base", "new")}
        for rep in range(args.reps):
            order = [("base", args.base), ("new", args.new)]
            if rep % 2:
                order.reverse()
            for mode in modes:
                for which, binary in order:
                    if mode == "mmap-check" and which == "base":
                        continue  # no such option without the checks
                    if mode in ("s3", "cache"):
                        cache = tempfile.mkdtemp(dir=work, prefix="cache-")
                        cmd = [mode, uri, str(args.passes), cache]
                    else:
                        cmd = [mode, local, str(args.passes)]
                    times[(mode, which)] += run(binary, cmd, env)
        sizes = {"s3": os.path.getsize(remote), "cache": os.path.getsize(remote)}
        sizes["pread"] = sizes["mmap"] = sizes["mmap-check"] = os.path.getsize(local)
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; "
              f"{args.reps} reps x {args.passes} passes per build and mode")
        print(f"{'mode':10} {'MiB':>5} {'wall: unchecked s':>18} {'checked s':>10} {'cost':>7}"
              f" {'cpu: unchecked s':>17} {'checked s':>10} {'cost':>7} {'checked GB/s':>13}")
        for mode in modes:
            # check_bodies on a map is against the same build's plain map.
            base_key = ("mmap", "new") if mode == "mmap-check" else (mode, "base")
            row = []
            for i in (0, 1):
                base = statistics.median(t[i] for t in times[base_key])
                new = statistics.median(t[i] for t in times[(mode, "new")])
                row.append((base, new, (new / base - 1) * 100 if base else float("nan")))
            (bw, nw, cw), (bc, nc, cc) = row
            print(f"{mode:10} {sizes[mode] / 2**20:5.0f} {bw:18.4f} {nw:10.4f} {cw:+6.1f}%"
                  f" {bc:17.4f} {nc:10.4f} {cc:+6.1f}% {sizes[mode] / nw / 1e9:13.2f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({f"{m}/{b}": v for (m, b), v in times.items()}, f, indent=1)
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    main()
