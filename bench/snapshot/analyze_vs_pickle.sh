#!/usr/bin/env bash
# `fragscope analyze` end to end against Python's `pickle.load` of the same snapshot, side by
# side in one run (alternating, so both see the same machine load). Prints median wall time and
# peak RSS of each, and the ratios, as a Markdown table for docs/PERFORMANCE.md.
#   bench/snapshot/analyze_vs_pickle.sh [SNAPSHOT.zst] [RUNS] [FRAGSCOPE]
# PLAIN_PICKLE=FILE uses FILE as the uncompressed pickle (where no zstd command exists). Without
# GNU time, wall time and peak RSS come from Python's resource module.
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
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  else
    python3 -c 'import resource, subprocess, sys, time
t = time.perf_counter(); subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(f"{time.perf_counter() - t:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")' "$@" >"$work/t" || exit 1
  fi
  cat "$work/t"
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
awk -v p="$py" -v k="$(max "${py_kb[@]}")" 'BEGIN {printf "| python3 pickle.load (uncompressed pickle) | %.3f | %.0f | 1.0x |\n", p, k/1024}'
awk -v p="$py" -v f="$fz" -v k="$(max "${fz_kb[@]}")" 'BEGIN {printf "| fragscope analyze (.zst, end to end) | %.3f | %.0f | %.1fx faster |\n", f, k/1024, p/f}'
awk -v p="$py" -v f="$fp" -v k="$(max "${fp_kb[@]}")" 'BEGIN {printf "| fragscope analyze (uncompressed pickle) | %.3f | %.0f | %.1fx faster |\n", f, k/1024, p/f}'
awk -v s="$size" -v k="$(max "${fz_kb[@]}" "${fp_kb[@]}")" 'BEGIN {printf "\nuncompressed pickle: %.1f MB; fragscope peak RSS / pickle size = %.2f\n", s/1e6, k*1024/s}'
echo "runs: $runs each, alternating; machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
