"""A lost answer to a manifest write must not duplicate data (issue 28 §1).

The writers talk to moto's S3 server (and Azurite) through the
fault-injecting proxy of ``fault_proxy.py``, which breaks the conditional
PUT of a manifest: the answer dropped after the server committed, a stall
until the client times out, a 500 in place of the answer of a committed
write (so the client's retry gets the server's own 412), a 500 before
anything reached the server, a store that cannot be read afterwards. For
each, the dataset holds each sequence exactly once and the call says what
happened: success if committed, an error naming the commit id otherwise.
"""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest

import lodt
from fault_proxy import Fault, FaultProxy, conditional

# The client gives up on an unanswered request after this (the stall lasts longer).
TIMEOUT = "2s"


def _batch(first: int, n: int) -> dict:
    return {"id": np.arange(first, first + n, dtype=np.int64)}


def _ids(uri: str, options: dict) -> list[int]:
    ds = lodt.Dataset(uri, storage_options=options)
    return [int(i) for b in ds for i in np.array(b["id"]).ravel().tolist()]


def _manifest(uri: str, options: dict) -> dict:
    return json.loads(lodt._lodt.DatasetReader(uri, storage_options=options).manifest_json())


def _manifest_put(path: str = "lodt-dataset.json", **kw) -> dict:
    """Fault arguments matching the conditional PUT of manifest ``path``."""
    return dict(method="PUT", path=path, when=conditional, **kw)


# Each fault: the rules it adds, and whether the write reaches the server.
FAULTS = {
    # The server commits; the connection dies before the answer (the
    # client retries, and its retry fails the condition: moto's own 412).
    "drop_response": lambda: [Fault("drop_response", **_manifest_put())],
    # The server commits; no answer until the client times out.
    "stall": lambda: [Fault("stall", seconds=4, **_manifest_put())],
    # The server commits; the client is told 500, retries, and the proxy
    # answers the retry 412 (as the server would).
    "412_after_success": lambda: [
        Fault("status_after", status=500, **_manifest_put()),
        Fault("status", status=412, **_manifest_put()),
    ],
    # A 500 before anything reached the server; the client's retry commits.
    "500_first": lambda: [Fault("status", status=500, **_manifest_put())],
}


def _arm(proxy: FaultProxy, fault: str) -> list[Fault]:
    return [proxy.add(f) for f in FAULTS[fault]()]


@pytest.fixture
def proxied(s3):
    """moto behind a fault proxy: ``(proxy, storage_options through it)``."""
    port, options = s3
    with FaultProxy(port) as proxy:
        yield proxy, dict(options, aws_endpoint=proxy.endpoint, timeout=TIMEOUT)


_uris = iter(range(10**6))


def _uri() -> str:
    return f"s3://data/faults-{next(_uris)}"


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_append_whose_answer_is_lost_is_committed_once(proxied, fault):
    proxy, options = proxied
    uri = _uri()
    lodt.write_dataset(uri, [_batch(0, 10)], shard_bytes=1024, storage_options=options)
    faults = _arm(proxy, fault)
    totals = lodt.write_dataset(
        uri, [_batch(100, 6), _batch(106, 4)], mode="append", shard_bytes=1024, storage_options=options
    )
    proxy.clear()
    assert all(f.applied == 1 for f in faults), proxy.log
    assert totals["sequences"] == 20, totals
    assert _ids(uri, options) == list(range(10)) + list(range(100, 110))
    assert totals["commit_id"] in _manifest(uri, options)["commits"]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_create_whose_answer_is_lost_is_committed_once(proxied, fault):
    proxy, options = proxied
    uri = _uri()
    faults = _arm(proxy, fault)
    totals = lodt.write_dataset(uri, [_batch(0, 7)], storage_options=options, commit_id="create-1")
    proxy.clear()
    assert all(f.applied == 1 for f in faults), proxy.log
    assert (totals["sequences"], totals["commit_id"]) == (7, "create-1")
    # Called again with the same id: committed already, nothing is written.
    again = lodt.write_dataset(uri, [_batch(0, 7)], storage_options=options, commit_id="create-1")
    assert again["sequences"] == 7
    assert _ids(uri, options) == list(range(7))
    with pytest.raises(FileExistsError):
        lodt.write_dataset(uri, [_batch(0, 7)], storage_options=options)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_parts_and_commit_parts_whose_answers_are_lost_are_committed_once(proxied, fault):
    proxy, options = proxied
    uri = _uri()
    for k in range(2):
        faults = [proxy.add(f) for f in FAULTS[fault]()]
        for f in faults:
            f.path = "lodt-dataset.part."
        part = lodt.write_dataset(
            uri, [_batch(10 * k, 3)], mode="part", writer_id=f"w{k}", storage_options=options
        )
        proxy.clear()
        assert all(f.applied == 1 for f in faults), proxy.log
        assert part["sequences"] == 3
    faults = _arm(proxy, fault)
    merged = lodt.commit_parts(uri, storage_options=options)
    proxy.clear()
    assert all(f.applied == 1 for f in faults), proxy.log
    assert merged["sequences"] == 6
    manifest = _manifest(uri, options)
    assert manifest["commits"][-1] == merged["commit_id"]
    assert _ids(uri, options) == [0, 1, 2, 10, 11, 12]
    # The merge again with its id, and a part writer retried with its id
    # after the merge: nothing is added.
    assert lodt.commit_parts(uri, storage_options=options, commit_id=merged["commit_id"])["sequences"] == 6
    w0 = manifest["commits"][0]
    retried = lodt.DatasetWriter(uri, mode="part", writer_id="w0", storage_options=options, commit_id=w0)
    assert retried.already_committed
    retried.write(_batch(0, 3))
    retried.close()
    assert lodt.commit_parts(uri, storage_options=options)["sequences"] == 6
    assert _ids(uri, options) == [0, 1, 2, 10, 11, 12]


