#!/usr/bin/env python3
"""Which field OOMs' projected steps some allocator setting runs at the capacity, against their labels: the counts
behind the rule "no setting runs the projected step at the capacity → capacity" (docs/doctor.md,
docs/VALIDATION.md).

    scripts/doctor_projection_runs.py [BINARY]     (default build/src/cli/fragscope)

For every labelled field recording (tests/data/field/*: its snapshot and its log, as scripts/doctor_scoreboard.sh
judges it) whose failing step was projected from the trace (`trace_projection.available`; an eval pass projected
from the training's call, `from_training_call`, has its own rule and is left out), reads from `doctor --json`:
whether any setting of the sweep runs the projected step at the capacity, or at the capacity plus the projection's
floor of 0.5% (`trace_projection.runs[].runs`, `runs_above_capacity`: field qat_lo's step, 0.2% under the capacity
with perfect packing and run by no setting at the capacity itself, completed under expandable segments), whether the
step without its cuDNN workspaces still needs the capacity (`inelastic_peak_bytes` equal to `projected_peak_bytes`,
or above the capacity), and why the doctor decided or not (the last evidence key that names a projection rule).
Prints one line per recording, then the counts of labels per (any setting runs it, workspaces could make the
difference, the doctor's verdict and why); exit status 1 when a recording whose step no setting runs, with
workspaces unable to make the difference and the step before's gradients unable to either
(`held_freed_saving_bytes`: freed where the backward begins, the step leaves less than 1% of the capacity), is
labelled fragmentation: the rule's premise broken.
"""
import collections
import concurrent.futures
import glob
import json
import os
import subprocess
import sys

from projection_keys import projection_rule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/src/cli/fragscope")


def judged(folder):
    files = sorted(glob.glob(os.path.join(folder, "*.pickle.zst"))) + [os.path.join(folder, "train.log")]
    out = subprocess.run([BIN, "doctor", "--json", "--quiet", *files], capture_output=True, text=True)
    try:
        return json.loads(out.stdout)
    except ValueError:
        return None


def main():
    folders = []
    for truth_file in sorted(glob.glob(os.path.join(ROOT, "tests/data/field/*/truth.json"))):
        truth = json.load(open(truth_file))
        if truth.get("outcome") == "oom" and "label" in truth:
            folders.append((os.path.dirname(truth_file), truth["label"]))
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda f: judged(f[0]), folders))
    counts = collections.Counter()
    broken = []
    for (folder, label), d in zip(folders, results):
        tp = (d or {}).get("trace_projection") or {}
        # An eval projected from the training's call has its own rule (an upper and a lower estimate).
        if not tp.get("available") or not tp.get("runs") or tp.get("from_training_call"):
            continue
        any_runs = any(r["runs"] or r.get("runs_above_capacity") for r in tp["runs"])
        need = tp["inelastic_peak_bytes"]
        workspaces_cannot = need == tp["projected_peak_bytes"] or need > d["capacity_bytes"]
        # The C++ weighs it at the sizes asked for (the recorded rounding divided out): 1 unless roundup_power2.
        freed = tp["projected_peak_bytes"] - tp.get("held_freed_saving_bytes", 0)
        gradients_cannot = not tp.get("held_freed_saving_bytes") or freed > 0.99 * d["capacity_bytes"]
        why = projection_rule(d)
        name = os.path.basename(folder)
        print(f"{name}\t{label}\t{d['verdict']}\t{why}\t"
              f"{'some setting runs it' if any_runs else 'no setting runs it'}\t"
              f"{'workspaces cannot fit it' if workspaces_cannot else 'fits without workspaces'}\t"
              f"{'gradients cannot fit it' if gradients_cannot else 'fits with the gradients freed'}")
        counts[(any_runs, workspaces_cannot and gradients_cannot, d["verdict"], why, label)] += 1
        if not any_runs and workspaces_cannot and gradients_cannot and label == "fragmentation":
            broken.append(name)
    print("\nlabels per (a setting runs it at the capacity or 0.5% above, workspaces or the gradients could make the "
          "difference, verdict, why):")
    for (any_runs, workspaces_cannot, verdict, why, label), n in sorted(counts.items()):
        print(f"  {'runs' if any_runs else 'no run'}\t{'no' if workspaces_cannot else 'yes'}\t{verdict}\t{why}\t"
              f"{label}\t{n}")
    if broken:
        print("no setting runs the step, yet labelled fragmentation: " + ", ".join(broken))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
