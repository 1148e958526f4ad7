#!/usr/bin/env python3
"""An independent .lodt reader (versions 1.0 and 2.0), written from
../FORMAT.md alone (Python standard library, plus the `zstandard` and `lz4`
packages for 2.0's compressed buffers, imported when a file has one), run on
every test vector: it checks every checksum,
padding byte and rule of each file, then compares each tensor (and each
recorded branch slice) with the JSON next to it.

Numbers are compared as values (float32, float16 and bfloat16 values after
rounding to their type), since Python and Rust print some floats differently
(1e-07 and 1e-7).

Usage: python3 check.py [DIR]       (DIR defaults to this file's directory)
Exit status 0 when every vector checks out.
"""

import json
import math
import os
import struct
import sys
import zlib

MAGIC = b"\x89LODT\r\n\x1a\n"
DTYPES = {  # name: (struct code, size)
    "bool": ("?", 1), "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4),
    "int64": ("q", 8), "uint8": ("B", 1), "uint16": ("H", 2), "uint32": ("I", 4),
    "uint64": ("Q", 8), "float16": ("e", 2), "bfloat16": (None, 2),
    "float32": ("f", 4), "float64": ("d", 8),
}


class Bad(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Bad(what)


def pad64(n):
    return (n + 63) // 64 * 64


def u64(b, at):
    return struct.unpack_from("<Q", b, at)[0]


def u32(b, at):
    return struct.unpack_from("<I", b, at)[0]


def sealed(b, at, what):
    need(zlib.crc32(b[at:at + 60]) == u32(b, at + 60), what + " CRC")


def zero(b, start, end, what):
    need(b[start:end] == bytes(end - start), what + " padding is not zero")


def read_file(b):
    """Returns (file metadata, [batch]) where batch = (metadata, {name: tensor})."""
    need(b[:9] == MAGIC, "magic")
    major = struct.unpack_from("<H", b, 12)[0]
    need(major in (1, 2), "major version")
    sealed(b, 0, "file header")
    meta_len = u64(b, 16)
    need(64 + meta_len <= len(b), "file metadata length")
    meta = b[64:64 + meta_len]
    need(zlib.crc32(meta) == u32(b, 24), "file metadata CRC")
    data_start = pad64(64 + meta_len)
    zero(b, 64 + meta_len, data_start, "file metadata")
    file_meta = json.loads(meta).get("metadata", {})

    trailer = len(b) - 64
    need(trailer >= data_start + 64 and b[trailer:trailer + 8] == b"LODTTAIL", "trailer")
    sealed(b, trailer, "trailer")
    footer, count = u64(b, trailer + 8), u64(b, trailer + 16)
    need(footer + 64 + pad64(24 * count) + 64 == len(b), "footer position")
    need(b[footer:footer + 8] == b"LODTFOOT", "footer tag")
    sealed(b, footer, "footer header")
    need(u32(b, trailer + 24) == u32(b, footer + 60), "trailer's footer CRC")
    need(u64(b, footer + 8) == count and u64(b, footer + 16) == 24 * count, "footer counts")
    index = b[footer + 64:footer + 64 + 24 * count]
    need(zlib.crc32(index) == u32(b, footer + 24), "index CRC")
    zero(b, footer + 64 + 24 * count, trailer, "index")

    batches, pos, heads = [], data_start, {}
    for k in range(count):
        offset, length, header_crc, table_crc = struct.unpack_from("<QQII", index, 24 * k)
        need(offset == pos and length % 64 == 0 and length >= (128 if major == 1 else 64),
             "index entry %d" % k)
        section = b[offset:offset + length]
        if major == 1:
            batches.append(read_batch(section, k, header_crc, table_crc))
        else:
            batches.append(read_batch2(section, k, header_crc, table_crc, heads))
        pos += length
    need(pos == footer, "batches end at the footer")
    return file_meta, batches


def read_batch(s, k, header_crc, table_crc):
    need(s[:8] == b"LODTBTCH", "batch tag")
    sealed(s, 0, "batch header")
    need(u32(s, 60) == header_crc, "index header CRC")
    section_len, index, meta_len, meta_crc, n = struct.unpack_from("<QQQII", s, 8)
    need(section_len == len(s) and index == k, "batch length and number")
    meta = s[64:64 + meta_len]
    need(zlib.crc32(meta) == meta_crc, "batch metadata CRC")
    data_start = pad64(64 + meta_len)
    zero(s, 64 + meta_len, data_start, "batch metadata")
    m = json.loads(meta)
    table = section_len - pad64(4 * (n + 1))
    need(len(m["buffers"]) == n and table >= data_start, "buffer count")
    crcs = struct.unpack_from("<%dI" % n, s, table)
    need(zlib.crc32(s[table:table + 4 * n]) == u32(s, table + 4 * n) == table_crc, "table CRC")
    zero(s, table + 4 * n + 4, section_len, "checksum table")
    buffers, prev = [], data_start
    for i, buf in enumerate(m["buffers"]):
        off, ln = buf["offset"], buf["length"]
        need(off % 64 == 0 and off >= prev and off + ln <= table, "buffer %d placement" % i)
        zero(s, prev, off, "buffer gap")
        data = s[off:off + ln]
        need(zlib.crc32(data) == crcs[i], "buffer %d CRC" % i)
        buffers.append(data)
        prev = off + ln
    zero(s, prev, table, "last buffer")
    tensors = {}
    for t in m["tensors"]:
        code, size = DTYPES[t["dtype"]]
        shape = t["shape"]
        body = buffers[t["body"]]
        need(len(body) == size * math.prod(shape), "body length of " + t["name"])
        lod = []
        for bi in t["lod"]:
            raw = buffers[bi]
            need(len(raw) % 8 == 0, "LoD length")
            lod.append(list(struct.unpack("<%dQ" % (len(raw) // 8), raw)))
        check_lod(lod, shape)
        tensors[t["name"]] = (t["dtype"], shape, lod, values(t["dtype"], body))
    return m.get("metadata", {}), tensors


class Record:
    """The fields of a 2.0 batch head's record (FORMAT.md 12.2)."""

    def __init__(self, b):
        self.b, self.pos = b, 0

    def varint(self):
        v = 0
        for i in range(10):
            need(self.pos < len(self.b), "record ends inside a varint")
            byte = self.b[self.pos]
            self.pos += 1
            v |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                need(v < 1 << 64, "varint overflows")
                return v
        raise Bad("varint longer than 10 bytes")

    def take(self, n):
        need(self.pos + n <= len(self.b), "record too short")
        self.pos += n
        return self.b[self.pos - n:self.pos]


def decompress(codec, data, n):
    if codec == 1:
        import lz4.block
        out = lz4.block.decompress(data, uncompressed_size=n)
    else:
        import zstandard
        # Exactly one frame (FORMAT.md 12.4): no skippable frame, no
        # dictionary, a window of at most 2^27 bytes (a single-segment
        # frame's is its content size), a content size if any of n, and
        # nothing after the frame.
        need(data[:4] == b"\x28\xb5\x2f\xfd", "zstd frame magic")
        params = zstandard.get_frame_parameters(data)
        need(params.dict_id == 0, "zstd frame without a dictionary")
        need(params.window_size <= 1 << 27, "zstd window of %d bytes" % params.window_size)
        need(params.content_size in (n, zstandard.CONTENTSIZE_UNKNOWN),
             "zstd content size %d, expected %d" % (params.content_size, n))
        out = zstandard.ZstdDecompressor().decompress(data, max_output_size=n)
        rest = zstandard.ZstdDecompressor().decompressobj()
        rest.decompress(data)
        need(rest.eof and not rest.unused_data, "one zstd frame, nothing after it")
    need(len(out) == n, "decoded length %d, expected %d" % (len(out), n))
    return out


def read_batch2(s, k, header_crc, table_crc, heads):
    """A 2.0 batch section (FORMAT.md 12); `heads` maps each batch whose head
    held a schema to that schema."""
    need(s[:8] == b"LODTBTCH", "batch tag")
    section_len, head_len = u64(s, 8), u32(s, 16)
    need(section_len == len(s) and 27 <= head_len <= section_len, "batch and head length")
    need(zlib.crc32(s[:head_len - 4]) == u32(s, head_len - 4) == header_crc, "head CRC")
    zero(s, head_len, pad64(head_len), "head")
    r = Record(s[20:head_len - 4])
    need(r.varint() == k, "batch number")
    back = r.varint()
    if back == 0:
        heads[k] = json.loads(r.take(r.varint()))["tensors"]
    need(k - back in heads, "schema_back %d" % back)
    schema = heads[k - back]
    meta = r.take(r.varint())
    metadata = json.loads(meta) if meta else {}
    # Tensors: shapes, LoD offset counts (own or shared), decoded lengths.
    lens, specs = [], []
    for t, st in enumerate(schema):
        code, size = DTYPES[st["dtype"]]
        shape = [] if st.get("scalar") else [r.varint()] + st["shape"]
        levels = st.get("lod", 0)
        lod = []
        if levels:
            ref = r.varint()
            if ref == 0:
                for _ in range(levels):
                    n = r.varint()
                    need(n >= 1, "empty LoD level")
                    lod.append(len(lens))
                    lens.append((8 * n, 8))
            else:
                need(ref <= t and specs[t - ref][3] and len(specs[t - ref][2]) == levels,
                     "lod_ref %d" % ref)
                lod = specs[t - ref][2]
        specs.append((st["name"], st["dtype"], lod, ref == 0 if levels else False,
                      shape, len(lens)))
        lens.append((size * math.prod(shape), size))
    # Buffers: codec, stored length, CRC; placement; decoding.
    buffers, crcs, cursor = [], b"", pad64(head_len)
    for i, (n, width) in enumerate(lens):
        codec = r.take(1)[0]
        shuffle = codec & 0x10
        codec &= ~0x10
        need(codec in (0, 1, 2) and (not shuffle or (codec and width > 1)), "codec %d" % codec)
        stored = r.varint() if codec else n
        crc = r.take(4)
        crcs += crc
        start = pad64(cursor) if codec == 0 else cursor
        need(start + stored <= section_len, "buffer %d placement" % i)
        zero(s, cursor, start, "buffer gap")
        data = s[start:start + stored]
        need(zlib.crc32(data) == struct.unpack("<I", crc)[0], "buffer %d CRC" % i)
        data = decompress(codec, data, n) if codec else data
        if shuffle:  # byte j of element i is at j * (n / width) + i
            m = n // width
            data = bytes(data[j * m + i] for i in range(m) for j in range(width))
        buffers.append(data)
        cursor = start + stored
    need(r.pos == len(r.b), "record ends before the head CRC")
    need(section_len == max(64, pad64(cursor)), "section length")
    zero(s, cursor, section_len, "last buffer")
    need(zlib.crc32(crcs) == table_crc, "index table CRC")
    tensors = {}
    for name, dtype, lod_bufs, _, shape, body in specs:
        lod = [list(struct.unpack("<%dQ" % (len(buffers[bi]) // 8), buffers[bi]))
               for bi in lod_bufs]
        check_lod(lod, shape)
        tensors[name] = (dtype, shape, lod, values(dtype, buffers[body]))
    return metadata, tensors


def check_lod(lod, shape):
    for level, offsets in enumerate(lod):
        if offsets == [0] and all(l == [0] for l in lod[level:]) and shape[0] == 0:
            return  # the slice of an empty sequence
        need(len(offsets) >= 2 and offsets[0] == 0, "LoD start")
        need(all(a <= b for a, b in zip(offsets, offsets[1:])), "LoD order")
        last = len(lod[level + 1]) - 1 if level + 1 < len(lod) else shape[0]
        need(offsets[-1] == last, "LoD end")


def values(dtype, body):
    code, size = DTYPES[dtype]
    n = len(body) // size
    if dtype == "bfloat16":
        halves = struct.unpack("<%dH" % n, body)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    return list(struct.unpack("<%d%s" % (n, code), body))


def branch(tensor, path):
    """The <path>-slice: (shape, lod rebased, values)."""
    dtype, shape, lod, vals = tensor
    if not path:
        return shape, lod, vals
    # (begin, end): a range of sequences of the current level.
    begin, end = 0, len(lod[0]) - 1
    for depth, i in enumerate(path):
        need(begin + i < end, "branch index")
        begin, end = lod[depth][begin + i], lod[depth][begin + i + 1]
    out = []
    for level in lod[len(path):]:
        window = level[begin:end + 1]
        out.append([o - window[0] for o in window])
        begin, end = window[0], window[-1]
    per_row = math.prod(shape[1:])
    return [end - begin] + shape[1:], out, vals[begin * per_row:end * per_row]


def same_value(dtype, got, want):
    if isinstance(want, str):
        return {"NaN": math.isnan, "Infinity": lambda x: x == math.inf,
                "-Infinity": lambda x: x == -math.inf}[want](got)
    if dtype == "bool":
        return got is want
    if dtype in ("float16", "float32", "bfloat16"):
        want = struct.unpack("<f", struct.pack("<f", want))[0]  # round to float32
        return got == want and math.copysign(1, got) == math.copysign(1, want)
    if dtype == "float64":
        return got == want and math.copysign(1, got) == math.copysign(1, want)
    return got == want and type(want) is int


def check(directory):
    files = sorted(os.listdir(directory))
    parsed = {}
    for name in files:
        if name.endswith(".lodt"):
            with open(os.path.join(directory, name), "rb") as f:
                parsed[name[:-5]] = read_file(f.read())
    checked = 0
    for name in files:
        if not name.endswith(".json"):
            continue
        parts = name[:-5].split(".")
        vector, k, tensor = parts[0], int(parts[1][1:]), parts[2]
        path = [int(i) for i in parts[3][len("branch-"):].split("-")] if len(parts) > 3 else []
        t = parsed[vector][1][k][1][tensor]
        shape, lod, vals = branch(t, path)
        with open(os.path.join(directory, name)) as f:
            want = json.load(f)
        need(want["name"] == tensor and want["dtype"] == t[0], name + ": name or dtype")
        need(want["shape"] == shape, name + ": shape %s, expected %s" % (shape, want["shape"]))
        need(want["lod"] == lod, name + ": lod %s, expected %s" % (lod, want["lod"]))
        need(len(want["values"]) == len(vals), name + ": number of values")
        for g, w in zip(vals, want["values"]):
            need(same_value(t[0], g, w), name + ": value %r, expected %r" % (g, w))
        checked += 1
    return len(parsed), checked


if __name__ == "__main__":
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    try:
        files, checked = check(directory)
    except Bad as e:
        print("FAIL: " + str(e))
        sys.exit(1)
    except ImportError as e:
        print("SKIP: %s (pip install zstandard lz4 to decode compressed 2.0 vectors)" % e)
        sys.exit(3)
    print("ok: %d files read, %d JSON records match" % (files, checked))
