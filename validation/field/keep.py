#!/usr/bin/env python3
"""Keeps one labelled field recording as a test (tests/data/field/NAME), after its predictions were committed.

    validation/field/keep.py NAME RUN_DIR RERUN_DIR CALIBRATION_TRUTH [LABEL]

RUN_DIR, RERUN_DIR: a batch's run and its rerun under expandable segments (NAME_x), as field_end packs them;
CALIBRATION_TRUTH: the calibration run's truth.json. Copies what the user has (the snapshot, recompressed from the
device's gzip to zstd -15, and train.log) and writes truth.json: the run's, with `label` (the rerun completed →
fragmentation, else capacity, unless LABEL is given), the rerun's figures (`rerun`) and the calibration's. Refuses a
NAME already kept.
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    name, run, rerun, calibration = sys.argv[1:5]
    dst = os.path.join(ROOT, "tests/data/field", name)
    if os.path.exists(dst):  # names are short; a batch's may be an earlier batch's (kd_* twice: batches 35 and 75)
        sys.exit(f"keep.py: {dst} exists: another recording has that name; choose another")
    os.makedirs(dst)
    for f in os.listdir(os.path.join(run, "user")):
        src = os.path.join(run, "user", f)
        if f.endswith(".pickle.gz"):
            pickle = subprocess.run(["gzip", "-dc", src], check=True, capture_output=True).stdout
            out = os.path.join(dst, f[:-len(".gz")] + ".zst")
            subprocess.run(["zstd", "-q", "-15", "-f", "-o", out], input=pickle, check=True)
        elif f == "train.log":
            shutil.copy(src, dst)
    truth = json.load(open(os.path.join(run, "truth.json")))
    again = json.load(open(os.path.join(rerun, "truth.json")))
    cal = json.load(open(calibration))
    truth["label"] = sys.argv[5] if len(sys.argv) > 5 else (
        "fragmentation" if again["outcome"] == "completed" else "capacity")
    truth["rerun"] = {k: again.get(k) for k in ("alloc_conf", "outcome", "max_memory_allocated", "max_memory_reserved",
                                                "num_alloc_retries")}
    if again["outcome"] == "error":
        truth["rerun"]["error"] = again.get("oom_message", "")[:200]
    truth["calibration"] = {k: cal.get(k) for k in ("argv", "outcome", "max_memory_allocated", "max_memory_reserved")}
    with open(os.path.join(dst, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    print(name, truth["label"], sorted(os.listdir(dst)))


if __name__ == "__main__":
    main()
