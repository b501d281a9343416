#!/usr/bin/env python3
"""Runs a command once, its output discarded, and prints "SECONDS MAXRSS_KIB": wall time (ms
resolution) and the peak resident set size of the command. For machines without GNU time.

    bench/timed_run.py COMMAND [ARG...]
"""
import resource
import subprocess
import sys
import time

if len(sys.argv) < 2:
    sys.exit(__doc__.strip())
start = time.perf_counter()
status = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
seconds = time.perf_counter() - start
if status != 0:
    sys.exit(f"{' '.join(sys.argv[1:])}: exit status {status}")
print(f"{seconds:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
