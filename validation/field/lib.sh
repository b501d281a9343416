# Sourced by the batch scripts: how a field recording and its labelling rerun are made.
#   field_begin BATCH          recordings go to /tmp/BATCH (emptied first)
#   calibrate NAME JOB ARGS... the job without a budget: its peaks set the budgets (NAME/truth.json)
#   calibrated NAME            NAME's calibration completed (its budgets mean something)
#   edge_and_lo NAME JOB ARGS...
#                              calibrates NAME_cal, then records NAME_edge (edge 1.02) and NAME_lo
#                              (0.92 × the peak allocated) when the calibration completed
#   budget NAME KEY FACTOR     KEY (max_memory_reserved, max_memory_allocated, or "mid": their mean)
#                              of NAME's calibration × FACTOR, in GiB; "edge": the peak allocated × FACTOR
#                              but at most "mid", so that the budget is below the peak reserved
#   record NAME GIB JOB ARGS...
#                              the job on a card shrunk to GIB; if it OOMs, NAME_x reruns it at the same
#                              budget under expandable segments: completed → fragmentation, OOM → capacity
#   field_pack BATCH           (after every run) packs what is recorded so far, as field_end does, so that
#                              a batch cut short still returns its runs
#   field_end BATCH            $OUT/BATCH.tar.NN: the users' files and each run's truth; the reruns
#                              (the labels) in $OUT/BATCH-labels.tar.NN, opened after the predictions
#                              (pieces of 15 MiB: the device returns files of 16 MiB at most)
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# A batch ends by FIELD_SECONDS (default 540) after field_begin: a run that would pass it is cut
# short, later ones are skipped, and field_end still packs what was recorded.
field_begin() { BATCH=$1 R=/tmp/$1; rm -rf "$R"; mkdir -p "$R"; DEADLINE=$(( $(date +%s) + ${FIELD_SECONDS:-540} )); }
run_job() {  # DIR GIB JOB ARGS...
  local dir=$1 gib=$2 job=$3; shift 3
  local left=$(( DEADLINE - $(date +%s) ))
  ((left > 20)) || { echo "$(basename "$dir"): skipped, out of time"; return; }
  ((left < ${JOB_TIMEOUT:-150})) || left=${JOB_TIMEOUT:-150}
  mkdir -p "$dir/user"
  timeout "$left" python3 "$HERE/harness.py" --out "$dir" --budget-gib "$gib" -- \
    "$HERE/jobs/$job" "$@" >"$dir/user/train.log" 2>&1
  # DataLoader workers forked from the job outlive it by up to 5 s and keep its device memory (ballast included):
  # the next run would find the card full (batch 58's timm_lo_x died so at its first allocation).
  local waited=0
  while pgrep -f "$HERE/harness.py" >/dev/null && ((waited < 60)); do sleep 1; waited=$((waited + 1)); done
  # A rerun's outcome is its label: it is not shown here, so that predictions are made before it is opened.
  if [[ $dir == *_x ]]; then echo "$(basename "$dir"): rerun done"
  elif grep -q '^RESULT' "$dir/user/train.log"; then
    grep '^RESULT' "$dir/user/train.log" | sed "s|^RESULT|$(basename "$dir"):|"
  else echo "$(basename "$dir"): no result (killed at ${left} s?)"; tail -3 "$dir/user/train.log"
  fi
  [[ -z ${BATCH:-} ]] || field_pack "$BATCH"
}
calibrate() { local name=$1; shift; run_job "$R/$name" 0 "$@"; }
calibrated() { grep -q '"outcome": "completed"' "$R/$1/truth.json" 2>/dev/null; }
edge_and_lo() {
  local name=$1; shift
  calibrate "${name}_cal" "$@"
  calibrated "${name}_cal" || return 0
  record "${name}_edge" "$(budget "${name}_cal" edge 1.02)" "$@"
  record "${name}_lo" "$(budget "${name}_cal" max_memory_allocated 0.92)" "$@"
}
budget() {
  python3 -c "import json; t=json.load(open('$R/$1/truth.json')); k='$2'
mid=(t['max_memory_reserved']+t['max_memory_allocated'])/2
v=mid if k=='mid' else min(mid, t['max_memory_allocated']*$3) if k=='edge' else t[k]*$3
print(round(v/2**30, 3))"
}
record() {
  local name=$1 gib=$2; shift 2
  run_job "$R/$name" "$gib" "$@"
  if grep -q '"outcome": "oom"' "$R/$name/truth.json" 2>/dev/null; then
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True run_job "$R/${name}_x" "$gib" "$@"
  fi
}
field_pack() {
  (cd "$R" && find . -name '*.pickle' -exec gzip -q9 {} \; && rm -rf ./*/user/hf_out ./*/user/lightning_logs
   tar cf - --exclude='./*_x' . | split -b 15M -d - "$OUT/$1.tar."
   tar cf - ./*_x 2>/dev/null | split -b 15M -d - "$OUT/$1-labels.tar.")
}
field_end() { field_pack "$1"; ls -la "$OUT"; }
