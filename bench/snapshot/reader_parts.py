#!/usr/bin/env python3
"""`fragscope analyze` read in parts on threads against the one-thread reader and Python's
`pickle.load`, side by side in one run (alternating run by run, so all three see the same machine
phases). Prints, per configuration, the median and minimum wall time, the median CPU time (all
threads) and the peak RSS of each run, and the ratio of medians to `pickle.load`.

    bench/snapshot/reader_parts.py FRAGSCOPE PLAIN_PICKLE [ZST] [--runs N] [--parts N ...]

Configurations: FRAGSCOPE_READER_PARTS=1 (one thread), then each --parts value (default: the
reader's own choice for this machine, unset). Compressed inputs are always read on one thread.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def one_run(command, env):
    """(wall s, CPU s, peak RSS KiB) of one run of `command`, output discarded."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{' '.join(command)}: exit status {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fragscope")
    parser.add_argument("plain")
    parser.add_argument("zst", nargs="?")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--parts", nargs="*", default=["auto"])
    args = parser.parse_args()

    load = "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))"
    configs = [("python3 pickle.load (plain)", ["python3", "-c", load, args.plain], None)]
    for parts in ["1"] + args.parts:
        env = dict(os.environ)
        env.pop("FRAGSCOPE_READER_PARTS", None)
        if parts != "auto":
            env["FRAGSCOPE_READER_PARTS"] = parts
        label = ("one thread" if parts == "1"
                 else "in parts (the reader's choice)" if parts == "auto" else f"in {parts} parts")
        configs.append((f"fragscope analyze, plain, {label}", [args.fragscope, "analyze", args.plain], env))
    if args.zst:
        configs.append(("fragscope analyze, .zst (one thread)", [args.fragscope, "analyze", args.zst], None))

    results = {label: [] for label, _, _ in configs}
    for _ in range(args.runs):
        for label, command, env in configs:
            results[label].append(one_run(command, env))

    python = statistics.median(w for w, _, _ in results[configs[0][0]])
    size = os.path.getsize(args.plain)
    print("| what | median wall (s) | min wall (s) | median CPU (s) | peak RSS (MiB) | vs pickle.load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, _, _ in configs:
        runs = results[label]
        wall = statistics.median(w for w, _, _ in runs)
        print(f"| {label} | {wall:.3f} | {min(w for w, _, _ in runs):.3f} | "
              f"{statistics.median(c for _, c, _ in runs):.3f} | {max(r for _, _, r in runs) / 1024:.0f} | "
              f"{python / wall:.1f}x |")
    cpu = open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()
    print(f"\nplain pickle: {size / 1e6:.1f} MB; runs: {args.runs} each, alternating; machine: "
          f"{os.cpu_count()} cores, {cpu}")


if __name__ == "__main__":
    main()
