"""lodt.convert's options: Parquet compression, column selection, null
lists, re-batching by size and metadata, with pyarrow reading the output."""

import pytest

import lodt

from conftest import pyarrow_or_skip




@pytest.mark.parametrize(
    "codec, parquet_name",
    [(None, "SNAPPY"), ("none", "UNCOMPRESSED"), ("zstd", "ZSTD"), ("lz4", "LZ4"), ("snappy", "SNAPPY")],
)
def test_parquet_compression(codec, parquet_name, tmp_path, sample_file):
    pyarrow_or_skip()
    import pyarrow.parquet as pq

    plain = tmp_path / "plain.lodt"
    lodt.save(plain, [lodt.Batch(b.items()) for b in lodt.open(sample_file)])
    out = tmp_path / "x.parquet"
    kwargs = {} if codec is None else {"compression": codec}
    assert lodt.convert(plain, out, **kwargs)["batches"] == 3
    meta = pq.read_metadata(out)
    assert meta.row_group(0).column(0).compression == parquet_name
    assert pq.read_table(out).num_rows == 12  # pyarrow decodes every codec
    back = tmp_path / "back.lodt"
    lodt.convert(out, back)
    f, g = lodt.open(plain), lodt.open(back)
    assert all(g[k][n] == f[k][n] for k in range(3) for n in f[k])


def test_compression_errors(tmp_path, sample_file):
    with pytest.raises(ValueError, match="unknown compression"):
        lodt.convert(sample_file, tmp_path / "x.parquet", compression="gzip")
    with pytest.raises(ValueError, match=r"compression \(zstd\) applies to \.lodt and Parquet output"):
        lodt.convert(sample_file, tmp_path / "x.arrows", compression="zstd")


def test_columns_null_lists_and_metadata(tmp_path, sample_file):
    pa = pyarrow_or_skip()
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "tokens": pa.array([[1], [2, 3], None, [4, 5, 6]], pa.list_(pa.int64())),
            "name": pa.array(["a", "b", "c", "d"]),
        }
    )
    src = tmp_path / "mixed.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out.lodt"
    with pytest.raises(TypeError, match="Utf8"):
        lodt.convert(src, out)
    with pytest.raises(ValueError, match='null_lists="empty"'):
        lodt.convert(src, out, columns=["tokens"])
    lodt.convert(src, out, columns=["tokens"], null_lists="empty")
    t = lodt.open(out)[0]["tokens"]
    assert list(lodt.open(out)[0]) == ["tokens"]
    assert t.lod() == [[0, 1, 3, 3, 6]]
    assert t.numpy().ravel().tolist() == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match='no column "nope"'):
        lodt.convert(src, out, columns=["nope"])
    with pytest.raises(ValueError, match="null_lists"):
        lodt.convert(src, out, null_lists="maybe")
    # The sample file's batches carry different "step" metadata.
    with pytest.raises(ValueError, match='metadata="first"'):
        lodt.convert(sample_file, tmp_path / "m.parquet")
    assert lodt.convert(sample_file, tmp_path / "m.parquet", metadata="first")["batches"] == 3


def test_batch_bytes_never_merges_across_metadata(tmp_path, sample_file):
    plain = tmp_path / "plain.lodt"
    lodt.save(plain, [lodt.Batch(b.items()) for b in lodt.open(sample_file)])
    merged = tmp_path / "merged.lodt"
    assert lodt.convert(plain, merged, batch_bytes=1 << 20)["batches"] == 1
    # With their "step" metadata, the batches stay apart.
    kept = tmp_path / "kept.lodt"
    assert lodt.convert(sample_file, kept, batch_bytes=1 << 20)["batches"] == 3
    with pytest.raises(ValueError, match="at least 1"):
        lodt.convert(plain, merged, batch_bytes=0)
