"""An adversarial pass over loader states: real states of plain, packed and
mixture loaders (0, 1 or 2 DataLoader workers, a random number of steps),
each with one field changed at random, loaded and resumed. Prints counts
per outcome.

    PYTHONPATH=python/tests python python/bench/adversarial_states.py [--trials 120] [--seed 42] \
        [--kinds plain,packed,mixture]

Outcomes: ``refused at load`` (load_state_dict raised ValueError),
``resumed`` (accepted, and the resumed pass delivered no sequence twice and,
where the change only adds to what was consumed, none the saved run had
already delivered), and the failures: ``BUG AT LOAD`` (another exception, a
panic among them), ``FAILED LATE`` (accepted, then iteration raised),
``TWICE`` (a sequence delivered twice, or again after the checkpoint).
"""

from __future__ import annotations

import argparse
import collections
import copy
import random
import tempfile

import numpy as np

import lodt
import lodt.torch as lt


def _batches(first: int, count: int) -> list[dict]:
    out = []
    for k in range(count):
        n = 20
        lengths = [(first + k * n + i) % 5 + 1 for i in range(n)]
        ids = np.arange(first + k * n, first + (k + 1) * n, dtype=np.int64).reshape(n, 1)
        tokens = np.repeat(ids.ravel(), lengths).astype(np.int32).reshape(-1, 1)
        out.append({"id": lodt.create_lod_tensor(ids, [[1] * n]), "tokens": lodt.create_lod_tensor(tokens, [lengths])})
    return out


def _make(kind: str, dirs: list[str]) -> lodt.Dataset:
    if kind == "mixture":
        return lodt.Mixture([lodt.Dataset(d) for d in dirs], [1, 1], seed=3, shuffle=True, batch_size=4, return_ids=True)
    extra = {"pack_tokens": 10} if kind == "packed" else {}
    return lodt.Dataset(dirs[0], batch_size=4, shuffle=True, seed=5, shuffle_buffer=16, return_ids=True, **extra)


def _mutate(state: dict, rng: random.Random) -> str:
    loader = state["loader"]
    choices = ["consumed+", "consumed-key", "consumers+", "consumers-", "next_worker", "frontier", "skip", "epoch"]
    if loader.get("packing"):
        choices += ["carry-dup", "carry-big", "delivered"]
    what = rng.choice(choices)
    consumed = loader["consumed"]
    if what == "consumed+":
        key = rng.choice(sorted(consumed))
        consumed[key] = consumed[key] + rng.choice([1, 5, 50, 10**6])
    elif what == "consumed-key":
        consumed[str(int(loader["consumers"]) + rng.randint(0, 3))] = 0
    elif what == "consumers+":
        loader["consumers"] = int(loader["consumers"]) + rng.randint(1, 3)
    elif what == "consumers-":
        loader["consumers"] = max(0, int(loader["consumers"]) - 1)
    elif what == "next_worker":
        state["next_worker"] = rng.choice(["x", -1, 7, 2.5, None, True])
    elif what == "frontier":
        loader["frontier"] = int(loader["frontier"]) + rng.choice([1, 100, 10**9])
    elif what == "skip":
        loader["skip"] = sorted(rng.sample(range(0, 400), 3))
    elif what == "epoch":
        loader["epoch"] = int(loader["epoch"]) + 1
    else:
        windows = loader["packing"]["windows"]
        key = rng.choice(sorted(windows))
        w = windows[key]
        if what == "carry-dup":
            w["carry"] = [0, 0] if not w["carry"] else w["carry"] + w["carry"][:1]
        elif what == "carry-big":
            w["carry"] = w["carry"] + [10**6]
        else:
            w["delivered"] = int(w["delivered"]) + rng.choice([1, 10**4])
    return what


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=120)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--kinds", default="plain,packed,mixture", help="comma-separated loader kinds")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    outcomes: collections.Counter = collections.Counter()
    per_class: collections.Counter = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [f"{tmp}/a", f"{tmp}/b"]
        lodt.write_dataset(dirs[0], _batches(0, 6), shard_bytes=1500, fsync=False)
        lodt.write_dataset(dirs[1], _batches(1000, 4), shard_bytes=1500, fsync=False)
        for trial in range(args.trials):
            kind = rng.choice(args.kinds.split(","))
            workers = rng.choice([0, 1, 2])
            ds = _make(kind, dirs)
            it = iter(lt.DataLoader(ds, num_workers=workers))
            head = [int(i) for _ in range(rng.randint(1, 6)) for i in next(it)[0]]
            state = ds.state_dict()
            del it
            bad = copy.deepcopy(state)
            what = _mutate(bad, rng)
            per_class[what] += 1
            resumed = _make(kind, dirs)
            try:
                resumed.load_state_dict(bad)
            except ValueError:
                outcomes[(what, "refused at load")] += 1
                continue
            except Exception as e:  # noqa: BLE001 - counted: a bug (a panic is a RuntimeError)
                outcomes[(what, "BUG AT LOAD")] += 1
                print(f"trial {trial} ({kind}, {workers} workers, {what}): {type(e).__name__}: {e}")
                continue
            try:
                rest = [int(i) for ids, _ in lt.DataLoader(resumed, num_workers=workers) for i in ids]
            except Exception as e:  # noqa: BLE001 - counted
                outcomes[(what, "FAILED LATE")] += 1
                print(f"trial {trial} ({kind}, {workers} workers, {what}): accepted, then {e}")
                continue
            # More consumed never delivers the head again; a moved frontier,
            # skip list, epoch or consumer count is another (valid) position
            # whose rest may hold sequences of the head.
            again = what in ("consumed+", "delivered") and set(rest) & set(head)
            twice = len(rest) != len(set(rest)) or again
            if twice:
                outcomes[(what, "TWICE")] += 1
                print(f"trial {trial} ({kind}, {workers} workers, {what}): a sequence delivered twice")
            else:
                outcomes[(what, "resumed")] += 1
    for (what, outcome), n in sorted(outcomes.items()):
        print(f"{what:14} {outcome:16} {n}")
    print(f"trials: {args.trials}; per class: {dict(sorted(per_class.items()))}")


if __name__ == "__main__":
    main()
