"""Shared paths and fixtures of the lodt Python tests."""

import inspect
import os
import pathlib
import re
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import lodt

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
VECTORS = REPO / "spec" / "vectors"


@pytest.fixture(autouse=True)
def node_cache(tmp_path_factory, monkeypatch):
    """Each test its own node cache (the disk cache remote datasets use by
    default, shared by every process of a machine): a test that counts
    requests, or damages bytes in transit, is not served by another's."""
    path = tmp_path_factory.mktemp("node-cache")
    monkeypatch.setenv("LODT_CACHE_DIR", str(path))
    return path


@pytest.fixture
def words():
    """The user guide's 2-level example: 3 articles of 3, 1, 2 sentences of words."""
    return lodt.create_lod_tensor(
        np.arange(15, dtype=np.int64).reshape(15, 1), [[3, 1, 2], [3, 2, 4, 1, 2, 3]]
    )


@pytest.fixture
def sample_file(tmp_path, words):
    """A file of 3 batches: words (2 levels), frames (1 level, [n, 2, 3]), labels (no LoD)."""
    path = tmp_path / "sample.lodt"
    rng = np.random.default_rng(7)
    with lodt.Writer(path, metadata={"source": "tests"}) as w:
        for k in range(3):
            lens0 = [int(x) for x in rng.integers(0, 4, size=4)]
            lens1 = [int(x) for x in rng.integers(0, 5, size=sum(lens0))]
            rows = sum(lens1)
            wk = lodt.create_lod_tensor(
                rng.integers(0, 1000, size=(rows, 1)).astype(np.int64), [lens0, lens1]
            )
            flens = [int(x) for x in rng.integers(1, 4, size=4)]
            frames = lodt.create_lod_tensor(
                rng.standard_normal((sum(flens), 2, 3)).astype(np.float32), [flens]
            )
            labels = lodt.LodTensor(np.arange(4, dtype=np.int64) + 10 * k)
            w.write({"words": wk, "frames": frames, "labels": labels}, metadata={"step": str(k)})
    return path


def torch_or_skip():
    """torch, or a skip saying it cannot be installed here."""
    return pytest.importorskip("torch", reason="torch is not installed (pip install 'lodt[torch]')")


def tensorflow_or_skip():
    """TensorFlow, or a skip saying it cannot be installed here."""
    return pytest.importorskip(
        "tensorflow", reason="TensorFlow is not installed (pip install 'lodt[tf]')"
    )


def jax_or_skip():
    """JAX, or a skip saying it cannot be installed here."""
    return pytest.importorskip("jax", reason="JAX is not installed (pip install 'lodt[jax]')")


def pyarrow_or_skip():
    """pyarrow, or a skip saying it cannot be installed here."""
    return pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'lodt[arrow]')")


def in_span(array, span):
    """Whether a numpy array's data lies inside ``span`` = (address, length)."""
    start, length = span
    address = array.__array_interface__["data"][0]
    return start <= address and address + array.nbytes <= start + length


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args: list[str], port: int, what: str) -> subprocess.Popen:
    """Starts a server process and waits (at most 60 s) until it accepts
    connections on 127.0.0.1:``port``."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if time.time() > deadline:
                proc.kill()
                raise RuntimeError(f"{what} did not start")
            time.sleep(0.1)


@pytest.fixture(scope="session")
def s3():
    """moto's S3 server on 127.0.0.1 with a bucket ``data``: ``(port, storage_options)``."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    port = free_port()
    proc = start_server(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port, "moto"
    )
    req = urllib.request.Request(f"http://127.0.0.1:{port}/data", method="PUT")
    urllib.request.urlopen(req, timeout=60).close()
    options = {
        "aws_endpoint": f"http://127.0.0.1:{port}",
        "aws_allow_http": "true",
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
        "aws_region": "us-east-1",
    }
    yield port, options
    proc.kill()
    proc.wait()


_AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """Azurite (Azure Blob's emulator) on 127.0.0.1 with a container ``data``:
    its storage options."""
    import os
    import pathlib

    binary = os.environ.get("LODT_AZURITE") or str(
        pathlib.Path(__file__).resolve().parents[2] / "target/azurite/node_modules/.bin/azurite-blob"
    )
    if not os.path.exists(binary):
        pytest.skip("Azurite is not installed (scripts/test installs it with npm)")
    blob = pytest.importorskip("azure.storage.blob", reason="azure-storage-blob is not installed")
    port = free_port()
    proc = start_server(
        [binary, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent",
         "--skipApiVersionCheck", "--location", str(tmp_path_factory.mktemp("azurite"))],
        port,
        "Azurite",
    )
    conn = (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={_AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
    )
    blob.BlobServiceClient.from_connection_string(conn).create_container("data")
    # object_store reads the emulator's address from the environment.
    old = os.environ.get("AZURITE_BLOB_STORAGE_URL")
    os.environ["AZURITE_BLOB_STORAGE_URL"] = f"http://127.0.0.1:{port}"
    yield {"azure_storage_use_emulator": "true"}
    if old is None:
        del os.environ["AZURITE_BLOB_STORAGE_URL"]
    else:
        os.environ["AZURITE_BLOB_STORAGE_URL"] = old
    proc.kill()
    proc.wait()


# Tests that import TensorFlow or JAX start their thread pools in this
# process; a later test that forks (DataLoader workers, Ray's raylet) could
# then deadlock in the child. They run last, in their collected order.
_MULTITHREADED_FRAMEWORKS = ("test_jax.py", "test_tf.py", "docs/frameworks.md")


# The heavy tiers, as pytest markers: `scripts/test --fast` deselects them
# all (-m "not (torch or ...)"); `pytest -m torch` runs one.
HEAVY = {
    "torch": "uses PyTorch",
    "tensorflow": "uses TensorFlow",
    "jax": "uses JAX",
    "ray": "uses Ray",
    "remote": "starts an object-store server (moto, Azurite, HTTP)",
    "consumers": "uses awkward, DuckDB, Polars or Hugging Face datasets",
    "wheel": "installs the wheel into a new virtual environment",
    "big": "decodes gigabytes (the 4 GB big row group): minutes in a debug wheel",
}
_MODULE_MARKS = {
    "test_torch.py": "torch",
    "test_dataset_torch.py": "torch",
    "test_grown_torch.py": "torch",
    "test_tf.py": "tensorflow",
    "test_jax.py": "jax",
    "test_ray.py": "ray",
    "test_ray_commit_faults.py": "ray",
    "test_consumers.py": "consumers",
    "test_wheel.py": "wheel",
    "test_remote.py": "remote",
    "test_workers_remote.py": "remote",
    "test_commit_faults.py": "remote",
}
# Deliberately large tests, whose size is their point: the full tier runs them.
_BIG_TESTS = {
    "test_convert_big_row_group_streams_in_bounded_batches",
    "test_decode_budget_cuts_batches",
}
_REMOTE_FIXTURES = {"s3", "azurite", "on_s3", "on_azure", "http"}
_SOURCE_MARKS = [
    ("torch", re.compile(r"torch")),
    ("tensorflow", re.compile(r"tensorflow|lodt\.tf\b")),
    ("jax", re.compile(r"\bjax\b")),
    ("ray", re.compile(r"\bray\b|lodt\.ray\b")),
]
_DOCS_REQUIRES = re.compile(r"docs-test:\s*requires\s*\((?P<module>[^)]+)\)")


def pytest_configure(config):
    for name, what in HEAVY.items():
        config.addinivalue_line("markers", f"{name}: {what} (deselected by scripts/test --fast)")


def _marks_of(item) -> set[str]:
    marks = set()
    module = pathlib.Path(str(item.fspath)).name
    if module in _MODULE_MARKS:
        marks.add(_MODULE_MARKS[module])
    if _REMOTE_FIXTURES & set(getattr(item, "fixturenames", ())):
        marks.add("remote")
    function = getattr(item, "function", None)
    if function is not None and function.__name__ in _BIG_TESTS:
        marks.add("big")
    if function is not None:
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError):
            source = ""
        marks.update(name for name, pattern in _SOURCE_MARKS if pattern.search(source))
    page = getattr(item, "callspec", None) and item.callspec.params.get("page")
    if isinstance(page, pathlib.Path):
        text = page.read_text(encoding="utf-8")
        if "LODT_S3_" in text:
            marks.add("remote")
        consumers = {"awkward", "duckdb", "polars", "datasets"}
        for m in _DOCS_REQUIRES.finditer(text):
            module_name = m["module"].strip()
            marks.add("consumers" if module_name in consumers else module_name)
        marks.update(name for name, pattern in _SOURCE_MARKS if pattern.search(text))
    return marks & set(HEAVY)


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in sorted(_marks_of(item)):
            item.add_marker(getattr(pytest.mark, name))
    items.sort(key=lambda item: any(name in item.nodeid for name in _MULTITHREADED_FRAMEWORKS))
