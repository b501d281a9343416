#!/usr/bin/env python3
"""The capture's step overhead, this hook against another revision's, side by side in one process.

Run from the repository root on a machine with a CUDA GPU, torch and transformers:

    git archive 036c06f python | tar -x -C /tmp/baseline        # the reference revision's package
    PYTHONPATH=python python3 bench/hook/hook_ab.py --baseline /tmp/baseline/python --out /tmp/hook-ab.json

The model and loop are h200_hook_check.py's overhead part (a 1024-wide, 8-layer Llama, batch
8 x 1024 tokens, bf16, AdamW, a DataLoader). Blocks of steps run in turn with the capture off and
with each revision's capture, without and with memory history; the order rotates every round so
that neither revision always follows the other. Both packages are imported side by side (the
reference one under another name: the package only imports itself relatively), so both see the
same process, GPU clocks and allocator state. Prints and writes one JSON object: each mode's median
block, its overhead against "off", and the hook's own time per step.
"""

import argparse
import importlib
import importlib.util
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h200_hook_check import overhead_loop  # noqa: E402  (the overhead part's loop)


def load_package_as(name, python_dir):
    """Imports python_dir/fragscope under `name` and returns its capture module."""
    package_dir = os.path.join(python_dir, "fragscope")
    spec = importlib.util.spec_from_file_location(name, os.path.join(package_dir, "__init__.py"),
                                                  submodule_search_locations=[package_dir])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.capture")


def median(values):
    return sorted(values)[len(values) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a python/ folder holding the reference revision's package")
    parser.add_argument("--out", default="/tmp/hook-ab.json")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--block", type=int, default=20, help="steps per block")
    args = parser.parse_args()

    import torch

    from fragscope import capture as current
    baseline = load_package_as("fragscope_baseline", os.path.abspath(args.baseline))

    run_block = overhead_loop(torch)

    out_dir = tempfile.mkdtemp(prefix="hook-ab-")
    modes = {"off": None}
    for history, suffix in ((0, "no_history"), (None, "history")):
        for revision, module in (("baseline", baseline), ("current", current)):
            extra = {} if history is None else {"history_entries": history}
            modes[f"{revision}_{suffix}"] = (module, dict(out_dir=os.path.join(out_dir, revision), **extra))

    run_block(10)  # warm up
    names = list(modes)
    times = {name: [] for name in names}
    hook_ms = {name: [] for name in names if modes[name]}
    for round_index in range(args.rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            mode = modes[name]
            running = mode[0].start(mode[0].Settings(**mode[1])) if mode else None
            times[name].append(run_block(args.block))
            if running:
                recorder = running.watch.recorder
                hook_ms[name].append(recorder.hook_s_total / max(1, recorder.steps) * 1e3)
                mode[0].stop()
    off = median(times["off"])
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "rounds": args.rounds, "block": args.block,
              "step_ms": {name: round(median(values) * 1e3, 3) for name, values in times.items()},
              "overhead_pct": {name: round((median(values) / off - 1) * 100, 2)
                               for name, values in times.items() if name != "off"},
              "hook_ms_per_step": {name: round(median(values), 4) for name, values in hook_ms.items()},
              "blocks_ms": {name: [round(v * 1e3, 2) for v in values] for name, values in times.items()}}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
