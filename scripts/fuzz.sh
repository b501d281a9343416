#!/usr/bin/env bash
# Builds a libFuzzer target with clang into build-fuzz and runs it for SECONDS (default 60),
# seeded from fuzz/seeds/TARGET (and, for the snapshot reader, real snapshots and hostile
# samples). TARGET: snapshot_reader (default), rank_file_reader, http_request. Exit 0 = no finding.
# SEED 0 (default) explores anew each run; CI passes a fixed SEED so its run is reproducible
# (a finding there is a regression, not the luck of the draw), and a fresh corpus.
#   scripts/fuzz.sh [SECONDS] [SEED] [TARGET]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
seed=${2:-0}
target=${3:-snapshot_reader}
[[ -d fuzz/seeds/$target ]] || { echo "fuzz.sh: unknown target '$target' (no fuzz/seeds/$target)" >&2; exit 2; }
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFRAGSCOPE_BUILD_FUZZ=ON -DFRAGSCOPE_BUILD_TESTS=OFF -DFRAGSCOPE_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target "${target}_fuzz" --parallel "$(nproc)" >build-fuzz/build.log ||
  { tail -n 40 build-fuzz/build.log; exit 1; }
corpus=build-fuzz/corpus/$target
[[ $seed != 0 ]] && rm -rf "$corpus"
mkdir -p "$corpus"
if [[ $target == snapshot_reader ]]; then
  cp tests/data/snapshots/small_snapshot.pickle tests/data/snapshots/legacy_segments.pickle.gz "$corpus"/
fi
cp fuzz/seeds/"$target"/* "$corpus"/
mkdir -p build-fuzz/findings
./build-fuzz/fuzz/"${target}_fuzz" "$corpus" -max_total_time="$seconds" -seed="$seed" -max_len=65536 \
  -rss_limit_mb=2048 -timeout=10 -artifact_prefix=build-fuzz/findings/"$target"- -print_final_stats=1 2>&1 | tail -n 12
