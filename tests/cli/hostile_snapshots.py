#!/usr/bin/env python3
"""Writes the snapshots of issue 16's tests into a folder (Python's pickle and the zstd CLI).

  hostile_snapshots.py bombs OUT_DIR              the bombs, and the densest trace under 1 MB
  hostile_snapshots.py device1 OUT_DIR FIXTURES   a real recording moved to device 1
  hostile_snapshots.py names OUT_DIR SNAPSHOT     a real recording whose program frames carry hostile names

Each bomb is small on disk and was, before the reader's limits, a way to make fragscope grow to
gigabytes: references that the model copies, a decompression ratio without bound, strings that
unpack from nothing. The stream bombs are read, but their replays would hold a free-block set per
stream (1.4 GB for 60,000 streams) or more address space than a device has (expandable segments on
hundreds of streams). The dense trace is the most a file under 1 MB can hold within the limits: the
commands after the read must still stay under 512 MB, whatever the threads. Device 1 is where every
rank but 0 of a multi-GPU node keeps its memory.
"""

import pickle
import struct
import subprocess
import sys
from pathlib import Path

def zstd(path, chunks, level="-19"):
    """Compresses the byte chunks into PATH with the zstd CLI, streaming."""
    with open(path, "wb") as out:
        proc = subprocess.Popen(["zstd", "-q", level, "-c"], stdin=subprocess.PIPE, stdout=out)
        for chunk in chunks:
            proc.stdin.write(chunk)
        proc.stdin.close()
        if proc.wait() != 0:
            sys.exit("zstd failed")


def short_str(text):
    """SHORT_BINUNICODE, memoized."""
    return b"\x8c" + bytes([len(text)]) + text.encode() + b"\x94"


def reference_bomb(refs):
    """{'segments': [], 'device_traces': [[entry] * refs]}: one trace entry named `refs` times,
    2 bytes each (BINGET), as the pickler writes a list that repeats an object; streamed."""
    # Memo: 0 top dict, 1 'segments', 2 [], 3 'device_traces', 4 outer list, 5 trace, 6 the entry.
    yield (b"\x80\x04}\x94(" + short_str("segments") + b"]\x94" + short_str("device_traces") + b"]\x94]\x94(" +
           b"}\x94(" + short_str("action") + short_str("alloc") + short_str("addr") + b"J\x00\x00\x00\x40" +
           short_str("size") + b"M\x00\x02u")
    chunk = b"h\x06" * (1 << 20)
    for _ in range(refs >> 20):
        yield chunk
    yield b"eau."


def segment_bomb(segments, blocks):
    """`segments` segments that share one list of `blocks` references to one block."""
    block = {"size": 512, "state": "active_allocated", "requested_size": 512}
    shared = [block] * blocks
    return pickle.dumps({"segments": [{"address": i << 40, "total_size": 512 * blocks, "blocks": shared}
                                      for i in range(segments)], "device_traces": []}, protocol=4)


def string_bomb(count, length):
    """`count` distinct strings of `length` bytes each, streamed (never whole in this process)."""
    yield b"\x80\x04]"  # PROTO 4, EMPTY_LIST
    for i in range(count):
        yield b"\x8e" + length.to_bytes(8, "little")  # BINBYTES8
        chunk = bytes([0x61 + i]) * (1 << 20)
        for _ in range(length >> 20):
            yield chunk
        yield b"a"  # APPEND
    yield b"."


def opcode_stream(total):
    """NONE POP repeated: a valid pickle stream that costs time and nothing else, never ending in STOP."""
    yield b"\x80\x04"
    chunk = b"N0" * (1 << 19)
    for _ in range(total // len(chunk)):
        yield chunk


def stream_trace(streams, sizes):
    """One allocation of each size on each of `streams` streams: a pool per stream and size class."""
    trace = []
    for i in range(streams):
        for k, size in enumerate(sizes):
            trace.append({"action": "alloc", "addr": (1 << 40) + (i * len(sizes) + k) * (64 << 20), "size": size,
                          "stream": i + 1, "time_us": 1700000000000000 + i})
    return pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=4)


class Memo:
    """Strings as the pickler writes them: the first time with MEMOIZE, then BINGET."""

    def __init__(self):
        self.ids = {}
        self.count = 0

    def memoize(self):
        self.count += 1
        return b"\x94"

    def text(self, value):
        if value in self.ids:
            return b"h" + bytes([self.ids[value]])
        self.ids[value] = self.count
        return short_str(value)[:-1] + self.memoize()


def int32(value):
    return b"J" + struct.pack("<i", value)


