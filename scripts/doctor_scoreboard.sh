#!/usr/bin/env bash
# The doctor's verdict on every labelled recording, against its label: the OOM fixtures and the
# held-out recordings with and without steps.jsonl, the field recordings with what their users
# have (the snapshot and the log). Reproduces the tables of docs/VALIDATION.md.
#
#   scripts/doctor_scoreboard.sh [BINARY]     (default build/src/cli/fragscope)
#
# Each line: set, recording, telemetry (with / without / none recorded), label, verdict, phase, and right /
# UNDETERMINED / WRONG; then the totals per set. Labels are read only to compare, after the
# verdict is written. The fixtures' and held-out recordings' OOM message (meta.json) is written
# into a log as the job would have printed it, as the tests do (tests/diagnose/doctor_fixture_files.h).
# Exit status 1 when any verdict is wrong.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/src/cli/fragscope}
fixtures=${FRAGSCOPE_FIXTURES:-$root/../shared/fixtures}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# One recording: name, set, telemetry (with|without), label file, files...
judge() {
  local set=$1 name=$2 telemetry=$3 label_file=$4
  shift 4
  local out="$scratch/$set-$name-$telemetry.json"
  "$bin" doctor --json --quiet "$@" >"$out" 2>"$scratch/err" || true
  python3 - "$set" "$name" "$telemetry" "$label_file" "$out" <<'EOF'
import json, sys
set_, name, telemetry, label_file, out = sys.argv[1:]
try:
    d = json.load(open(out))
    verdict, phase = d["verdict"], d.get("phase") or "-"
except (OSError, ValueError, KeyError):
    verdict, phase = "error", "-"
label = json.load(open(label_file))["label"]
mark = "right" if verdict == label else ("UNDETERMINED" if verdict == "undetermined" else "WRONG")
print(f"{set_}\t{name}\t{telemetry}\t{label}\t{verdict}\t{phase}\t{mark}")
EOF
}

# The log a fixture's job would have printed: the OOM message of meta.json.
log_of() {
  local dir=$1 log=$2
  python3 - "$dir/meta.json" "$log" <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
msg = meta.get("oom_message")
if isinstance(msg, str):
    with open(sys.argv[2], "w") as f:
        f.write("step 0 loss 10.43\nTraceback (most recent call last):\n"
                '  File "train.py", line 136, in run\n'
                "    loss = model(input_ids=ids, labels=ids).loss / args.ga\n"
                f"torch.OutOfMemoryError: {msg}\n")
EOF
}

recorded() {  # set, dir, label file
  local set=$1 dir=$2 label_file=$3 name
  name=$(basename "$dir")
  grep -q '"outcome": *"oom"' "$label_file" || return 0
  local files=() log="$scratch/$set-$name.log"
  for f in "$dir"/snapshot*.pickle.zst "$dir"/snapshot*.pickle.gz "$dir"/stats.json "$dir"/smi*.csv \
           "$dir"/summary.txt; do
    [[ -f $f ]] && files+=("$f")
  done
  log_of "$dir" "$log"
  [[ -f $log ]] && files+=("$log")
  if [[ -f $dir/steps.jsonl ]]; then
    judge "$set" "$name" with "$label_file" "${files[@]}" "$dir/steps.jsonl"
    judge "$set" "$name" without "$label_file" "${files[@]}"
  else  # no telemetry recorded: the one verdict counts with and without
    judge "$set" "$name" none "$label_file" "${files[@]}"
  fi
}

{
  for dir in "$root"/tests/data/field/*/; do
    dir=${dir%/}
    [[ -f $dir/truth.json ]] && grep -q '"label"' "$dir/truth.json" || continue
    judge field "$(basename "$dir")" without "$dir/truth.json" "$dir"/*.pickle.zst "$dir/train.log"
  done
  for dir in "$fixtures"/*/; do
    dir=${dir%/}
    [[ -f $dir/truth.json ]] && recorded fixture "$dir" "$dir/truth.json"
  done
  for dir in "$root"/tests/data/heldout/*/; do
    dir=${dir%/}
    recorded heldout "$dir" "$dir/label.json"
  done
} | tee "$scratch/board"

echo
awk -F'\t' 'function count(key) {
       n[key]++; if ($7 == "right") r[key]++; else if ($7 == "UNDETERMINED") u[key]++; else w[key]++ }
     { if ($3 != "with") {
         count($1 " without"); N++; if ($7 == "right") R++; else if ($7 == "UNDETERMINED") U++; else W++ }
       if ($3 != "without" && $1 != "field") count($1 " with") }
     END { line = "%-22s %2d labelled OOMs: %2d right, %d undetermined, %d wrong\n"
           for (k in n) printf line, k, n[k], r[k], u[k], w[k];
           printf line, "all without telemetry", N, R, U, W }' \
  "$scratch/board" | sort
! grep -q $'\tWRONG$\|\terror\t' "$scratch/board"
