#!/usr/bin/env python3
"""Drives the real `fragscope agent` with 8 GPUs x 64 ranks and reports, as JSON:
  - /metrics scrape latency over HTTP (sequential GETs: p50, p99, max) and body size;
  - the agent's CPU (utime+stime from /proc) and RSS over a window scraped every 5 s.
Throughout, every rank file is rewritten once a second by the hook's writer (another process).

    scrape_bench.py --fragscope build/src/cli/fragscope --fake-nvml build/tests/agent/fake_nvml.so

Standard library only; Linux (/proc).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from fragscope import shm  # noqa: E402
from agent_process import free_port, proc_status  # noqa: E402


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


def write_ranks(directory, gpus, ranks_per_gpu):
    """The ranks' side, in its own process: every rank rewrites its file once a second."""
    writers, records = [], []
    for i in range(gpus * ranks_per_gpu):
        record = shm.RankRecord(pid=100_000 + i, rank=i, gpu=i // ranks_per_gpu, job="bench",
                                update_unix_ns=time.time_ns(), reserved_bytes=52_865_007_616,
                                allocated_bytes=7_692_999_168, inactive_split_bytes=2_396_399_104,
                                data_wait_ratio=0.01, step_seconds=0.36)
        records.append(record)
        writers.append(shm.RankFileWriter(directory, record))
    print("ready", flush=True)
    try:
        while True:
            start = time.monotonic()
            for record, writer in zip(records, writers):
                record.step += 1
                record.update_unix_ns = time.time_ns()
                writer.publish(record)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
    finally:
        for writer in writers:
            writer.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fragscope", required=True)
    p.add_argument("--fake-nvml", help="stand-in NVML (tests/agent/fake_nvml.so); default: the real one")
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--ranks-per-gpu", type=int, default=64)
    p.add_argument("--scrapes", type=int, default=1000)
    p.add_argument("--window", type=float, default=60.0, help="seconds of the 5 s-interval CPU/RSS run")
    p.add_argument("--poll-interval", type=float, default=1.0)
    p.add_argument("--write-ranks", metavar="DIR", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.write_ranks:
        return write_ranks(args.write_ranks, args.gpus, args.ranks_per_gpu)

    with tempfile.TemporaryDirectory() as tmp:
        ranks = args.gpus * args.ranks_per_gpu
        ranks_proc = subprocess.Popen([sys.executable, __file__, "--fragscope", args.fragscope,
                                       "--gpus", str(args.gpus), "--ranks-per-gpu", str(args.ranks_per_gpu),
                                       "--write-ranks", tmp],
                                      stdout=subprocess.PIPE, text=True)
        assert ranks_proc.stdout.readline().strip() == "ready"
        port = free_port()
        env = dict(os.environ, FRAGSCOPE_FAKE_NVML_GPUS=str(args.gpus))
        command = [args.fragscope, "agent", f"--listen=127.0.0.1:{port}", f"--rank-dir={tmp}",
                   f"--poll-interval={args.poll_interval}", "--event-log=/dev/null"]
        if args.fake_nvml:
            command.append(f"--nvml-library={args.fake_nvml}")
        agent = subprocess.Popen(command, env=env)
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            for _ in range(100):
                try:
                    if b'fragscope_rank_files{state="ok"} %d' % ranks in get(url):
                        break
                except OSError:
                    pass
                time.sleep(0.1)
            else:
                raise SystemExit("the agent never reported all ranks")

            latencies, bodies = [], set()
            for _ in range(args.scrapes):
                t0 = time.perf_counter()
                body = get(url)
                latencies.append((time.perf_counter() - t0) * 1e3)
                bodies.add(body.count(b"\nfragscope_reserved_bytes{"))
            latencies.sort()

            # Steady state: ranks rewrite their files every second, Prometheus scrapes every 5 s.
            cpu0, t0 = proc_cpu_seconds(agent.pid), time.monotonic()
            while time.monotonic() - t0 < args.window:
                get(url)
                time.sleep(5.0)
            elapsed = time.monotonic() - t0
            cpu = proc_cpu_seconds(agent.pid) - cpu0
            result = {
                "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
                "load_average": os.getloadavg(),
                "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                "gpus": args.gpus, "ranks": ranks, "nvml": "fake" if args.fake_nvml else "real",
                "metrics_body_bytes": len(body), "rank_series_per_scrape": sorted(bodies),
                "scrape_ms": {"n": len(latencies), "p50": statistics.median(latencies),
                              "p99": latencies[int(0.99 * (len(latencies) - 1))], "max": latencies[-1]},
                "steady": {"window_s": round(elapsed, 1), "scrape_interval_s": 5, "poll_interval_s": args.poll_interval,
                           "cpu_percent": 100.0 * cpu / elapsed,
                           "rss_bytes": proc_status(agent.pid, "VmRSS"),
                           "rss_peak_bytes": proc_status(agent.pid, "VmHWM")},
            }
            print(json.dumps(result, indent=1))
        finally:
            agent.terminate()
            agent.wait(timeout=10)
            ranks_proc.terminate()
            ranks_proc.wait(timeout=10)


if __name__ == "__main__":
    main()
