#!/usr/bin/env python3
"""Makes the reader's test inputs from a real recorded snapshot (standard library only).

    zstd -dc ../shared/fixtures/frag_oom_104/snapshot.pickle.zst | python3 make_test_pickles.py OUTDIR

Writes the same snapshot re-pickled with protocols 2, 3 and 5 (gzip-compressed, to keep the
repository small), and a legacy snapshot (a bare list of segments whose blocks carry `history`
instead of `frames`, as torch.cuda.memory_snapshot() returned before 2.1) built from it.
small_snapshot.pickle is an uncompressed 6-segment, 40-event excerpt for truncation tests.
device_past_32_bits.pickle is one hand-made segment on device 2**32 + 1, which a reader that
narrows to 32 bits before its range check takes for device 1.
Every file holds only builtins, so `pickle.load` reads it back identically.
"""
import gzip
import pickle
import sys


def legacy_segments(snapshot):
    segments = []
    live = [s for s in snapshot["segments"] if any(b["state"] == "active_allocated" for b in s["blocks"])]
    for seg in live[:40] + [s for s in snapshot["segments"] if s not in live][:10]:
        blocks = []
        for b in seg["blocks"]:
            block = {"size": b["size"], "state": b["state"]}
            if b["state"] == "active_allocated":
                block["history"] = [{"addr": b["address"], "real_size": b["requested_size"],
                                     "frames": b["frames"]}]
            blocks.append(block)
        segments.append({"device": seg["device"], "address": seg["address"],
                         "total_size": seg["total_size"], "allocated_size": seg["allocated_size"],
                         "active_size": seg["active_size"], "stream": seg["stream"],
                         "segment_type": seg["segment_type"], "blocks": blocks})
    return segments


def main():
    out = sys.argv[1]
    snapshot = pickle.load(sys.stdin.buffer)
    for protocol in (2, 3, 5):
        write_gzip(f"{out}/frag_oom_104.proto{protocol}.pickle.gz", snapshot, protocol)
    write_gzip(f"{out}/legacy_segments.pickle.gz", legacy_segments(snapshot), 2)
    small = {"segments": snapshot["segments"][:6], "device_traces": [snapshot["device_traces"][0][:40]],
             "allocator_settings": snapshot["allocator_settings"], "external_annotations": []}
    with open(f"{out}/small_snapshot.pickle", "wb") as f:  # uncompressed: truncation tests
        pickle.dump(small, f, protocol=4)
    with open(f"{out}/device_past_32_bits.pickle", "wb") as f:
        pickle.dump({"segments": [device_past_32_bits()], "device_traces": [[]]}, f, protocol=2)


def device_past_32_bits():
    return {"device": 2**32 + 1, "address": 139_637_976_727_552, "total_size": 2_097_152, "stream": 0,
            "segment_type": "small", "allocated_size": 512, "active_size": 512, "requested_size": 500,
            "blocks": [{"size": 512, "requested_size": 500, "state": "active_allocated"},
                       {"size": 2_097_152 - 512, "requested_size": 0, "state": "inactive"}]}


def write_gzip(path, obj, protocol):
    # mtime=0: the same input always gives the same bytes.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        pickle.dump(obj, f, protocol=protocol)


if __name__ == "__main__":
    main()
