#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into build-fuzz and runs the snapshot reader's for
# SECONDS (default 60), seeded from real snapshots and hostile samples. Exit 0 = no finding.
# SEED 0 (default) explores anew each run; CI passes a fixed SEED so its run is reproducible
# (a finding there is a regression, not the luck of the draw), and a fresh corpus.
#   scripts/fuzz.sh [SECONDS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
seed=${2:-0}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFRAGSCOPE_BUILD_FUZZ=ON -DFRAGSCOPE_BUILD_TESTS=OFF -DFRAGSCOPE_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target snapshot_reader_fuzz --parallel "$(nproc)" >/dev/null
corpus=build-fuzz/corpus/snapshot_reader
[[ $seed != 0 ]] && rm -rf "$corpus"
mkdir -p "$corpus"
cp tests/data/snapshots/small_snapshot.pickle tests/data/snapshots/legacy_segments.pickle.gz "$corpus"/
cp fuzz/seeds/snapshot_reader/* "$corpus"/
mkdir -p build-fuzz/findings
./build-fuzz/fuzz/snapshot_reader_fuzz "$corpus" -max_total_time="$seconds" -seed="$seed" -max_len=65536 \
  -rss_limit_mb=2048 -timeout=10 -artifact_prefix=build-fuzz/findings/ -print_final_stats=1 2>&1 | tail -n 12
