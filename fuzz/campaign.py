#!/usr/bin/env python3
"""Runs one foreign-format fuzz target until its edge coverage (libFuzzer's
`cov:`) has not grown for FLAT seconds, or CAP seconds have passed, then
stops it (SIGINT, so libFuzzer prints its final stats). Every line of the
run goes to LOGDIR/TARGET.log with the seconds since the start; the last line
is a summary. A crash, timeout or OOM ends the run early (rc != 0) and leaves
its input in artifacts/TARGET/.

Run from fuzz/ (the corpus grows in corpus/TARGET, seeded from seeds/TARGET
and, if there is one, from the corpus an earlier campaign kept with keep.py,
kept/TARGET.tar.xz):

    python3 campaign.py TARGET [--flat 600] [--cap 2700] [--logdir logs]
"""
import argparse
import os
import re
import signal
import subprocess
import tarfile
import threading
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("target")
ap.add_argument("--flat", type=float, default=600)
ap.add_argument("--cap", type=float, default=2700)
ap.add_argument("--logdir", default="logs")
a = ap.parse_args()

for d in (f"corpus/{a.target}", f"artifacts/{a.target}", a.logdir):
    os.makedirs(d, exist_ok=True)
# The corpus an earlier campaign kept (keep.py), if any: only plain files, by
# their base names, and none that is already in the corpus.
kept = f"kept/{a.target}.tar.xz"
if os.path.exists(kept):
    with tarfile.open(kept) as tar:
        for member in tar:
            name = os.path.basename(member.name)
            path = os.path.join(f"corpus/{a.target}", name)
            if member.isfile() and name and not os.path.exists(path):
                with open(path, "wb") as f:
                    f.write(tar.extractfile(member).read())
cmd = ["cargo", "fuzz", "run", "-O", a.target, f"corpus/{a.target}", f"seeds/{a.target}", "--",
       "-max_len=65536", "-rss_limit_mb=2048", "-malloc_limit_mb=2048", "-timeout=10",
       "-print_final_stats=1", f"-artifact_prefix=artifacts/{a.target}/"]
log = open(os.path.join(a.logdir, f"{a.target}.log"), "a")
start = time.time()
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        text=True, errors="replace", env=dict(os.environ, RUSTC_BOOTSTRAP="1"),
                        start_new_session=True)
state = {"cov": -1, "grew": start, "stopped": None}


def watchdog():
    while proc.poll() is None:
        now = time.time()
        if state["cov"] >= 0 and now - state["grew"] > a.flat:
            state["stopped"] = f"cov flat for {a.flat:.0f} s"
        elif now - start > a.cap:
            state["stopped"] = f"cap of {a.cap:.0f} s"
        if state["stopped"]:
            # To the whole group: cargo does not pass a signal on to the fuzzer.
            os.killpg(proc.pid, signal.SIGINT)
            return
        time.sleep(5)


threading.Thread(target=watchdog, daemon=True).start()
last = ""
for line in proc.stdout:
    log.write(f"{time.time() - start:8.1f} {line}")
    log.flush()
    m = re.search(r"cov: (\d+) ft: (\d+)", line)
    if m:
        if int(m.group(1)) > state["cov"]:
            state["cov"], state["grew"] = int(m.group(1)), time.time()
        last = line.strip()
rc = proc.wait()
summary = (f"SUMMARY {a.target}: rc={rc} stopped by: {state['stopped']}; wall {time.time() - start:.0f} s; "
           f"cov last grew at {state['grew'] - start:.0f} s; last status: {last}")
log.write(summary + "\n")
log.close()
print(summary)
