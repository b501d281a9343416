#!/usr/bin/env python3
"""What the doctor's undetermined field verdicts lack, against their labels and their reruns.

    scripts/doctor_undetermined.py [BINARY]     (default build/src/cli/fragscope)

Runs `doctor --json` on every labelled OOM of tests/data/field with what its user had (the snapshot
and the log, never truth.json), groups the undetermined by the first thing "what would decide it"
names, and prints each group's labels. Where one group holds both labels, the files it names as
missing are what told them apart. For the capacity labels it also counts the reruns (expandable
segments, same memory) whose peak allocated reached the doctor's projected peak of the failing step:
those reruns ran the failing step through and failed later, at a batch the files never saw.
Reproduces the table of docs/VALIDATION.md ("What the undetermined lack"). Exit status 1 when a
decided verdict is wrong.
"""
import collections
import concurrent.futures
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELD = os.path.join(ROOT, "tests", "data", "field")

# (group, phrase of the first "decide_with" line or of trace_projection.reason), first match wins.
GROUPS = [
    ("first step: the rest of the run's first pass is in no trace", "reason", "ran more than once before the OOM"),
    ("batches still to come", "decide", "batches still to come"),
    ("batches still to come", "decide", "lengths of the batches still to come"),
    ("batches still to come", "decide", "where the warm-up stops"),
    ("no trace with call stacks", "decide", "a snapshot with history of the failing rank"),
    ("the run grows: the steps still to come", "decide", "more steps the run has"),
    ("the run grows: the steps still to come", "decide", "another step before it frees"),
    ("the run grows: the steps still to come", "decide", "another eval batch before it frees"),
    ("a longer loop than any earlier unit", "reason", "more often than it did"),
    ("no earlier unit like the failing one", "reason", "no earlier unit allocates like"),
    ("a ring that lost an earlier unit's head", "reason", "lost its head"),
    ("an earlier whole step", "decide", "history holds two whole steps"),
    ("an earlier whole step", "decide", "history holds a whole step like"),
    ("where the gradients are freed", "decide", "where the loop calls `zero_grad()`"),
    ("projection within its margins (rerun)", "decide", "one rerun"),
]


def group_of(d):
    decide = (d.get("decide_with") or [""])[0]
    reason = (d.get("trace_projection") or {}).get("reason") or ""
    for name, where, phrase in GROUPS:
        if phrase in (reason if where == "reason" else decide):
            return name
    return "other: " + decide[:50]


def recordings():
    for name in sorted(os.listdir(FIELD)):
        folder = os.path.join(FIELD, name)
        truth_path = os.path.join(folder, "truth.json")
        if not os.path.isfile(truth_path):
            continue
        truth = json.load(open(truth_path))
        if truth.get("label") in ("capacity", "fragmentation"):
            files = [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f != "truth.json"]
            yield name, files, truth


def doctor(binary, files):
    out = subprocess.run([binary, "doctor", "--json", "--quiet", *files], capture_output=True, text=True)
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"verdict": "error"}


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "src", "cli", "fragscope")
    jobs = list(recordings())
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda job: doctor(binary, job[1]), jobs))
    decided = collections.Counter()
    groups = collections.defaultdict(list)
    for (name, _, truth), d in zip(jobs, results):
        if d["verdict"] != "undetermined":
            decided["right" if d["verdict"] == truth["label"] else "WRONG " + name] += 1
            continue
        projected = (d.get("trace_projection") or {}).get("projected_peak_bytes") or 0
        reached = truth["label"] == "capacity" and projected and \
            truth.get("rerun", {}).get("max_memory_allocated", 0) >= 0.99 * projected
        groups[group_of(d)].append((name, truth["label"], reached))
    print(f"{len(jobs)} labelled OOMs: " + ", ".join(f"{n} {k}" for k, n in sorted(decided.items())) +
          f", {sum(len(g) for g in groups.values())} undetermined")
    print(f"{'undetermined: what would decide it':58s} {'all':>4s} {'cap':>4s} {'frag':>4s} "
          f"{'cap reruns past the failing step':>33s}  examples")
    for name, rows in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        capacity = sum(1 for r in rows if r[1] == "capacity")
        reached = sum(1 for r in rows if r[2])
        examples = " ".join(r[0] for r in rows[:4])
        print(f"{name:58s} {len(rows):4d} {capacity:4d} {len(rows) - capacity:4d} {reached:33d}  {examples}")
    return 1 if any(k.startswith("WRONG") for k in decided) else 0


if __name__ == "__main__":
    sys.exit(main())
