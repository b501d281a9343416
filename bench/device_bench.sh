#!/bin/bash
# The benchmarks of docs/PERFORMANCE.md, on the idle 16-core device machine (the 2-core
# development machine is shared and noisy). Run there from the repository root with what
# bench/device_pack.sh put in .device/ (carried); $OUT receives device_bench.txt.
set -u
D=$PWD/.device
export LD_LIBRARY_PATH=$D/lib FRAGSCOPE_FIXTURES_DIR=$D/fixtures
exec > >(tee -a "$OUT/device_bench.txt") 2>&1
echo "== machine"; date -u; nproc; grep -m1 'model name' /proc/cpuinfo; free -g | head -2; uptime
python3 --version
echo "== reader: fragscope analyze vs pickle.load (big)"
gzip -dc "$D/big.pickle.gz" >/tmp/big.pickle
PLAIN_PICKLE=/tmp/big.pickle \
  bench/snapshot/analyze_vs_pickle.sh "$D/fixtures/big/snapshot.pickle.zst" 5 "$D/bin/fragscope"
echo "== reader: spread of single runs (big, .zst and plain; a small snapshot for the fixed costs)"
python3 bench/snapshot/analyze_spread.py "$D/bin/fragscope" "$D/fixtures/big/snapshot.pickle.zst" /tmp/big.pickle
python3 bench/snapshot/analyze_spread.py "$D/bin/fragscope" "$D/fixtures/frag_oom_104/snapshot.pickle.zst" --runs 5
echo "== replay loop, free-block index, whatif threads"
"$D/bin/replay_bench" --benchmark_min_time=1 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
echo "== whatif on big, by threads (wall seconds)"
for t in 1 2 4 8 16; do
  read -r seconds _ < <(python3 bench/timed_run.py "$D/bin/fragscope" whatif "$D/fixtures/big/snapshot.pickle.zst" \
                          --min-capacity --threads "$t")
  echo "threads $t: $seconds s"
done
echo "== agent scrape: 8 GPUs x 64 ranks"
python3 bench/agent/scrape_bench.py --fragscope "$D/bin/fragscope" --fake-nvml "$D/lib/fake_nvml.so" --window 30
