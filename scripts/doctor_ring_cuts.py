#!/usr/bin/env python3
"""The doctor on every labelled OOM recording as a ring buffer or a late history start would
have left it: the trace's first 25%, 50%, 75% and 90% of events dropped (the snapshot's
segments, the state at the dump, stay as they are). Each cut must get the recording's label or
`undetermined`, never the other verdict.

    scripts/doctor_ring_cuts.py [BINARY] [--keep DIR]     (default build/src/cli/fragscope)

--keep DIR writes each cut's `doctor --json` to DIR/<recording>-<share>.json (to classify why
the undetermined ones are undetermined).

Prints one line per cut (recording, share cut, label, verdict, right / undetermined / WRONG; for
an undetermined one, why: the projection's `too_close` / `next_step` / `longest_batch` / `batches_grow` /
`unseen_batches` / `fit_rejected` with its fit checked or not, or why no projection was made), the totals, and the
undetermined cuts counted by why; exit status 1 when any verdict is wrong. The fixtures' and held-out recordings' OOM
message (meta.json) becomes a log as in scripts/doctor_scoreboard.sh; telemetry is left out.
"""
import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile

from projection_keys import projection_rule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = sys.argv[1:]
KEEP = None
if "--keep" in ARGS:
    KEEP = ARGS[ARGS.index("--keep") + 1]
    del ARGS[ARGS.index("--keep"):ARGS.index("--keep") + 2]
BIN = ARGS[0] if ARGS else os.path.join(ROOT, "build/src/cli/fragscope")
FIXTURES = os.environ.get("FRAGSCOPE_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))
CUTS = (0.25, 0.5, 0.75, 0.9)


def load(path):
    if path.endswith(".zst"):
        data = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
        return pickle.loads(data)
    with gzip.open(path) as f:
        return pickle.load(f)


def recordings():
    """(name, snapshot, log or None, meta.json or None, label)"""
    field = os.path.join(ROOT, "tests/data/field")
    for name in sorted(os.listdir(field)):
        truth = os.path.join(field, name, "truth.json")
        snap = os.path.join(field, name, "oom_snapshot.pickle.zst")
        if os.path.exists(truth) and os.path.exists(snap) and "label" in json.load(open(truth)):
            yield "field/" + name, snap, os.path.join(field, name, "train.log"), None, json.load(open(truth))["label"]
    for folder, label_file, snap_name in ((FIXTURES, "truth.json", "snapshot.pickle.zst"),
                                          (os.path.join(ROOT, "tests/data/heldout"), "label.json",
                                           "snapshot.pickle.gz")):
        for name in sorted(os.listdir(folder)):
            label_path = os.path.join(folder, name, label_file)
            snap = os.path.join(folder, name, snap_name)
            if not (os.path.exists(label_path) and os.path.exists(snap)):
                continue
            label = json.load(open(label_path))
            if label.get("outcome") == "oom":
                yield name, snap, None, os.path.join(folder, name, "meta.json"), label["label"]


def why_undetermined(report):
    """The reason an undetermined cut gives, from its doctor --json."""
    projection = report.get("trace_projection") or {}
    if projection.get("available"):
        checked = "fit unchecked" if projection.get("fit_error") is None else "fit checked"
        return f"projected: {projection_rule(report)}, {checked}"
    reason = projection.get("reason") or "-"
    return f"no projection ({report.get('phase', '-')}): {reason.split(' (')[0].split(':')[0]}"


def main():
    counts = {"right": 0, "undetermined": 0, "WRONG": 0}
    reasons = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, snap_path, log, meta, label in recordings():
            snap = load(snap_path)
            if log is None:
                message = json.load(open(meta)).get("oom_message")
                log = os.path.join(scratch, "train.log")
                with open(log, "w") as f:
                    f.write(f"torch.OutOfMemoryError: {message}\n" if isinstance(message, str) else "")
            trace = snap["device_traces"][0]
            whole = list(trace)
            for share in CUTS:
                snap["device_traces"][0] = whole[int(share * len(whole)):]
                cut = os.path.join(scratch, "snapshot.pickle.gz")
                with gzip.open(cut, "wb", compresslevel=1) as f:
                    pickle.dump(snap, f, protocol=4)
                run = subprocess.run([BIN, "doctor", "--json", "--quiet", cut, log], capture_output=True, text=True)
                if KEEP:
                    os.makedirs(KEEP, exist_ok=True)
                    with open(os.path.join(KEEP, f"{name.replace('/', '_')}-{int(share * 100)}.json"), "w") as f:
                        f.write(run.stdout)
                try:
                    report = json.loads(run.stdout)
                    verdict = report["verdict"]
                except (ValueError, KeyError):
                    report, verdict = {}, "error: " + run.stderr.strip()[:200]
                mark = "right" if verdict == label else "undetermined" if verdict == "undetermined" else "WRONG"
                counts[mark] += 1
                why = why_undetermined(report) if mark == "undetermined" else ""
                if why:
                    reasons.setdefault(why, []).append(f"{name} {int(share * 100)}%")
                print(f"{name}\t{int(share * 100)}%\t{label}\t{verdict}\t{mark}\t{why}", flush=True)
    print(f"{sum(counts.values())} cuts: {counts['right']} right, {counts['undetermined']} undetermined, "
          f"{counts['WRONG']} wrong")
    for why, cuts in sorted(reasons.items(), key=lambda item: -len(item[1])):
        print(f"{len(cuts):4d}  {why}: {', '.join(cuts[:4])}{', ...' if len(cuts) > 4 else ''}")
    return 1 if counts["WRONG"] else 0


if __name__ == "__main__":
    sys.exit(main())
