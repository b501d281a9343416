#!/usr/bin/env python3
"""The doctor on every labelled OOM recording as three recording options would have left it:
without any call stack (`_record_memory_history(context=None)`), with the allocations' stacks
only (`context="alloc"`: frees and segment releases carry none), and with Python frames only
(`stacks="python"`: no C++ frames). Each must get the recording's label or `undetermined`, never
the other verdict.

    scripts/doctor_without_stacks.py [BINARY] [--keep DIR]     (default build/src/cli/fragscope)

--keep DIR writes each stripped snapshot to DIR/<recording>-<option>.pickle.gz (option: context_None,
context_alloc, stacks_python), to run the doctor on one by hand with the recording's log.

Prints each wrong verdict, then the totals per option; exit status 1 when any verdict is wrong.
The recordings and their logs are those of scripts/doctor_ring_cuts.py.
"""
import gzip
import importlib.util
import json
import os
import pickle
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FREES = ("free_requested", "free_completed", "segment_free", "segment_unmap")

# The recordings, their loader, and the arguments ([BINARY] [--keep DIR], read as that script reads them).
spec = importlib.util.spec_from_file_location("ring_cuts", os.path.join(ROOT, "scripts/doctor_ring_cuts.py"))
ring_cuts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ring_cuts)
BIN, KEEP = ring_cuts.BIN, ring_cuts.KEEP


def python_frames(frames):
    return [f for f in frames if f.get("filename", "").endswith(".py")]


def strip(snap, option):
    for trace in snap.get("device_traces", []):
        for event in trace:
            if option == 'stacks="python"':
                event["frames"] = python_frames(event.get("frames", []))
            elif option == "context=None" or event["action"] in FREES:
                event["frames"] = []
    if option == 'stacks="python"':
        for segment in snap.get("segments", []):
            segment["frames"] = python_frames(segment.get("frames", []))
            for block in segment.get("blocks", []):
                block["frames"] = python_frames(block.get("frames", []))
    if option == "context=None":
        for segment in snap.get("segments", []):
            segment["frames"] = []
            for block in segment.get("blocks", []):
                block["frames"] = []


def main():
    totals = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, snap_path, log, meta, label in ring_cuts.recordings():
            if log is None:
                message = json.load(open(meta)).get("oom_message")
                log = os.path.join(scratch, "train.log")
                with open(log, "w") as f:
                    f.write(f"torch.OutOfMemoryError: {message}\n" if isinstance(message, str) else "")
            for option in ("context=None", 'context="alloc"', 'stacks="python"'):
                snap = ring_cuts.load(snap_path)
                strip(snap, option)
                path = os.path.join(scratch, "snapshot.pickle.gz")
                if KEEP:
                    os.makedirs(KEEP, exist_ok=True)
                    tag = option.replace('"', "").replace("=", "_")
                    path = os.path.join(KEEP, f"{name.replace('/', '_')}-{tag}.pickle.gz")
                with gzip.open(path, "wb", compresslevel=1) as f:
                    pickle.dump(snap, f, protocol=4)
                run = subprocess.run([BIN, "doctor", "--json", "--quiet", path, log], capture_output=True, text=True)
                try:
                    verdict = json.loads(run.stdout)["verdict"]
                except (ValueError, KeyError):
                    verdict = "error: " + run.stderr.strip()[:200]
                mark = "right" if verdict == label else "undetermined" if verdict == "undetermined" else "WRONG"
                counts = totals.setdefault(option, {"right": 0, "undetermined": 0, "WRONG": 0})
                counts[mark] += 1
                if mark == "WRONG":
                    print(f"{option}\t{name}\t{label}\t{verdict}\tWRONG", flush=True)
    for option, counts in totals.items():
        print(f"{option:16s} {sum(counts.values())} labelled OOMs: {counts['right']} right, "
              f"{counts['undetermined']} undetermined, {counts['WRONG']} wrong")
    return 1 if any(counts["WRONG"] for counts in totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
