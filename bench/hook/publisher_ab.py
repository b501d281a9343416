#!/usr/bin/env python3
"""What the hook's rank-file publishing costs a training thread that holds the GIL, revisions side by side.

No GPU or torch needed: each step is a fixed amount of pure-Python work (which holds the GIL the way
a Python-heavy training step does), then StepRecorder.record() and checkpoints.poll(), as the hook
calls them. A thread that wants the GIL meanwhile (a publisher, a heartbeat) makes the fixed work
take longer, so the cost shows as a longer step, not only as the hook's own time. On a loaded node the step
itself varies by more than that cost (other processes take the CPU), so each step's time is also split with
Linux's schedstat: what the thread spent on a CPU, runnable waiting for one, and the rest - asleep though it
had work, i.e. waiting for the GIL (or a lock). That last share is the publisher's cost, whatever the load.

    git archive 036c06f python | tar -x -C /tmp/before-publisher
    PYTHONPATH=python python3 bench/hook/publisher_ab.py --baseline /tmp/before-publisher/python [--busy 2]

Modes run in turn, blocks of --steps each, the order rotating every round: "off" (the work alone),
"baseline" (the other revision's recorder) and "current" (python/ here), each recorder publishing
to its own rank folder under /dev/shm. --busy N adds N processes that spin on every core they get,
like a build sharing the node. Prints one JSON object: each mode's median step, the hook's own median time
per step, and the mean time per step the training thread slept waiting for the GIL (the median over rounds).
"""

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hook_ab import load_package_as  # noqa: E402


def python_work(iterations):
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def calibrate(target_ms):
    iterations = 100_000
    start = time.perf_counter()
    python_work(iterations)
    return max(1, int(iterations * target_ms / ((time.perf_counter() - start) * 1e3)))


def spin():
    while True:
        pass


def scheduler_ns():
    """(on-CPU, runnable-but-waiting) nanoseconds of this thread, from Linux's schedstat."""
    with open("/proc/thread-self/schedstat") as f:
        on_cpu, runnable, _ = f.read().split()
    return int(on_cpu), int(runnable)


def run_block(recorder_module, folder, steps, iterations):
    """Per-step medians (seconds) of `steps` steps: the step, the hook's calls, and the time the thread slept
    though it had work (neither on a CPU nor waiting for one: waiting for the GIL). recorder_module None runs
    the work alone."""
    recorder = None
    if recorder_module:
        recorder = recorder_module.StepRecorder(recorder_module.RankIdentity(rank=0, pid=os.getpid()),
                                                rank_dir=folder, heartbeat_s=5.0)
    step_s, hook_s, slept_s = [], [], []
    try:
        for _ in range(steps):
            on_cpu, runnable = scheduler_ns()
            start = time.perf_counter()
            python_work(iterations)
            work_end = time.perf_counter()
            if recorder:
                recorder.record(recorder_module.StepSample(data_wait_s=0.001, step_s=0.03, compute_s=0.03,
                                                           samples=8))
                recorder.checkpoints.poll()
            end = time.perf_counter()
            on_cpu_end, runnable_end = scheduler_ns()
            step_s.append(end - start)
            hook_s.append(end - work_end)
            slept_s.append(max(0.0, end - start - (on_cpu_end - on_cpu + runnable_end - runnable) / 1e9))
    finally:
        if recorder:
            recorder.close()
    return statistics.median(step_s), statistics.median(hook_s), statistics.fmean(slept_s)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a python/ folder holding the reference revision's package")
    parser.add_argument("--step-ms", type=float, default=30.0, help="pure-Python work per step")
    parser.add_argument("--steps", type=int, default=100, help="steps per block")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--busy", type=int, default=0, help="spinning processes beside the loop")
    args = parser.parse_args()

    from fragscope import recorder as current
    load_package_as("fragscope_baseline", os.path.abspath(args.baseline))
    from fragscope_baseline import recorder as baseline

    iterations = calibrate(args.step_ms)
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for spinner in spinners:
        spinner.start()
    root = tempfile.mkdtemp(prefix="publisher-ab-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    modes = {"off": None, "baseline": baseline, "current": current}
    names = list(modes)
    steps = {name: [] for name in names}
    hooks = {name: [] for name in names}
    slept = {name: [] for name in names}
    try:
        for round_index in range(args.rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                folder = os.path.join(root, f"{name}-{round_index}")
                step, hook, sleep = run_block(modes[name], folder, args.steps, iterations)
                steps[name].append(step)
                hooks[name].append(hook)
                slept[name].append(sleep)
    finally:
        for spinner in spinners:
            spinner.terminate()
        shutil.rmtree(root, ignore_errors=True)
    off = statistics.median(steps["off"])
    print(json.dumps({
        "step_ms_target": args.step_ms, "steps": args.steps, "rounds": args.rounds, "busy": args.busy,
        "cpus": os.cpu_count(),
        "step_ms": {name: round(statistics.median(values) * 1e3, 3) for name, values in steps.items()},
        "step_overhead_ms": {name: round((statistics.median(values) - off) * 1e3, 3)
                             for name, values in steps.items() if name != "off"},
        "hook_us_per_step": {name: round(statistics.median(values) * 1e6, 1)
                             for name, values in hooks.items() if name != "off"},
        "slept_us_per_step": {name: round(statistics.median(values) * 1e6, 1) for name, values in slept.items()}}))


if __name__ == "__main__":
    main()
