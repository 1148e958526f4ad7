#!/usr/bin/env python3
"""An independent check of the dataset test vector (dataset/), written from
../DATASET.md alone (Python standard library only, plus check.py's .lodt
reader): the manifest against every shard (size, footer CRC, batch and
sequence counts, per-tensor counts, schema), then the epoch orders and the
world-size resume recorded in dataset/orders.json, recomputed from the
manifest with the PRNG, permutations and shuffle buffer of section 6 and the
rules of section 7, and the packed mini-batches and packing state of
dataset/packing.json (section 7.4), and the locality partition's deal,
resume and repeats of dataset/locality.json (section 7.6), and the shard
index the manifest names (section 3.2): every field decoded and compared
with the JSON.

Usage: python3 check_dataset.py [DIR]   (DIR defaults to ./dataset)
       python3 check_dataset.py --mixture [FILE]   (the Mixtures section; FILE defaults
       to ./mixture/mixture.json, its sources named relative to it)
       python3 check_dataset.py --evolve [FILE]   (a mixture changed at a resume, section
       10.6; FILE defaults to ./mixture/evolve.json)
       python3 check_dataset.py --versions [DIR]   (versions and tags, section 3.3: every
       version's record against its manifest, the log; DIR defaults to ./dataset)
Exit status 0 when everything agrees.
"""

import json
import math
import re
import os
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check import Bad, need, read_file, u32  # noqa: E402

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
SHARDS, BATCHES, BUFFER, WINDOWS = 1, 2, 3, 6


