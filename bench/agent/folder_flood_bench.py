#!/usr/bin/env python3
"""The many-uid flood of docs/SECURITY.md: FOLDERS per-user folders of FILES live rank files each, each folder
and its files owned by the uid it names (as a pod that may run as any uid makes them), beside one honest user's
folder of a few ranks. Drives the real `fragscope agent` over them and reports, as JSON: its poll time
(`fragscope_agent_poll_seconds`, every poll after the first), its peak and last RSS (/proc), and whether the
honest user's ranks are tracked.

    sudo bench/agent/folder_flood_bench.py --fragscope build/src/cli/fragscope

Needs root (chown to other uids). Standard library only; Linux (/proc).
"""

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from fragscope import shm  # noqa: E402
from agent_process import free_port, proc_status  # noqa: E402

FLOOD_FIRST_UID = 5000
HONEST_UID = 1000


def get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def metric(page, name):
    found = re.search(rf"^{re.escape(name)} (\S+)$", page, re.MULTILINE)
    return float(found.group(1)) if found else None


def rank_file_bytes(record):
    """A complete record as the hook's writer leaves it (even seq), without a writer per file."""
    payload = record.pack()
    header = shm.HEADER.pack(shm.MAGIC, shm.VERSION, shm.SIZE, 2, zlib.crc32(payload), 0)
    return (header + payload).ljust(shm.SIZE, b"\0")


def make_user_folder(root, uid, ranks, job):
    folder = os.path.join(root, str(uid))
    os.mkdir(folder, 0o700)
    now = time.time_ns()
    for rank in range(ranks):
        record = shm.RankRecord(pid=100_000 + rank, rank=rank, job=job, update_unix_ns=now,
                                reserved_bytes=52_865_007_616, allocated_bytes=7_692_999_168)
        path = os.path.join(folder, shm.rank_file_name(rank, record.pid))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, rank_file_bytes(record))
            os.fchown(fd, uid, uid)
        finally:
            os.close(fd)
    os.chown(folder, uid, uid)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fragscope", required=True)
    p.add_argument("--folders", type=int, default=64)
    p.add_argument("--files", type=int, default=1024, help="rank files per flooding folder")
    p.add_argument("--honest-ranks", type=int, default=4)
    p.add_argument("--polls", type=int, default=10)
    p.add_argument("--poll-interval", type=float, default=1.0)
    args = p.parse_args()

    base = "/dev/shm" if os.path.isdir("/dev/shm") else None  # where rank files live in production (tmpfs)
    root = tempfile.mkdtemp(prefix="fragscope-flood-", dir=base)
    agent = None
    try:
        os.chmod(root, 0o1777)
        for i in range(args.folders):
            make_user_folder(root, FLOOD_FIRST_UID + i, args.files, f"flood-{i}")
        make_user_folder(root, HONEST_UID, args.honest_ranks, "honest")
        port = free_port()
        agent = subprocess.Popen([args.fragscope, "agent", f"--listen=127.0.0.1:{port}", f"--rank-dir={root}",
                                  f"--poll-interval={args.poll_interval}", "--stale-after=3600",
                                  "--nvml-library=/nonexistent", "--event-log=/dev/null"])
        url = f"http://127.0.0.1:{port}/metrics"
        poll_seconds, page, last_poll = [], "", 0
        deadline = time.monotonic() + 120 + 10 * args.polls * args.poll_interval
        while len(poll_seconds) < args.polls and time.monotonic() < deadline:
            time.sleep(args.poll_interval / 4)
            try:
                page = get(url)
            except OSError:
                continue
            polls = int(metric(page, "fragscope_agent_polls_total") or 0)
            if polls > last_poll:
                if polls > 1:  # the first poll also finds the folders and warms the page cache
                    poll_seconds.append(metric(page, "fragscope_agent_poll_seconds"))
                last_poll = polls
        if len(poll_seconds) < args.polls:
            raise SystemExit(f"only {len(poll_seconds)} polls in time")
        honest = len(re.findall(rf'^fragscope_reserved_bytes{{[^}}]*uid="{HONEST_UID}"', page, re.MULTILINE))
        result = {
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
            "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "folders": args.folders, "files_per_folder": args.files, "honest_ranks": args.honest_ranks,
            "poll_seconds": {"n": len(poll_seconds), "median": statistics.median(poll_seconds),
                             "max": max(poll_seconds)},
            "rss_peak_bytes": proc_status(agent.pid, "VmHWM"),
            "rss_bytes": proc_status(agent.pid, "VmRSS"),
            "rank_files_ok": metric(page, 'fragscope_rank_files{state="ok"}'),
            "rank_files_unread": metric(page, "fragscope_rank_files_unread"),
            "ranks_dropped": metric(page, "fragscope_ranks_dropped"),
            "honest_ranks_tracked": honest,
        }
        print(json.dumps(result, indent=1))
    finally:
        if agent is not None:
            agent.terminate()
            agent.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
