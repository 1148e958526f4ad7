"""DataLoader worker processes over datasets on object stores: S3 (moto),
Azure (Azurite) and HTTP (a ranged file server), each a plain, a packed and
a mixture loader, with workers forked from a process that has already read
the dataset (its I/O runtime and connections exist before the fork), and
with ``spawn`` and ``forkserver``.

Each case runs in its own process under a watchdog: a crash (a signal) or a
hang fails the test with what the process printed, instead of killing or
blocking the test run; its worker processes are killed with it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import free_port, start_server

import lodt

pytest.importorskip("torch", reason="torch is not installed")

#: Seconds a case may take (imports, two workers, one epoch) before it fails.
WATCHDOG = 240

CASE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import lodt
    import lodt.torch as lt

    cfg = json.loads(sys.argv[1])
    opts = cfg["options"]

    def make():
        if cfg["kind"] == "mixture":
            sources = [lodt.Dataset(u, storage_options=opts) for u in cfg["uris"]]
            return lodt.Mixture(sources, [2, 1], seed=4, shuffle=True, batch_size=5,
                                stop="all_exhausted", return_ids=True)
        packing = {"packing": lodt.Packing(12)} if cfg["kind"] == "packed" else {}
        return lodt.Dataset(cfg["uris"][0], storage_options=opts, batch_size=5, shuffle=True,
                            seed=1, return_ids=True, **packing)

    ds = make()
    # This process reads before it forks: the runtime, the store's client and
    # its pooled connections exist when the workers are made.
    single = [int(i) for ids, _ in ds for i in ids]
    loader = lt.DataLoader(ds, num_workers=2, multiprocessing_context=cfg["context"])
    got, batches = [], 0
    for ids, _ in loader:
        got += [int(i) for i in ids]
        batches += 1
    print(json.dumps({"single": single, "workers": got, "batches": batches,
                      "consumers": ds.state_dict()["loader"]["consumers"]}))
    """
)


def _run(cfg: dict) -> dict:
    """Runs one case under the watchdog; its JSON result."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CASE, json.dumps(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=WATCHDOG)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{cfg['kind']} loader over {cfg['uris'][0]} hung for {WATCHDOG} s:\n{err[-3000:]}")
    finally:
        # Its workers, if any are left.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.returncode != 0:
        what = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        pytest.fail(f"{cfg['kind']} loader over {cfg['uris'][0]}: {what}\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _batch(first: int, n: int) -> dict:
    lengths = [(first + i) % 4 + 1 for i in range(n)]
    ids = np.arange(first, first + n, dtype=np.int64).reshape(n, 1)
    tokens = np.repeat(np.arange(first, first + n, dtype=np.int32), lengths).reshape(-1, 1)
    return {
        "id": lodt.create_lod_tensor(ids, [[1] * n]),
        "tokens": lodt.create_lod_tensor(tokens, [lengths]),
    }


def _write(uri: str, first: int, options: dict | None) -> int:
    totals = lodt.write_dataset(
        uri, [_batch(first + k * 20, 20) for k in range(5)], shard_bytes=1500, storage_options=options
    )
    assert totals["shards"] >= 3
    return totals["sequences"]


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    """Two datasets served over HTTP: ``(uris, storage_options)``."""
    root = tmp_path_factory.mktemp("http")
    _write(str(root / "a"), 0, None)
    _write(str(root / "b"), 1000, None)
    port = free_port()
    server = os.path.join(os.path.dirname(__file__), "range_server.py")
    proc = start_server([sys.executable, server, str(root), str(port)], port, "the HTTP server")
    yield [f"http://127.0.0.1:{port}/a", f"http://127.0.0.1:{port}/b"], {}
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def on_s3(s3):
    _, options = s3
    uris = ["s3://data/workers-a", "s3://data/workers-b"]
    _write(uris[0], 0, options)
    _write(uris[1], 1000, options)
    return uris, options


@pytest.fixture(scope="module")
def on_azure(azurite):
    uris = ["az://data/workers-a", "az://data/workers-b"]
    _write(uris[0], 0, azurite)
    _write(uris[1], 1000, azurite)
    return uris, azurite


def _check(result: dict, kind: str) -> None:
    assert result["consumers"] == 2
    assert result["batches"] > 2
    # The workers together deliver what one process does, each sequence once.
    assert sorted(result["workers"]) == sorted(result["single"])
    if kind != "mixture":
        assert sorted(result["workers"]) == list(range(100))
    else:
        # Both sources, every sequence of each at least once ("all_exhausted").
        assert set(range(200)) <= set(result["workers"])


@pytest.mark.parametrize("kind", ["plain", "packed", "mixture"])
@pytest.mark.parametrize("store", ["s3", "azure", "http"])
def test_forked_workers_read_object_stores(store, kind, request):
    uris, options = request.getfixturevalue({"s3": "on_s3", "azure": "on_azure", "http": "http"}[store])
    result = _run({"kind": kind, "uris": uris, "options": options, "context": "fork"})
    _check(result, kind)


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_spawned_and_forkserver_workers_read_s3(on_s3, context):
    uris, options = on_s3
    for kind in ("plain", "mixture"):
        _check(_run({"kind": kind, "uris": uris, "options": options, "context": context}), kind)
