#!/usr/bin/env python3
"""What reading a large steps.jsonl costs: wall time and peak RSS of `fragscope check` and `fragscope
doctor` on generated files, for one build or two side by side (docs/PERFORMANCE.md, docs/SECURITY.md
section 5). Prints a Markdown table.

    bench/inputs/steps_jsonl_bench.py [--before OLD_FRAGSCOPE] [--fragscope build/src/cli/fragscope]

The files (in a temporary folder, removed after):
- tiny: --tiny-lines lines of `{"step":N}`, the smallest record the reader accepts (5 million: 84 MB);
- tiny at the cap: `{"step":0}` lines up to the 1 GiB a steps.jsonl may have (97 million), run only
  with --at-cap (a build that keeps every record needs some 80 GB);
- hook: the first record of examples/frag_oom_104/steps.jsonl (a real H200 run's, ten memory_stats
  values, 525 bytes) repeated with its step and time counting up, to --hook-bytes (a long job's file).
Standard library only; Linux (peak RSS from wait4).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CAP = 1 << 30  # kMaxTelemetryBytes


def write_tiny(path, lines, same_step=False):
    with open(path, "w") as out:
        if same_step:
            line = '{"step":0}\n'
            chunk = line * 100_000
            for _ in range(lines // 100_000):
                out.write(chunk)
            out.write(line * (lines % 100_000))
            return
        for start in range(0, lines, 100_000):
            out.write("".join(f'{{"step":{n}}}\n' for n in range(start, min(lines, start + 100_000))))


def write_hook(path, size):
    with open(os.path.join(ROOT, "examples", "frag_oom_104", "steps.jsonl")) as f:
        record = json.loads(f.readline())
    t0 = record["t"]
    record["step"], record["t"] = "@STEP@", "@T@"
    template = json.dumps(record, separators=(", ", ": ")).replace('"@STEP@"', "%d").replace('"@T@"', "%r")
    written = 0
    step = 0
    with open(path, "w") as out:
        while True:
            batch = "".join(template % (step + i, t0 + 0.69 * (step + i)) + "\n" for i in range(1_000))
            if written + len(batch) > size:
                break
            out.write(batch)
            written += len(batch)
            step += 1_000
    return step


def run(command):
    """(wall seconds, peak RSS bytes, exit status, first line of stderr) of one run."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = child.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.stderr.close()
    return seconds, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status), err.strip().split("\n")[0]


def shown(result):
    seconds, rss, rc, err = result
    text = f"{seconds:.1f} s, {rss / 1e6:,.0f} MB"
    if rc == 2:
        text += " (refused)"
    elif rc not in (0, 1):
        text += f" (exit {rc}: {err[:60]})"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fragscope", default=os.path.join(ROOT, "build", "src", "cli", "fragscope"))
    parser.add_argument("--before", help="an earlier build, run beside it on every file it can hold")
    parser.add_argument("--tiny-lines", type=int, default=5_000_000)
    parser.add_argument("--hook-bytes", type=int, default=1_000_000_000)
    parser.add_argument("--at-cap", action="store_true", help="also the tiny records up to the 1 GiB cap")
    args = parser.parse_args()
    builds = [("before", args.before)] if args.before else []
    builds.append(("after" if args.before else "fragscope", args.fragscope))

    with tempfile.TemporaryDirectory() as work:
        files = []
        path = os.path.join(work, "tiny.jsonl")
        write_tiny(path, args.tiny_lines)
        files.append((f"tiny: {args.tiny_lines:,} × `{{\"step\":N}}`", path, True))
        if args.at_cap:
            path = os.path.join(work, "tiny_cap.jsonl")
            write_tiny(path, (CAP - 1) // 11, same_step=True)
            files.append((f"tiny at the cap: {(CAP - 1) // 11:,} × `{{\"step\":0}}`", path, False))
        path = os.path.join(work, "hook.jsonl")
        records = write_hook(path, args.hook_bytes)
        files.append((f"hook: {records:,} real records", path, True))

        header = "| file | size | command | " + " | ".join(f"{name}: wall, peak RSS" for name, _ in builds) + " |"
        print(header)
        print("| --- | ---: | --- |" + " ---: |" * len(builds))
        for label, path, old_too in files:
            size = os.path.getsize(path)
            for command in ("check", "doctor"):
                cells = []
                for name, binary in builds:
                    if name == "before" and not old_too:
                        cells.append("not run")
                        continue
                    cells.append(shown(run([binary, command, path])))
                print(f"| {label} | {size / 1e6:,.0f} MB | `{command}` | " + " | ".join(cells) + " |")
                sys.stdout.flush()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"\nmachine: {os.cpu_count()} cores, {memory:.0f} GiB; load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
