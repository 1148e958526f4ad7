"""How well each partition shuffles: the round-robin deal and the locality
partition (``spec/DATASET.md`` 7.1, 7.6) over one dataset, at 1 and at 8
consumers, against a uniform permutation (numpy) as the reference.

    python python/bench/bench_shuffle_quality.py [--sequences 262144] [--batch 64] [--shards 64] [--buffer 16384]

The dataset: ``--sequences`` one-row sequences (the row is the id) in
``--shards`` shards of batches of ``--batch``. Per consumer, over one
epoch's stream of ids (what it delivers, in order), and averaged over the
consumers:

  rho        Spearman's correlation between the delivery step and the id (the
             dataset order): 0 for a uniform permutation
  gap        the mean |id[k+1] - id[k]| / N of neighbouring deliveries: 1/3 for
             a uniform permutation, small when neighbours are close in the
             dataset
  same       the share of neighbouring deliveries from one file batch:
             about batch / N for a uniform permutation
  minibatch  the mean number of distinct file batches among 32 consecutive
             deliveries (a mini-batch): up to 32
  batches    the file batches a consumer needs over N / C (what its share
             would need if it were packed): 1 at best, C at worst

No timing: the figures are the same on any machine.
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

import lodt


def _write(path: str, n: int, batch: int, shards: int) -> int:
    """Writes the dataset; returns its number of shards."""
    ids = np.arange(n, dtype=np.int64)
    batches = [
        {"id": lodt.create_lod_tensor(ids[s:s + batch].reshape(-1, 1), [[1] * len(ids[s:s + batch])])}
        for s in range(0, n, batch)
    ]
    with tempfile.TemporaryDirectory() as probe:  # one batch's bytes in a shard
        lodt.write_dataset(probe, batches[:2])
        one = lodt.Dataset(probe).num_bytes // 2
    per_shard = -(-len(batches) // shards)
    lodt.write_dataset(path, batches, shard_bytes=per_shard * one)
    return lodt.Dataset(path).num_shards


def _metrics(stream: np.ndarray, n: int, batch: int, consumers: int) -> dict[str, float]:
    k = np.arange(len(stream), dtype=np.float64)
    rank = np.empty(len(stream), dtype=np.float64)
    rank[np.argsort(stream, kind="stable")] = k
    rho = float(np.corrcoef(k, rank)[0, 1]) if len(stream) > 1 else 0.0
    d = np.abs(np.diff(stream.astype(np.int64)))
    b = stream // batch
    groups = [len(np.unique(b[i:i + 32])) for i in range(0, len(b) - 31, 32)]
    return {
        "rho": rho,
        "gap": float(d.mean()) / n,
        "same": float((np.diff(b) == 0).mean()),
        "minibatch": float(np.mean(groups)),
        "batches": len(np.unique(b)) / (len(stream) / batch),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sequences", type=int, default=262_144)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--buffer", type=int, default=16_384)
    a = p.parse_args()
    n = a.sequences
    with tempfile.TemporaryDirectory() as tmp:
        shards = _write(tmp, n, a.batch, a.shards)
        print(f"{n} sequences, batches of {a.batch}, {shards} shards, shuffle_buffer {a.buffer}")
        print("| consumers | order | rho | gap | same batch | batches per mini-batch of 32 | batches needed / share's |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for consumers in (1, 8):
            rows = {}
            for partition in ("round_robin", "locality"):
                per = []
                for c in range(consumers):
                    ds = lodt.Dataset(tmp, batch_size=1024, shuffle=True, seed=1, shuffle_buffer=a.buffer,
                                      rank=c, world_size=consumers, return_ids=True, partition=partition)
                    stream = np.concatenate([ids for ids, _ in ds])
                    per.append(_metrics(stream, n, a.batch, consumers))
                rows[partition] = {key: float(np.mean([m[key] for m in per])) for key in per[0]}
            uniform = np.random.default_rng(1).permutation(n)
            rows["uniform (numpy)"] = _metrics(uniform[: n // consumers], n, a.batch, consumers)
            for name, m in rows.items():
                print(f"| {consumers} | {name} | {m['rho']:.4f} | {m['gap']:.4f} | {m['same']:.4f} | "
                      f"{m['minibatch']:.1f} | {m['batches']:.2f} |")


if __name__ == "__main__":
    main()
