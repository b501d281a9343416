#!/usr/bin/env bash
# `fragscope analyze` end to end against Python's `pickle.load` of the same snapshot, side by
# side in one run (alternating, so both see the same machine load). Prints median wall time and
# peak RSS of each, and the ratios, as a Markdown table for docs/PERFORMANCE.md.
#   bench/snapshot/analyze_vs_pickle.sh [SNAPSHOT.zst] [RUNS] [FRAGSCOPE]
# PLAIN_PICKLE=FILE uses FILE as the uncompressed pickle (where no zstd command exists). Wall time
# and peak RSS come from bench/timed_run.py (Python's clock and resource module).
set -euo pipefail
snapshot=${1:-../shared/fixtures/big/snapshot.pickle.zst}
runs=${2:-5}
fragscope=${3:-build/src/cli/fragscope}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plain=$work/snapshot.pickle
if [[ -n ${PLAIN_PICKLE:-} ]]; then plain=$PLAIN_PICKLE; else zstd -qdc "$snapshot" >"$plain"; fi
size=$(stat -c %s "$plain")

measure() {  # prints "seconds kilobytes" of one run of "$@"
  python3 "$(dirname "$0")/../timed_run.py" "$@" || exit 1
}
declare -a py_s py_kb fz_s fz_kb fp_s fp_kb
for ((i = 0; i < runs; i++)); do
  read -r s kb < <(measure python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$plain")
  py_s+=("$s"); py_kb+=("$kb")
  read -r s kb < <(measure "$fragscope" analyze "$snapshot")
  fz_s+=("$s"); fz_kb+=("$kb")
  read -r s kb < <(measure "$fragscope" analyze "$plain")
  fp_s+=("$s"); fp_kb+=("$kb")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
max() { printf '%s\n' "$@" | sort -g | tail -n1; }
py=$(median "${py_s[@]}"); fz=$(median "${fz_s[@]}"); fp=$(median "${fp_s[@]}")
echo "| what | median wall (s) | peak RSS (MiB) | vs pickle.load |"
echo "| --- | ---: | ---: | ---: |"
awk -v p="$py" -v k="$(max "${py_kb[@]}")" \
  'BEGIN {printf "| python3 pickle.load (uncompressed pickle) | %.3f | %.0f | 1.0x |\n", p, k/1024}'
awk -v p="$py" -v f="$fz" -v k="$(max "${fz_kb[@]}")" \
  'BEGIN {printf "| fragscope analyze (.zst, end to end) | %.3f | %.0f | %.1fx faster |\n", f, k/1024, p/f}'
awk -v p="$py" -v f="$fp" -v k="$(max "${fp_kb[@]}")" \
  'BEGIN {printf "| fragscope analyze (uncompressed pickle) | %.3f | %.0f | %.1fx faster |\n", f, k/1024, p/f}'
awk -v s="$size" -v k="$(max "${fz_kb[@]}" "${fp_kb[@]}")" \
  'BEGIN {printf "\nuncompressed pickle: %.1f MB; fragscope peak RSS / pickle size = %.2f\n", s/1e6, k*1024/s}'
memory=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo "runs: $runs each, alternating; machine: $(nproc) cores, $memory, $cpu"