def mix64(x):
    z = (x + GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def stream_seed(seed, epoch, purpose, index):
    return mix64(mix64(mix64(mix64(seed) ^ epoch) ^ purpose) ^ index)


class Rng:
    """xoshiro256++ seeded with the first four SplitMix64 outputs."""

    def __init__(self, seed):
        self.s = [mix64((seed + i * GOLDEN) & MASK) for i in range(4)]

    def next(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & MASK  # noqa: E731
        result = (rotl((s[0] + s[3]) & MASK, 23) + s[0]) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        if n == 0:
            return 0
        m = self.next() * n
        if (m & MASK) < n:
            threshold = ((1 << 64) - n) % n
            while (m & MASK) < threshold:
                m = self.next() * n
        return m >> 64

    def shuffle(self, items):
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


def source_stream(counts, shuffle, epoch):
    """Section 6.2, steps 1 and 2: the source stream of ids."""
    starts, total = [], 0
    for shard in counts:
        starts.append([])
        for n in shard:
            starts[-1].append(total)
            total += n
    shards = list(range(len(counts)))
    if shuffle:
        Rng(stream_seed(shuffle["seed"], epoch, SHARDS, 0)).shuffle(shards)
    source = []
    for s in shards:
        batches = list(range(len(counts[s])))
        if shuffle:
            Rng(stream_seed(shuffle["seed"], epoch, BATCHES, s)).shuffle(batches)
        for b in batches:
            source.extend(starts[s][b] + i for i in range(counts[s][b]))
    return source


def epoch_order(counts, shuffle, epoch):
    """Section 6: the global order of an epoch, as sequence ids."""
    source = source_stream(counts, shuffle, epoch)
    if not shuffle:
        return source
    out, _ = run_buffer(source, 0, Rng(stream_seed(shuffle["seed"], epoch, BUFFER, 0)), shuffle["buffer"], [])
    return out


def run_buffer(source, drawn, rng, cap, buf, limit=None):
    """Section 6.2, step 3, from a generator state (the source's next id at
    `drawn`, the buffer's stream and contents): the ids emitted, up to
    `limit` (all without), and the ids drawn after them."""
    out = []
    while drawn < len(source) and (limit is None or len(out) < limit):
        item = source[drawn]
        drawn += 1
        if len(buf) < cap:
            buf.append(item)
        else:
            j = rng.below(cap)
            out.append(buf[j])
            buf[j] = item
    while buf and (limit is None or len(out) < limit):
        j = rng.below(len(buf))
        out.append(buf[j])
        buf[j] = buf[-1]
        buf.pop()
    return out, drawn


def check_cursor(counts, shuffle, cursor):
    """Section 7.3: the cursor is the generator after `position` positions,
    and restoring it continues the order."""
    epoch, position, cap = cursor["epoch"], cursor["position"], shuffle["buffer"]
    source = source_stream(counts, shuffle, epoch)
    rng, buf = Rng(stream_seed(shuffle["seed"], epoch, BUFFER, 0)), []
    _, drawn = run_buffer(source, 0, rng, cap, buf, limit=position)
    want = {"epoch": epoch, "position": position, "drawn": drawn, "rng": ["%016x" % w for w in rng.s], "buffer": buf}
    need(cursor == want, "cursor: the generator after its position")
    restored = Rng(0)
    restored.s = [int(w, 16) for w in cursor["rng"]]
    rest, _ = run_buffer(source, cursor["drawn"], restored, cap, list(cursor["buffer"]))
    need(rest == epoch_order(counts, shuffle, epoch)[position:], "cursor: the order continued from it")


def check_joined(directory, counts, shuffle, joined):
    """Section 7.3, "Joining now": the order of an epoch whose state names
    its first shards in `joined` is theirs, then the rest's own."""
    state = joined["state"]
    need(state["version"] == 6, "a joined state's version")
    k = next(k for k in range(len(counts) + 1) if sum(sum(c) for c in counts[:k]) == state["joined"]["sequences"] and fingerprint(directory, k) == state["joined"]["fingerprint"])
    first = sum(sum(c) for c in counts[:k])
    order = epoch_order(counts[:k], shuffle, state["epoch"]) + [first + i for i in epoch_order(counts[k:], shuffle, state["epoch"])]
    need(order == joined["ids"], "the joined order")


def advance(n, state):
    """Section 7.3: the base after the consumers of a complete state."""
    c_old, frontier, skip = state["consumers"], state["frontier"], state["skip"]
    consumed = {int(k): v for k, v in state["consumed"].items()}
    tail = [p for p in range(frontier, n) if p not in set(skip)]
    taken = set(skip) | set(range(frontier))
    for c in range(c_old):
        for j in range(consumed[c]):
            if c + j * c_old < len(tail):
                taken.add(tail[c + j * c_old])
    new_frontier = min([p for p in range(n) if p not in taken], default=n)
    return new_frontier, sorted(p for p in taken if p >= new_frontier)


def best_fit(lengths, capacity):
    """Section 7.4: best-fit decreasing; bins (member indices, increasing)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable
    bins, free = [], []
    for i in order:
        fitting = [b for b in range(len(bins)) if free[b] >= lengths[i]]
        if not fitting or lengths[i] > capacity:
            bins.append([i])
            free.append(max(capacity - lengths[i], 0))
        else:
            b = min(fitting, key=lambda b: (free[b], b))
            free[b] -= lengths[i]
            bins[b].append(i)
    return [sorted(b) for b in bins], free


def split(batches, length, n):
    """Section 7.4, equal counts: n splits of a window's mini-batches (each
    a list of bins, each a list of ids)."""
    for _ in range(n):
        cands = [(sum(length[i] for b in mb for i in b), k) for k, mb in enumerate(batches) if sum(len(b) for b in mb) >= 2]
        if not cands:
            return
        _, k = max(cands)
        mb = batches[k]
        if len(mb) >= 2:
            h = (len(mb) + 1) // 2
            parts = [mb[:h], mb[h:]]
        else:
            h = (len(mb[0]) + 1) // 2
            parts = [[mb[0][:h]], [mb[0][h:]]]
        batches[k : k + 1] = parts


def equal_splits(shares, length, capacity, rows, buffer):
    """Section 7.4, equal counts: per consumer, {window index: splits}."""
    counts = []
    for s in shares:
        windows = {}
        for _, _, _, _, _, w, n_seq, n_mb in pack(s, length, capacity, rows, buffer, details=True):
            windows[w] = (n_seq, n_mb)
        counts.append(windows)
    totals = [sum(n for _, n in w.values()) for w in counts]
    most = max(totals, default=0)
    out = []
    for c, windows in enumerate(counts):
        need(len(shares[c]) >= most, "equal counts are reachable")
        left, splits = most - totals[c], {}
        for w in sorted(windows, reverse=True):
            n_seq, n_mb = windows[w]
            k = min(left, n_seq - n_mb)
            if k:
                splits[w] = k
                left -= k
        out.append(splits)
    return out


def pack(seqs, length, capacity, rows, buffer, splits=None, details=False):
    """Section 7.4: a consumer's packed mini-batches, each
    (ids, bins, window start, carry, index in its window); `splits` (window
    index -> n) for equal counts."""
    out, carry, pos = [], [], 0
    while True:
        start, window_carry = pos, list(carry)
        window = carry + seqs[pos : pos + buffer]
        pos = min(pos + buffer, len(seqs))
        if not window:
            return out
        bins, free = best_fit([length[i] for i in window], capacity)
        kept = []
        if pos < len(seqs):
            if rows is None:
                kept = [max(range(len(bins)), key=lambda b: (free[b], b))]
            else:
                k = len(bins) % rows or min(rows, len(bins))
                kept = list(range(len(bins) - k, len(bins)))
        carry = [window[i] for i in sorted(i for b in kept for i in bins[b])]
        delivered = [b for k, b in enumerate(bins) if k not in kept]
        per = rows or 1
        batches = [[[window[i] for i in b] for b in delivered[g : g + per]] for g in range(0, len(delivered), per)]
        w = start // buffer
        split(batches, length, (splits or {}).get(w, 0))
        for n, mb in enumerate(batches):
            ids, starts = [], [0]
            for b in mb:
                ids += b
                starts.append(len(ids))
            out.append((ids, starts, start, window_carry, n) + ((w, len(window) - len(carry), len(batches)) if details else ()))


def check_packing(directory, counts, length, shuffle):
    """Section 7.4 against dataset/packing.json."""
    with open(os.path.join(directory, "packing.json"), "rb") as f:
        v = json.load(f)
    epoch, c_n = v["epoch"], v["consumers"]
    order = epoch_order(counts, shuffle, epoch)
    shares = [order[c::c_n] for c in range(c_n)]
    for mode in ("tokens", "rows"):
        o = v[mode]
        args = (length, o["capacity"], o["rows"], o["buffer"])
        got = [[{"ids": ids, "bins": bins} for ids, bins, *_ in pack(s, *args)] for s in shares]
        need(got == v[mode + "_batches"], "packed mini-batches (" + mode + ")")
        delivered = sorted(i for share in got for b in share for i in b["ids"])
        need(delivered == sorted(order), "packing delivers every sequence exactly once (" + mode + ")")
        splits = equal_splits(shares, *args)
        got = [[{"ids": ids, "bins": bins} for ids, bins, *_ in pack(s, *args, splits=sp)] for s, sp in zip(shares, splits)]
        need(got == v[mode + "_equal_batches"], "packed mini-batches, equal counts (" + mode + ")")
        need(len({len(g) for g in got}) == 1, "equal counts (" + mode + ")")
        delivered = sorted(i for share in got for b in share for i in b["ids"])
        need(delivered == sorted(order), "equal counts deliver every sequence exactly once (" + mode + ")")
    o = v["truncate"]
    cut = [min(x, o["capacity"]) for x in length]  # section 7.4, truncation
    got = [[{"ids": ids, "bins": bins, "truncated": [[i, length[i]] for i in ids if length[i] > o["capacity"]]} for ids, bins, *_ in pack(s, cut, o["capacity"], o["rows"], o["buffer"])] for s in shares]
    need(got == v["truncate_batches"], "packed mini-batches, truncation")
    need(any(b["truncated"] for share in got for b in share), "the truncation vector cuts a sequence")
    c, k, state = v["resume_consumer"], v["resume_after"], v["resume_state"]
    o = v["tokens"]
    batches = pack(shares[c], length, o["capacity"], o["rows"], o["buffer"])
    _, _, start, carry, n = batches[k - 1]
    p = state["packing"]
    need(state["version"] == 2 and state["epoch"] == epoch and state["consumed"] == {str(c): start}, "packing state: version, epoch, consumed")
    need((p["capacity"], p["rows"], p["buffer"]) == (o["capacity"], o["rows"], o["buffer"]), "packing state: options")
    need(p["windows"] == {str(c): {"carry": carry, "delivered": n + 1}}, "packing state: window")
    need(p["equal"] is False, "packing state: equal")
    state = v["equal_resume_state"]
    args = (length, o["capacity"], o["rows"], o["buffer"])
    batches = pack(shares[c], *args, splits=equal_splits(shares, *args)[c])
    _, _, start, carry, n = batches[k - 1]
    p = state["packing"]
    need(state["version"] == 3 and state["consumed"] == {str(c): start} and p["equal"] is True, "equal counts state: version, consumed, equal")
    need(p["windows"] == {str(c): {"carry": carry, "delivered": n + 1}}, "equal counts state: window")


def window_order(counts, shuffle, epoch, nblocks=1):
    """Section 7.6: the source stream cut into `nblocks` blocks, each block's
    windows of 2B shuffled by their streams."""
    source = source_stream(counts, shuffle, epoch)
    if not shuffle:
        return source
    n, w, out = len(source), 2 * shuffle["buffer"], []
    for b in range(nblocks):
        lo, hi = b * n // nblocks, (b + 1) * n // nblocks
        for k, start in enumerate(range(lo, hi, w)):
            window = source[start:min(start + w, hi)]
            Rng(stream_seed(shuffle["seed"], epoch, WINDOWS, (b * 2**32 + k) & MASK)).shuffle(window)
            out += window
    return out


def blocks(positions, consumers, remainder="keep"):
    """Section 7.6: each consumer's block of the tail, with repeats."""
    n = len(positions)
    out = []
    for c in range(consumers):
        lo, hi = c * n // consumers, (c + 1) * n // consumers
        count = {"keep": hi - lo, "drop": n // consumers, "repeat": -(-n // consumers)}[remainder]
        out.append([positions[lo + j] if lo + j < hi else positions[lo] if hi > lo else positions[c % n] for j in range(count)])
    return out


def ranges_of(positions):
    """Increasing positions as `[start, end)` ranges, neighbours joined."""
    out = []
    for p in positions:
        if out and out[-1][1] == p:
            out[-1][1] = p + 1
        else:
            out.append([p, p + 1])
    return out


def check_locality(directory, counts, shuffle):
    """Section 7.6 against dataset/locality.json."""
    with open(os.path.join(directory, "locality.json"), "rb") as f:
        v = json.load(f)
    epoch, total = v["epoch"], sum(map(sum, counts))
    need(window_order(counts, shuffle, epoch) == v["order"], "locality order")
    # The order of C consumers is cut into C blocks.
    order = window_order(counts, shuffle, epoch, v["consumers"])
    need(sorted(order) == list(range(total)), "the locality order is a permutation")
    ids = [[order[p] for p in b] for b in blocks(list(range(total)), v["consumers"])]
    need(ids == v["ids"], "locality blocks")
    state = v["resume_state"]
    need(state["version"] == 5 and state["blocks"] == v["consumers"] and state["ranges"] == [[0, total]]
         and state["frontier"] == 0 and state["skip"] == [], "locality state")
    tail = [p for a, b in state["ranges"] for p in range(a, b)]
    consumed = {int(k): n for k, n in state["consumed"].items()}
    done = set()
    for c, block in enumerate(blocks(tail, state["consumers"])):
        done |= set(block[:consumed[c]])
    rest = [p for p in tail if p not in done]
    need(ranges_of(rest) == v["resume_ranges"], "locality resumed ranges")
    got = [[order[p] for p in b] for b in blocks(rest, v["resume_consumers"])]
    need(got == v["resume_ids"], "locality resumed blocks")
    need(sorted([order[p] for p in done] + [i for b in got for i in b]) == list(range(total)), "locality resume: every sequence exactly once")
    order = window_order(counts, shuffle, epoch, v["repeat_consumers"])
    got = [[order[p] for p in b] for b in blocks(list(range(total)), v["repeat_consumers"], "repeat")]
    need(got == v["repeat_ids"], "locality blocks with repeat")


def check(directory):
    with open(os.path.join(directory, "lodt-dataset.json"), "rb") as f:
        manifest = json.load(f)
    need(manifest["format"] == "lodt-dataset", "format")
    need(manifest["version"]["major"] == 1, "major version")
    commits = manifest.get("commits", [])  # 1.1, section 3.1
    need(len(commits) <= 1024 and len(set(commits)) == len(commits), "commits: at most 1024, none twice")
    for c in commits:
        need(re.fullmatch(r"[A-Za-z0-9._-]{1,128}", c) is not None, "commit id " + repr(c))
    schema = manifest["schema"]["tensors"]
    counts, total, length = [], 0, []
    for entry in manifest["shards"]:
        name = entry["name"]
        with open(os.path.join(directory, name), "rb") as f:
            b = f.read()
        need(len(b) == entry["bytes"], name + ": byte size")
        need(u32(b, len(b) - 64 + 24) == entry["footer_crc"], name + ": footer CRC")
        # Section 3: the shard's format version, "1.0" when the entry has none.
        version = "%d.%d" % (b[12] | b[13] << 8, b[14] | b[15] << 8)
        need(entry.get("format_version", "1.0") == version, name + ": format version")
        _, batches = read_file(b)
        need(len(batches) == entry["batches"], name + ": batch count")
        per_batch = []
        levels = [[0] * t["lod_levels"] for t in schema]
        rows = [0] * len(schema)
        for _, tensors in batches:
            need(sorted(tensors) == sorted(t["name"] for t in schema), name + ": tensor names")
            _, shape0, lod0, _ = tensors[schema[0]["name"]]
            if lod0:  # the rows of each sequence of the first tensor (packing's lengths)
                top = lod0[0]
                for level in lod0[1:]:
                    top = [level[o] for o in top]
                length += [b - a for a, b in zip(top, top[1:])]
            tops = set()
            for i, t in enumerate(schema):
                dtype, shape, lod, _ = tensors[t["name"]]
                need(dtype == t["dtype"] and shape[1:] == t["element_shape"], name + ": schema")
                need(len(lod) == t["lod_levels"] and len(shape) >= 1, name + ": schema levels")
                tops.add(len(lod[0]) - 1 if lod else shape[0])
                for level, offsets in enumerate(lod):
                    levels[i][level] += len(offsets) - 1
                rows[i] += shape[0]
            need(len(tops) == 1, name + ": top-level sequences agree")
            per_batch.append(tops.pop())
        need(per_batch == entry["batch_sequences"], name + ": batch_sequences")
        need(sum(per_batch) == entry["sequences"], name + ": sequences")
        need([{"levels": l, "rows": r} for l, r in zip(levels, rows)] == entry["tensors"], name + ": counts")
        counts.append(per_batch)
        total += sum(per_batch)

    with open(os.path.join(directory, "orders.json"), "rb") as f:
        orders = json.load(f)
    shuffle = orders["shuffle"]
    need(orders["unshuffled"] == list(range(total)), "unshuffled order")
    need(epoch_order(counts, shuffle, 0) == orders["epoch0"], "epoch 0 order")
    need(epoch_order(counts, shuffle, 1) == orders["epoch1"], "epoch 1 order")
    state = orders["resume_state"]
    need(state["sequences"] == total and state["shuffle"] == shuffle, "resume state")
    frontier, skip = advance(total, state)
    need({"frontier": frontier, "skip": skip} == orders["resume_base"], "resumed base")
    order = epoch_order(counts, shuffle, state["epoch"])
    rest = [order[p] for p in range(frontier, total) if p not in set(skip)]
    c_new = orders["resume_consumers"]
    need([rest[c::c_new] for c in range(c_new)] == orders["resume_ids"], "resumed partitions")
    # Exactly once: what the old consumers took plus what the new ones get.
    c_old = state["consumers"]
    old = [order[c + j * c_old] for c, n in state["consumed"].items() for c in [int(c)] for j in range(n)]
    need(sorted(old + rest) == list(range(total)), "every sequence exactly once")
    check_cursor(counts, shuffle, orders["cursor"])
    check_joined(directory, counts, shuffle, orders["joined"])
    need(len(length) == total, "sequence lengths")
    check_packing(directory, counts, length, shuffle)
    check_locality(directory, counts, shuffle)
    check_index(directory, manifest)
    return len(manifest["shards"]), total, length


def u64(b, at):
    return int.from_bytes(b[at:at + 8], "little")


def check_index(directory, manifest):
    """Section 3.2: the manifest's first line names the index; the index's
    header, section table and CRCs, and every entry it gives equal the JSON's.
    A manifest of a writer before 1.5 names none: nothing to check."""
    with open(os.path.join(directory, "lodt-dataset.json"), "rb") as f:
        text = f.read()
    first = text.split(b"\n", 1)[0]
    if manifest["version"]["minor"] < 5:
        need(b'"index"' not in first, "index: a manifest before 1.5 names none")
        return
    need(first.endswith(b","), "index: the first line ends with ','")
    line = json.loads(first[:-1] + b"}")
    pointer = line["index"]
    need(re.fullmatch(r"lodt-dataset\.index\.[A-Za-z0-9._-]{1,128}", pointer["name"]) is not None, "index: name")
    need(re.fullmatch(r"[0-9a-f]{8}", pointer["crc"]) is not None, "index: crc")
    with open(os.path.join(directory, pointer["name"]), "rb") as f:
        b = f.read()
    need(b[:8] == b"LODT-IDX", "index: magic")
    need(int.from_bytes(b[8:10], "little") == 1, "index: major version")
    need(u32(b, 12) == 10, "index: 10 sections")
    header_crc = zlib.crc32(b[:304])
    need(header_crc == u32(b, 304) == int(pointer["crc"], 16), "index: header CRC")
    need(u64(b, 32) == len(text), "index: the manifest's size")
    shards, entries = u64(b, 16), u64(b, 24)
    sections, end = [], 312
    for i in range(10):
        at = 64 + 24 * i
        offset, length, crc = u64(b, at), u64(b, at + 8), u32(b, at + 16)
        need(offset % 8 == 0 and offset >= end and offset + length <= len(b), "index: section %d's place" % i)
        need(zlib.crc32(b[offset:offset + length]) == crc, "index: section %d's CRC" % i)
        sections.append(b[offset:offset + length])
        end = offset + length
    head = json.loads(sections[0])
    need({k: head[k] for k in ("format", "version", "schema", "metadata", "commits")}
         == {k: manifest.get(k, {} if k == "metadata" else []) for k in ("format", "version", "schema", "metadata", "commits")},
         "index: the head section")
    words = lambda sec: [u64(sections[sec], 8 * i) for i in range(len(sections[sec]) // 8)]
    starts, offsets, batch, sizes, names_at = words(1), words(2), words(3), words(4), words(7)
    tensors = words(9)
    k = sum(t["lod_levels"] + 1 for t in head["schema"]["tensors"])
    need(len(starts) == len(offsets) == len(names_at) == shards + 1 and len(batch) == entries, "index: lengths")
    need(len(sizes) == shards and len(sections[5]) == 4 * shards and len(sections[6]) == 2 * shards, "index: lengths")
    need(len(tensors) == k * shards, "index: tensor counts' length")
    decoded = []
    for s in range(shards):
        mine = batch[offsets[s]:offsets[s + 1]]
        version = int.from_bytes(sections[6][2 * s:2 * s + 2], "little")
        counts, w = [], k * s
        for t in head["schema"]["tensors"]:
            counts.append({"levels": tensors[w:w + t["lod_levels"]], "rows": tensors[w + t["lod_levels"]]})
            w += t["lod_levels"] + 1
        entry = {
            "name": sections[8][names_at[s]:names_at[s + 1]].decode(),
            "bytes": sizes[s],
            "footer_crc": u32(sections[5], 4 * s),
            "batches": len(mine) - 1,
            "sequences": starts[s + 1] - starts[s],
            "batch_sequences": [q - p for p, q in zip(mine, mine[1:])],
            "tensors": counts,
        }
        need(mine[0] == 0 and mine[-1] == entry["sequences"], "index: shard %d's batch starts" % s)
        if version:
            entry["format_version"] = "%d.%d" % (version >> 8, version & 0xFF)
        decoded.append(entry)
    need(decoded == manifest["shards"], "index: the shard entries equal the manifest's")


SOURCE, DRAWS = 4, 5  # the purposes of the Mixtures section


def dataset_counts(directory):
    """Per shard, the sequences of each batch (from the manifest)."""
    with open(os.path.join(directory, "lodt-dataset.json"), "rb") as f:
        return [entry["batch_sequences"] for entry in json.load(f)["shards"]]


def mixture_stream(counts, weights, seed, stop, shuffle, epoch):
    """Mixtures section: the (source, id) of every position of an epoch."""
    sizes = [sum(sum(c) for c in cs) for cs in counts]
    # Section 10.2: the weights scaled by the power of two that brings the
    # largest into [1, 2) (exact for normal weights; equal subnormal ones
    # then draw equally).
    exponent = math.frexp(max(weights))[1] - 1
    weights = [math.ldexp(w, -exponent) for w in weights]
    cumulative, total = [], 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    last = max(k for k, w in enumerate(weights) if w > 0)
    rng = Rng(stream_seed(seed, epoch, DRAWS, 0))

    def pick():
        x = ((rng.next() >> 11) * 2.0**-53) * total
        return next((k for k, c in enumerate(cumulative) if c > x), last)

    def source_order(k, rep):
        s = None if shuffle is None else {"seed": stream_seed(shuffle["seed"], epoch, SOURCE, k), "buffer": shuffle["buffer"]}
        return epoch_order(counts[k], s, rep)

    drawn, out, orders = [0] * len(counts), [], {}
    unfinished = sum(1 for w in weights if w > 0)
    while True:
        if stop == {"sequences": len(out)}:
            return out
        k = pick()
        if stop == "first_exhausted" and drawn[k] == sizes[k]:
            return out
        j = drawn[k]
        drawn[k] += 1
        if j % sizes[k] == 0:
            orders[k] = source_order(k, j // sizes[k])
        out.append([k, orders[k][j % sizes[k]]])
        if stop == "all_exhausted" and drawn[k] == sizes[k]:
            unfinished -= 1
            if unfinished == 0:
                return out


EVOLVED_DRAWS = 7  # the purpose of the draws after a change (section 10.6)


def fingerprint(directory, first=None):
    """Section 7.2: the CRC32 of the shard list (of its first `first` shards)."""
    with open(os.path.join(directory, "lodt-dataset.json"), "rb") as f:
        shards = json.load(f)["shards"][:first]
    data = b""
    for e in shards:
        name = e["name"].encode()
        data += len(name).to_bytes(8, "little") + name + e["bytes"].to_bytes(8, "little")
        data += e["footer_crc"].to_bytes(4, "little") + e["sequences"].to_bytes(8, "little")
    return zlib.crc32(data)


def draws(weights, sizes, seed, stop, epoch, evolved=None):
    """Sections 10.2, 10.4 and 10.6: the (source, draw index) of every
    position of an epoch, from its start or after a change `evolved`."""
    exponent = math.frexp(max(weights))[1] - 1
    weights = [math.ldexp(w, -exponent) for w in weights]
    cumulative, total = [], 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    last = max(k for k, w in enumerate(weights) if w > 0)
    if evolved is None:
        rng, delivered = Rng(stream_seed(seed, epoch, DRAWS, 0)), 0
        done = [(0, set()) for _ in sizes]
    else:
        rng, delivered = Rng(stream_seed(seed, epoch, EVOLVED_DRAWS, evolved["delivered"])), evolved["delivered"]
        done = [(p["frontier"], set(p["skip"])) for p in evolved["sources"]]
    nxt = []
    for frontier, skip in done:
        j = frontier
        while j in skip:
            j += 1
        nxt.append(j)

    def take(k):
        j = nxt[k]
        nxt[k] += 1
        while nxt[k] in done[k][1]:
            nxt[k] += 1
        return j

    out = []
    unfinished = sum(1 for k, w in enumerate(weights) if w > 0 and nxt[k] < sizes[k])
    if stop == "all_exhausted" and unfinished == 0:
        return out
    while True:
        if isinstance(stop, dict) and delivered + len(out) >= stop["sequences"]:
            return out
        x = ((rng.next() >> 11) * 2.0**-53) * total
        k = next((k for k, c in enumerate(cumulative) if c > x), last)
        if stop == "first_exhausted" and nxt[k] >= sizes[k]:
            return out
        was = nxt[k] < sizes[k]
        out.append((k, take(k)))
        if stop == "all_exhausted" and was and nxt[k] >= sizes[k]:
            unfinished -= 1
            if unfinished == 0:
                return out


def evolved_stream(counts, shuffle, epoch, stream, orders):
    """Section 10.3 with 10.6's order indices: the id of each draw."""
    out = []
    for k, j in stream:
        n = sum(sum(c) for c in counts[k])
        s = None if shuffle is None else {"seed": stream_seed(shuffle["seed"], epoch, SOURCE, orders[k]), "buffer": shuffle["buffer"]}
        out.append([k, epoch_order(counts[k], s, j // n)[j % n]])
    return out


def change(old_sources, progress, removed, consumed, delivered, new_sources, epoch):
    """Section 10.6: the progress after the consumed positions, matched with
    the new sources (by sequences and fingerprint, in order)."""
    for p, (k, j) in consumed:
        progress[k][1].add(j)
        delivered += 1
    entries = []
    for (n, f), (order, js) in list(zip(old_sources, progress)) + [((r["sequences"], r["fingerprint"]), (r["order"], set(range(r["frontier"])) | set(r["skip"]))) for r in removed]:
        frontier = 0
        while frontier in js:
            frontier += 1
        entries.append({"sequences": n, "fingerprint": f, "order": order, "frontier": frontier, "skip": sorted(j for j in js if j > frontier)})
    fresh = max(e["order"] for e in entries) + 1
    sources, taken = [], set()
    for n, f in new_sources:
        i = next((i for i, e in enumerate(entries) if i not in taken and (e["sequences"], e["fingerprint"]) == (n, f)), None)
        if i is None:
            sources.append({"sequences": n, "fingerprint": f, "order": fresh, "frontier": 0, "skip": []})
            fresh += 1
        else:
            taken.add(i)
            sources.append(entries[i])
    left = [e for i, e in enumerate(entries) if i not in taken and (e["frontier"] > 0 or e["skip"])]
    return {"epoch": epoch, "delivered": delivered, "sources": sources, "removed": left}


def check_evolve(path):
    with open(path, "rb") as f:
        vector = json.load(f)
    directory = os.path.join(os.path.dirname(os.path.abspath(path)), vector["sources"])
    counts, key = dataset_counts(directory), None
    key = (sum(sum(c) for c in counts), fingerprint(directory))
    seed, shuffle, epoch = vector["seed"], vector["shuffle"], vector["epoch"]
    first, second, third = vector["first"], vector["second"], vector["third"]
    # The first parameters, and what their two consumers consumed.
    old = draws(first["weights"], [key[0]] * 2, seed, first["stop"], epoch)
    frontier, skip = advance(len(old), first)
    taken = [(p, d) for p, d in enumerate(old) if p < frontier or p in set(skip)]
    evolved = change([key] * 2, [(k, set()) for k in range(2)], [], taken, 0, [key] * 3, epoch)
    need(evolved == second["evolved"], "the change to three sources")
    stream = draws(second["weights"], [key[0]] * 3, seed, second["stop"], epoch, evolved)
    orders = [p["order"] for p in evolved["sources"]]
    need(evolved_stream([counts] * 3, shuffle, epoch, stream, orders) == second["stream"], "the stream after the first change")
    # One consumer takes `consumed` positions; then the third source alone.
    progress = [(p["order"], set(range(p["frontier"])) | set(p["skip"])) for p in evolved["sources"]]
    taken = list(enumerate(stream[: second["consumed"]]))
    again = change([key] * 3, progress, evolved["removed"], taken, evolved["delivered"], [key], epoch)
    need(again == third["evolved"], "the change to one source")
    stream = draws(third["weights"], [key[0]], seed, third["stop"], epoch, again)
    orders = [p["order"] for p in again["sources"]]
    need(evolved_stream([counts], shuffle, epoch, stream, orders) == third["stream"], "the stream after the second change")
    ids = second["stream"][: second["consumed"]] + third["stream"]
    need(len(set(map(tuple, ids))) == len(ids), "the changed epoch delivers no draw twice")


def check_mixture(path):
    with open(path, "rb") as f:
        vector = json.load(f)
    here = os.path.dirname(os.path.abspath(path))
    counts = [dataset_counts(os.path.join(here, name)) for name in vector["sources"]]
    rules = {"first_exhausted": "first_exhausted", "all_exhausted": "all_exhausted", "sequences_30": {"sequences": 30}}
    for name, stop in rules.items():
        for epoch, expected in enumerate(vector[name]):
            got = mixture_stream(counts, vector["weights"], vector["seed"], stop, vector["shuffle"], epoch)
            need(got == expected, "mixture %s, epoch %d" % (name, epoch))
    # Section 7.4 over section 10: the packed mixed stream, by mixture ids.
    p = vector["packed"]
    lengths, offsets = [], []
    for name in vector["sources"]:
        offsets.append(len(lengths))
        lengths += check(os.path.join(here, name))[2]
    stream = mixture_stream(counts, vector["weights"], vector["seed"], p["stop"], vector["shuffle"], p["epoch"])
    ids = [offsets[k] + i for k, i in stream]
    shares = [ids[c :: p["consumers"]] for c in range(p["consumers"])]
    args = (lengths, p["capacity"], p["rows"], p["buffer"])
    splits = equal_splits(shares, *args) if p["equal"] else [{}] * len(shares)
    got = [[{"ids": i, "bins": b} for i, b, *_ in pack(s, *args, splits=sp)] for s, sp in zip(shares, splits)]
    need(got == p["batches"], "the packed mixture stream")
    need(sorted(i for share in got for b in share for i in b["ids"]) == sorted(ids), "packing the mixture delivers every position once")


VERSION_NAME = re.compile(r"^lodt-dataset\.version\.(0|[1-9][0-9]*)\.json$")
TAG_NAME = re.compile(r"^lodt-dataset\.tag\.([A-Za-z0-9_-][A-Za-z0-9._-]{0,63})\.json$")
TIME = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")
OPERATION = re.compile(r"^[a-z0-9_-]{1,32}$")


def check_versions(directory):
    """Section 3.3: the number of the main manifest, each kept version's
    record against its own manifest and the version before it, the log
    (every number from the first kept one, consecutive), and the tags."""
    names = sorted(os.listdir(directory))
    with open(os.path.join(directory, "lodt-dataset.json"), "rb") as f:
        main_bytes = f.read()
    main = json.loads(main_bytes)
    kept = {int(m.group(1)): n for n in names for m in [VERSION_NAME.match(n)] if m}
    record = main.get("commit")
    number = record["version"] if record else (max(kept) + 1 if kept else 0)
    versions = dict(kept)
    log = []
    for n in sorted(set(versions) | {number}):
        if n in kept:
            with open(os.path.join(directory, kept[n]), "rb") as f:
                raw = f.read()
            m = json.loads(raw)
        else:
            raw, m = main_bytes, main  # its copy not written yet: the main manifest
        sequences = sum(s["sequences"] for s in m["shards"])
        size = sum(s["bytes"] for s in m["shards"])
        r = m.get("commit")
        if r is None:
            r = {"version": n, "operation": "unrecorded", "sequences": sequences, "bytes": size}
        else:
            need(r["version"] == n, "version %d: its manifest records version %d" % (n, r["version"]))
            need(OPERATION.match(r["operation"]) is not None, "version %d: the operation" % n)
            need(TIME.match(r["time"]) is not None if "time" in r else r["operation"] == "unrecorded",
                 "version %d: the time" % n)
            need((r["sequences"], r["bytes"]) == (sequences, size), "version %d: the totals" % n)
            before = log[-1] if log else {"sequences": 0, "bytes": 0}
            for what in ("sequences", "bytes"):
                need(r[what + "_added"] == max(0, r[what] - before[what])
                     and r[what + "_removed"] == max(0, before[what] - r[what]),
                     "version %d: %s added and removed" % (n, what))
            if n == number and n in kept:
                # A final commit's copy is the bytes committed (the main manifest
                # as long as no checkpoint or index rewrite replaced it).
                need(raw == main_bytes or m["shards"] == main["shards"][:len(m["shards"])],
                     "version %d: its copy and the main manifest" % n)
        log.append(r)
    numbers = [r["version"] for r in log]
    need(numbers == list(range(numbers[0], numbers[0] + len(numbers))), "the versions are consecutive")
    tags = 0
    for n in names:
        t = TAG_NAME.match(n)
        if not t or t.group(1).isdigit():
            continue
        with open(os.path.join(directory, n), "rb") as f:
            tag = json.loads(f.read())
        need(tag["format"] == "lodt-dataset-tag" and tag["name"] == t.group(1), "tag %s" % n)
        need(tag["version"] in numbers, "tag %s names a version that exists" % n)
        tags += 1
    return log, tags


def _versions_message(result):
    log, tags = result
    return "ok: %d versions (%s) and %d tags agree with their manifests" % (
        len(log), ", ".join("%d %s" % (r["version"], r["operation"]) for r in log), tags)


def _dataset_message(result):
    shards, total, _ = result
    return "ok: %d shards and the manifest agree; %d sequences; epoch orders, the cursor, the joined order, the world-size resume, packing, locality and the shard index match" % (shards, total)


# Per flag: the check, its default input (relative to this script) and the
# line printed when it passes; no flag checks the dataset vector.
MODES = {
    "--versions": (check_versions, "dataset", _versions_message),
    "--evolve": (check_evolve, os.path.join("mixture", "evolve.json"),
                 lambda _: "ok: the mixture changed twice in an epoch continues each source as section 10.6 says"),
    "--mixture": (check_mixture, os.path.join("mixture", "mixture.json"),
                  lambda _: "ok: the mixture streams of first_exhausted, all_exhausted and 30 sequences, and the packed stream, match"),
    None: (check, "dataset", _dataset_message),
}


def main():
    args = sys.argv[1:]
    flag = args[0] if args and args[0] in MODES else None
    rest = args[1:] if flag else args
    run, default, message = MODES[flag]
    target = rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), default)
    try:
        result = run(target)
    except Bad as e:
        print("FAILED: " + str(e))
        return 1
    print(message(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
