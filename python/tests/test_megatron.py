"""Megatron indexed datasets (``.bin`` + ``.idx``): lodt's files are the
layout of ``spec/MEGATRON.md`` (parsed here with numpy alone), and the bytes
megatron-core's own builder writes for the same tokens (when megatron-core
is installed: the full test command installs it beside torch)."""

import json
import struct
import subprocess
import sys

import numpy as np
import pytest

import lodt


def _parse_idx(path):
    """The index by spec/MEGATRON.md section 2, with numpy alone."""
    b = open(path, "rb").read()
    assert b[:9] == b"MMIDIDX\x00\x00"
    version, code, s, d = struct.unpack_from("<QBQQ", b, 9)
    lengths = np.frombuffer(b, np.int32, s, 34)
    pointers = np.frombuffer(b, np.int64, s, 34 + 4 * s)
    documents = np.frombuffer(b, np.int64, d, 34 + 12 * s)
    assert len(b) == 34 + 12 * s + 8 * d
    return version, code, lengths, pointers, documents


def _corpus(rng, documents, dtype=np.int32):
    """Documents of 1 to 3 sequences of 1 to 50 tokens."""
    docs = [[int(n) for n in rng.integers(1, 50, size=int(rng.integers(1, 4)))] for _ in range(documents)]
    tokens = rng.integers(0, 30000, size=sum(map(sum, docs))).astype(dtype)
    return docs, tokens


def test_the_files_are_the_documented_layout_and_read_back(tmp_path):
    rng = np.random.default_rng(3)
    docs, tokens = _corpus(rng, 40, np.uint16)
    t = lodt.create_lod_tensor(tokens, [[len(d) for d in docs], [n for d in docs for n in d]])
    with lodt.Writer(tmp_path / "in.lodt") as w:
        w.write({"tokens": t})
    lodt.convert(tmp_path / "in.lodt", tmp_path / "c.idx")
    version, code, lengths, pointers, documents = _parse_idx(tmp_path / "c.idx")
    assert (version, code) == (1, 8)  # uint16
    assert lengths.tolist() == [n for d in docs for n in d]
    assert pointers.tolist() == (2 * np.concatenate([[0], np.cumsum(lengths)[:-1]])).tolist()
    assert documents.tolist() == np.concatenate([[0], np.cumsum([len(d) for d in docs])]).tolist()
    assert (tmp_path / "c.bin").read_bytes() == tokens.tobytes()
    # Read back by the prefix's other file, through a dataset.
    lodt.convert(tmp_path / "c.bin", tmp_path / "ds")
    ds = lodt.Dataset(tmp_path / "ds")
    assert len(ds) == 40
    first = ds[0]["tokens"]
    assert first.lod() == [[0, len(docs[0])], np.concatenate([[0], np.cumsum(docs[0])]).tolist()]
    assert np.asarray(first).ravel().tolist() == tokens[: sum(docs[0])].tolist()


def test_what_megatron_cannot_hold_is_a_value_error_and_writes_nothing(tmp_path):
    t = lodt.create_lod_tensor(np.arange(4, dtype=np.uint32), [[4]])
    with lodt.Writer(tmp_path / "u32.lodt") as w:
        w.write({"tokens": t})
    with pytest.raises(ValueError, match="not uint32"):
        lodt.convert(tmp_path / "u32.lodt", tmp_path / "x.idx")
    assert not (tmp_path / "x.idx").exists() and not (tmp_path / "x.bin").exists()
    (tmp_path / "bad.idx").write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4, 2**40, 1))
    (tmp_path / "bad.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="file length"):
        lodt.convert(tmp_path / "bad.idx", tmp_path / "out.lodt")


# megatron-core runs in a process of its own: importing it into the test
# process (beside torch, TensorFlow, JAX and forked workers) aborted it.
_MEGATRON = r"""
import json, sys
import numpy as np
import torch
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

job = json.load(open(sys.argv[1]))
tokens = np.load(job["tokens"])
builder = IndexedDatasetBuilder(job["prefix"] + ".bin", dtype=np.dtype(job["dtype"]).type)
at = 0
for d in job["docs"]:
    n = sum(d)
    if job["two_levels"]:
        builder.add_document(torch.from_numpy(tokens[at : at + n].copy()), d)
    else:
        builder.add_item(torch.from_numpy(tokens[at : at + n].copy()))
        builder.end_document()
    at += n
builder.finalize(job["prefix"] + ".idx")
theirs = IndexedDataset(job["lodt_prefix"], mmap=True)
print(json.dumps({"len": len(theirs), "first": theirs[0].tolist(), "docs": len(theirs.document_indices) - 1}))
"""


@pytest.mark.torch
def test_lodt_writes_the_bytes_megatron_cores_builder_writes(tmp_path):
    pytest.importorskip("torch")
    found = subprocess.run([sys.executable, "-c", "import megatron.core.datasets.indexed_dataset"], capture_output=True)
    if found.returncode != 0:
        pytest.skip("megatron-core is not installed (the full test command installs it)")
    rng = np.random.default_rng(11)
    for dtype, two_levels in [(np.int32, True), (np.uint16, False), (np.int64, True)]:
        docs, tokens = _corpus(rng, 25, dtype)
        if not two_levels:
            docs = [[sum(d)] for d in docs]
        name = f"mc-{np.dtype(dtype).name}"
        lengths = [[len(d) for d in docs], [n for d in docs for n in d]] if two_levels else [[d[0] for d in docs]]
        src = tmp_path / f"{name}.lodt"
        with lodt.Writer(src) as w:
            w.write({"tokens": lodt.create_lod_tensor(tokens, lengths)})
        lodt.convert(src, tmp_path / f"lodt-{name}.idx")
        np.save(tmp_path / f"{name}.npy", tokens)
        job = {
            "tokens": str(tmp_path / f"{name}.npy"),
            "prefix": str(tmp_path / name),
            "dtype": np.dtype(dtype).name,
            "docs": docs,
            "two_levels": two_levels,
            "lodt_prefix": str(tmp_path / f"lodt-{name}"),
        }
        (tmp_path / f"{name}.json").write_text(json.dumps(job))
        out = subprocess.run(
            [sys.executable, "-c", _MEGATRON, str(tmp_path / f"{name}.json")], capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr
        # lodt's files are the bytes megatron-core's builder wrote.
        for ext in ("bin", "idx"):
            assert (tmp_path / f"lodt-{name}.{ext}").read_bytes() == (tmp_path / f"{name}.{ext}").read_bytes(), (name, ext)
        # megatron-core's reader reads lodt's files as its own.
        read = json.loads(out.stdout.strip().splitlines()[-1])
        assert read == {"len": sum(map(len, docs)), "first": tokens[: docs[0][0]].tolist(), "docs": len(docs)}
        # lodt reads megatron-core's files back to the same tensor.
        lodt.convert(tmp_path / f"{name}.idx", tmp_path / f"back-{name}.lodt")
        assert lodt.open(tmp_path / f"back-{name}.lodt")[0]["tokens"] == lodt.open(src)[0]["tokens"]
