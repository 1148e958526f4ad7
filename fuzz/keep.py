#!/usr/bin/env python3
"""Keeps a target's corpus in the repository, so the next campaign (on a new
machine) starts where the last one stopped instead of from the seeds.

    python3 keep.py TARGET      # after a campaign: corpus/TARGET -> kept/TARGET.tar.xz

libFuzzer minimizes the corpus first (`-set_cover_merge=1`: the fewest inputs
that together reach every feature the corpus reaches), then the inputs are
packed in name order with fixed times and owners, so the same corpus gives the
same archive. `campaign.py` unpacks kept/TARGET.tar.xz into corpus/TARGET
before it starts (files already there are left alone).
"""
import argparse
import io
import os
import subprocess
import tarfile
import tempfile

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("target")
a = ap.parse_args()

corpus = f"corpus/{a.target}"
if not os.path.isdir(corpus) or not os.listdir(corpus):
    raise SystemExit(f"{corpus} is empty: run a campaign first")
os.makedirs("kept", exist_ok=True)
with tempfile.TemporaryDirectory(dir=".") as minimal:
    cmd = ["cargo", "fuzz", "run", "-O", a.target, minimal, corpus, "--",
           "-set_cover_merge=1", "-max_len=65536", "-rss_limit_mb=2048", "-malloc_limit_mb=2048",
           "-timeout=10", f"-artifact_prefix=artifacts/{a.target}/"]
    subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL,
                   env=dict(os.environ, RUSTC_BOOTSTRAP="1"))
    names = sorted(os.listdir(minimal))
    out = f"kept/{a.target}.tar.xz"
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w:xz") as tar:
        for name in names:
            data = open(os.path.join(minimal, name), "rb").read()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, out)
print(f"kept {len(names)} of {len(os.listdir(corpus))} inputs in {out} ({os.path.getsize(out)} bytes)")
