#!/usr/bin/env python3
"""Run-to-run spread of `fragscope analyze`, for machines whose speed varies between runs.

Runs `FRAGSCOPE analyze INPUT` RUNS times per input and prints each run's wall time, CPU time
(user + system, all threads) and when its output was complete, sorted by wall time, then the
median and minimum. Runs whose CPU time grows with their wall time did the same work on a
slower machine; a wall time far above the CPU time would be waiting. With --compare OTHER, the
two binaries alternate run by run (an A/B that sees the same machine phases), each reported.

    bench/snapshot/analyze_spread.py FRAGSCOPE INPUT... [--runs N] [--compare OTHER]
"""
import argparse
import resource
import statistics
import subprocess
import time


def one_run(command):
    """Returns (wall s, CPU s, output complete s) of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    while child.stdout.read(65536):
        pass
    output_done = time.perf_counter() - start
    if child.wait() != 0:
        raise SystemExit(f"{' '.join(command)}: exit status {child.returncode}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, output_done


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fragscope")
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--compare", metavar="OTHER", help="a second fragscope, run alternately")
    args = parser.parse_args()
    binaries = [args.fragscope] + ([args.compare] if args.compare else [])
    for path in args.inputs:
        runs = {binary: [] for binary in binaries}
        for _ in range(args.runs):
            for binary in binaries:
                runs[binary].append(one_run([binary, "analyze", path]))
        for binary in binaries:
            ordered = sorted(runs[binary])
            print(f"== {binary} analyze {path}: {args.runs} runs, sorted by wall time "
                  "(wall s / CPU s / output done s)")
            print("  " + "  ".join(f"{w:.3f}/{c:.3f}/{o:.3f}" for w, c, o in ordered))
            walls = [w for w, _, _ in ordered]
            print(f"  wall median {statistics.median(walls):.3f} s, min {walls[0]:.3f} s")


if __name__ == "__main__":
    main()