def _dataset_and_append(options: dict, commit_id: str) -> tuple[str, lodt.DatasetWriter]:
    """A dataset of 0..5 and an open append of 100..105 with ``commit_id``."""
    uri = _uri()
    lodt.write_dataset(uri, [_batch(0, 5)], storage_options=options)
    w = lodt.DatasetWriter(uri, mode="append", storage_options=options, commit_id=commit_id)
    w.write(_batch(100, 5))
    return uri, w


def test_an_unreachable_store_is_an_unknown_outcome_and_the_retry_writes_nothing(proxied):
    proxy, options = proxied
    uri, w = _dataset_and_append(options, "append-9")
    # Every answer to the manifest's PUT is lost (the first one committed),
    # and the manifest cannot be read back.
    proxy.add(Fault("drop_response", times=None, **_manifest_put()))
    proxy.add(Fault("status", method="GET", path="lodt-dataset.json", status=503, times=None))
    with pytest.raises(OSError) as info:
        w.close()
    proxy.clear()
    err = info.value
    assert (err.outcome, err.commit_id) == ("unknown", "append-9")
    assert "is unknown" in str(err) and '"append-9"' in str(err)
    assert "write again" not in str(err)
    # It was committed; the retry with its id finds it and writes nothing.
    puts = proxy.hits("PUT")
    totals = lodt.write_dataset(uri, [_batch(100, 5)], mode="append", storage_options=options, commit_id="append-9")
    assert totals["sequences"] == 10
    assert proxy.hits("PUT") == puts
    assert _ids(uri, options) == list(range(5)) + list(range(100, 105))


def test_a_write_that_never_reached_the_store_is_not_committed_and_the_retry_writes_once(proxied):
    proxy, options = proxied
    uri, w = _dataset_and_append(options, "a-1")
    proxy.add(Fault("status", status=500, times=None, **_manifest_put()))
    with pytest.raises(OSError) as info:
        w.close()
    proxy.clear()
    assert (info.value.outcome, info.value.commit_id) == ("not committed", "a-1")
    assert _ids(uri, options) == list(range(5))
    lodt.write_dataset(uri, [_batch(100, 5)], mode="append", storage_options=options, commit_id="a-1")
    assert _ids(uri, options) == list(range(5)) + list(range(100, 105))


def test_another_writers_commit_is_still_the_conflict(proxied):
    _, options = proxied
    uri = _uri()
    lodt.write_dataset(uri, [_batch(0, 5)], storage_options=options)
    a = lodt.DatasetWriter(uri, mode="append", storage_options=options)
    b = lodt.DatasetWriter(uri, mode="append", storage_options=options)
    a.write(_batch(100, 2))
    b.write(_batch(200, 2))
    a.close()
    with pytest.raises(BlockingIOError, match="changed by another writer") as info:
        b.close()
    assert (info.value.outcome, info.value.commit_id) == ("conflict", b.commit_id)
    assert _ids(uri, options) == list(range(5)) + [100, 101]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_append_on_azure_whose_answer_is_lost_is_committed_once(azurite, fault, monkeypatch):  # noqa: F811
    import os
    from urllib.parse import urlparse

    port = urlparse(os.environ["AZURITE_BLOB_STORAGE_URL"]).port
    with FaultProxy(port) as proxy:
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.endpoint)
        options = dict(azurite, timeout=TIMEOUT)
        uri = f"az://data/faults-{fault}"
        lodt.write_dataset(uri, [_batch(0, 10)], shard_bytes=1024, storage_options=options)
        faults = _arm(proxy, fault)
        totals = lodt.write_dataset(uri, [_batch(100, 10)], mode="append", storage_options=options)
        proxy.clear()
        assert all(f.applied == 1 for f in faults), proxy.log
        assert totals["sequences"] == 20, totals
        assert _ids(uri, options) == list(range(10)) + list(range(100, 110))
        assert totals["commit_id"] in _manifest(uri, options)["commits"]


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_create_on_azure_whose_answer_is_lost_is_committed_once(azurite, fault, monkeypatch):  # noqa: F811
    import os
    from urllib.parse import urlparse

    port = urlparse(os.environ["AZURITE_BLOB_STORAGE_URL"]).port
    with FaultProxy(port) as proxy:
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.endpoint)
        options = dict(azurite, timeout=TIMEOUT)
        uri = f"az://data/create-faults-{fault}"
        faults = _arm(proxy, fault)
        totals = lodt.write_dataset(uri, [_batch(0, 7)], storage_options=options, commit_id="az-create")
        proxy.clear()
        assert all(f.applied == 1 for f in faults), proxy.log
        assert (totals["sequences"], totals["commit_id"]) == (7, "az-create")
        again = lodt.write_dataset(uri, [_batch(0, 7)], storage_options=options, commit_id="az-create")
        assert again["sequences"] == 7
        assert _ids(uri, options) == list(range(7))