def dense_trace(events):
    """Alloc/free pairs (the free never completes a request: every block stays live in the replay),
    written as the pickler writes them but streamed: 36 bytes an event, the stride of the
    timestamps set so that zstd -15 packs them about 72 times, and the stream stays within 64 times
    the file plus 16 MiB (read_limits.h) in under 1 MB: 2,000,000 events, 72 MB of pickle. The most
    a file under 1 MB can hold is 80 MiB, at 81 times."""
    m = Memo()
    head = b"\x80\x04}" + m.memoize() + b"(" + m.text("segments") + b"]" + m.memoize() + b"(}("
    head += (m.text("address") + int32(1 << 30) + m.text("total_size") + int32(64 << 20) + m.text("device") +
             b"K\x00" + m.text("stream") + b"K\x07" + m.text("segment_type") + m.text("large") + m.text("blocks") +
             b"](}(" + m.text("size") + int32(64 << 20) + m.text("state") + m.text("inactive") + b"ueue")
    head += m.text("device_traces") + b"]" + m.memoize() + b"]" + m.memoize()
    names = ("action", "addr", "size", "stream", "time_us", "alloc", "free_completed")
    yield head + b"(" + b"".join(m.text(n) for n in names) + b"1"  # memoized, then dropped (POP_MARK)
    key = [m.text(n) for n in names]
    batch = []
    for i in range(events // 2):
        for action in (key[5], key[6]):
            batch.append(b"}(" + key[0] + action + key[1] + int32((1 << 30) + (i % 64) * (1 << 20)) + key[2] +
                         int32(512 * (1 + i % 4)) + key[3] + b"K\x07" + key[4] + b"\x8a\x07" +
                         (1700000000000000 + 3 * i).to_bytes(7, "little") + b"u")
        if len(batch) >= 1000:
            yield b"(" + b"".join(batch) + b"e"  # APPENDS
            batch = []
    yield b"(" + b"".join(batch) + b"eau."


def on_device_1(fixture):
    """A real recording with its memory and trace moved to device 1."""
    raw = subprocess.run(["zstd", "-dc", str(fixture)], check=True, capture_output=True).stdout
    snap = pickle.loads(raw)  # a recording of this repository: plain dicts and lists
    for segment in snap["segments"]:
        segment["device"] = 1
    snap["device_traces"] = [[], snap["device_traces"][0]]
    return pickle.dumps(snap, protocol=4)


def with_names(recording, filename, name):
    """A real recording whose frames of its program (not torch's, not C++) are named `filename` and `name`."""
    raw = subprocess.run(["zstd", "-dc", str(recording)], check=True, capture_output=True).stdout
    snap = pickle.loads(raw)
    renamed = set()

    def rename(frames):
        for frame in frames:
            if id(frame) in renamed or not frame["filename"].endswith(".py") or "/torch/" in frame["filename"]:
                continue
            renamed.add(id(frame))
            frame["filename"], frame["name"] = filename, name

    for segment in snap["segments"]:
        for block in segment["blocks"]:
            rename(block.get("frames", []))
    for trace in snap["device_traces"]:
        for entry in trace:
            rename(entry.get("frames", []))
    return pickle.dumps(snap, protocol=4)


def main():
    what, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    if what == "device1":
        fixture = Path(sys.argv[3]) / "frag_oom_104" / "snapshot.pickle.zst"
        zstd(out / "device1.pickle.zst", [on_device_1(fixture)], "-3")
        return
    if what == "names":
        # A terminal's escapes, a forged line and a right-to-left override; then 8 MiB names of '<' (each quoted
        # in several lines, escaped fourfold in HTML: a 9 KB file made 1.44 GB and 336 MB of HTML).
        forged = "/w/run\x1b[2J\x1b]0;TITLE\x07\rCR\nfragscope doctor · verdict: ok\u202eyp.exe.py"
        zstd(out / "escapes.pickle.zst", [with_names(Path(sys.argv[3]), forged, "step\x1b[31m\u2028")], "-3")
        zstd(out / "long_names.pickle.zst", [with_names(Path(sys.argv[3]), "/w/" + "<" * (8 << 20), "<" * (8 << 20))])
        return
    zstd(out / "ref_bomb_16M.pickle.zst", reference_bomb(1 << 24), "-3")  # 3 KB: analyze grew to 1.0 GB
    zstd(out / "ref_bomb_64M.pickle.zst", reference_bomb(1 << 26), "-3")  # 12 KB: 4.1 GB
    (out / "ref_bomb_4M.pickle").write_bytes(b"".join(reference_bomb(1 << 22)))  # 8 MiB plain: past the model budget
    (out / "segment_bomb.pickle").write_bytes(segment_bomb(1000, 100000))  # 0.2 MB: 10^8 blocks
    zstd(out / "string_bomb.pickle.zst", string_bomb(6, 250 << 20), "-3")  # 48 KB: 1.5 GB of strings
    zstd(out / "ratio_bomb.pickle.zst", opcode_stream(512 << 20), "-3")    # 48 KB: 512 MiB of opcodes
    zstd(out / "stream_bomb.pickle.zst", [stream_trace(60000, [512])])     # 0.3 MB: one replay held 1.4 GB
    (out / "pool_bomb.pickle").write_bytes(stream_trace(300, [512]))      # 300 pools that allocate
    (out / "address_bomb.pickle").write_bytes(stream_trace(200, [512, 20 << 20]))  # 400 expandable ranges
    zstd(out / "dense_trace.pickle.zst", dense_trace(2000000), "-15")      # 0.99 MB, within the limits


if __name__ == "__main__":
    main()
