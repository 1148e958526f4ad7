"""An adversarial run of lost answers to manifest writes (issue 28 §1): not
a test (slow), a script. Usage::

    PYTHONPATH=target/pylib python python/tests/adversarial_lost_answers.py [TRIALS] [SEED]

Starts moto's S3 server and the fault proxy on 127.0.0.1. Each trial picks
a write (create, append, two parts and their merge) and a fault on the
conditional PUT of the manifest it commits (the answer dropped after the
server committed, on one attempt or on every attempt with the manifest then
unreadable; a stall past the client's timeout; a 500 in place of a
committed write's answer; a 500 before the server saw it, once or always).
A call that fails saying the outcome is unknown or not committed is retried
with the same commit id, as its error advises. Then the dataset must hold
every sequence written exactly once, and every answer must have told the
truth: success only if the data is in, "not committed" or a conflict only
if it is not. Prints the counts.

``--baseline`` runs the same trials as a lodt without commit ids would be
used (no ``commit_id``; a failed write is written again, as its error
advised): the counts of the behaviour this script guards against.
"""

from __future__ import annotations

import json
import random
import sys
import urllib.request

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])

import lodt  # noqa: E402
from conftest import free_port, start_server  # noqa: E402
from fault_proxy import Fault, FaultProxy, conditional  # noqa: E402

KINDS = ["drop_once", "drop_always_unreadable", "stall", "500_after_commit", "500_first", "500_always"]
OPS = ["create", "append", "parts"]


def faults(kind: str, path: str, reads_before: int) -> list[Fault]:
    """The rules of fault ``kind`` on the conditional PUTs of ``path``;
    ``reads_before``: the GETs of ``path`` the write makes before it commits
    (an unreadable manifest becomes unreadable after them)."""
    put = dict(method="PUT", path=path, when=conditional)
    if kind == "drop_once":
        return [Fault("drop_response", **put)]
    if kind == "drop_always_unreadable":
        return [
            Fault("drop_response", times=None, **put),
            Fault("status", method="GET", path=path, status=503, times=None, skip=reads_before),
        ]
    if kind == "stall":
        return [Fault("stall", seconds=3, **put)]
    if kind == "500_after_commit":
        return [Fault("status_after", status=500, **put)]
    if kind == "500_first":
        return [Fault("status", status=500, **put)]
    return [Fault("status", status=500, times=None, **put)]  # 500_always


def ids(uri: str, o: dict) -> list[int]:
    try:
        ds = lodt.Dataset(uri, storage_options=o)
    except FileNotFoundError:
        return []
    return [int(i) for b in ds for i in np.array(b["id"]).ravel().tolist()]


def in_manifest(uri: str, o: dict, commit_id: str) -> bool:
    try:
        m = json.loads(lodt._lodt.DatasetReader(uri, storage_options=o).manifest_json())
    except FileNotFoundError:
        return False
    return commit_id in m["commits"]


def main() -> None:
    baseline = "--baseline" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--baseline"]
    trials = int(args[0]) if args else 36
    rng = random.Random(int(args[1]) if len(args) > 1 else 28)
    ids_kw = (lambda c: {}) if baseline else (lambda c: {"commit_id": c})
    port = free_port()
    moto = start_server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port, "moto")
    counts = {"trials": 0, "duplicated": 0, "not_exactly_once": 0, "wrong_results": 0, "retried": 0}
    outcomes: dict[str, int] = {}
    try:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/data", method="PUT")).close()
        with FaultProxy(port) as proxy:
            o = {
                "aws_endpoint": proxy.endpoint, "aws_allow_http": "true", "aws_access_key_id": "t",
                "aws_secret_access_key": "t", "aws_region": "us-east-1", "timeout": "2s",
            }
            for t in range(trials):
                kind, op = KINDS[t % len(KINDS)], rng.choice(OPS)
                uri = f"s3://data/adv-{t}"
                base = list(range(5)) if op == "append" else []
                if base:
                    lodt.write_dataset(uri, [{"id": np.arange(5)}], storage_options=o)
                new = list(range(1000 * (t + 1), 1000 * (t + 1) + 7))
                cid = f"trial-{t}"

                def attempt() -> str:
                    """One attempt of the write; what it answered."""
                    try:
                        if op == "parts":
                            for k, part in enumerate((new[:3], new[3:])):
                                lodt.write_dataset(
                                    uri, [{"id": np.array(part)}], mode="part", writer_id=f"w{k}",
                                    storage_options=o, **ids_kw(f"{cid}-w{k}"),
                                )
                            lodt.commit_parts(uri, storage_options=o, **ids_kw(cid))
                        else:
                            lodt.write_dataset(
                                uri, [{"id": np.array(new)}], mode=op, storage_options=o, **ids_kw(cid)
                            )
                        return "success"
                    except FileExistsError:
                        return "exists"
                    except BlockingIOError as e:
                        return getattr(e, "outcome", "conflict")
                    except OSError as e:
                        return getattr(e, "outcome", "error")

                target = "lodt-dataset.json" if op != "parts" else rng.choice(["lodt-dataset.json", "lodt-dataset.part."])
                # GETs before the commit: the writer's start; for a merge, each
                # part writer's start and the merge's own read.
                reads = 3 if (op, target) == ("parts", "lodt-dataset.json") else 1
                for f in faults(kind, target, reads):
                    proxy.add(f)
                answer = attempt()
                proxy.clear()
                outcomes[f"{kind}/{answer}"] = outcomes.get(f"{kind}/{answer}", 0) + 1
                got = ids(uri, o)
                present = all(i in got for i in new)
                wrong = (answer == "success" and not present) or (
                    answer in ("not committed", "conflict", "exists") and any(i in got for i in new)
                )
                if answer != "success":
                    # As the error advises: the same write again, same commit id.
                    counts["retried"] += 1
                    again = attempt()
                    wrong = wrong or again != "success"
                    got = ids(uri, o)
                counts["trials"] += 1
                counts["duplicated"] += int(any(got.count(i) > 1 for i in set(got)))
                counts["not_exactly_once"] += int(sorted(got) != sorted(base + new))
                counts["wrong_results"] += int(wrong)
                if not baseline and not in_manifest(uri, o, cid):
                    counts["wrong_results"] += 1
    finally:
        moto.kill()
        moto.wait()
    print(json.dumps(counts))
    print(json.dumps(outcomes, indent=0, sort_keys=True))


if __name__ == "__main__":
    main()
