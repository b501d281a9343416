# Sourced by the heldout*.sh scripts (not run): where a batch's recordings go and how each is made.
#   batch_begin NAME     recordings go to /tmp/NAME (emptied first), named R
#   rec RUN ARGS...      record.py RUN into $R/RUN (at most ${REC_TIMEOUT:-150} s), its result line shown
#   rec_and_rerun RUN ARGS...
#                        rec RUN, then RUN_x with the same ARGS under expandable segments: the rerun
#                        that labels RUN (completed → fragmentation, OOM again → capacity)
#   gib RUN KEY FACTOR   meta.json KEY of $R/RUN × FACTOR, in GiB (a --budget-gib)
#   batch_end NAME       gzip the snapshots and write them all to $OUT/NAME.tar (the device returns few files)
set -u
X=expandable_segments:True
batch_begin() { R=/tmp/$1; rm -rf "$R"; mkdir -p "$R"; }
rec() {
  local run=$1; shift
  echo "== $run $*"
  timeout "${REC_TIMEOUT:-150}" python3 .device/record.py "$run" --out "$R/$run" "$@" 2>&1 | tail -1
}
rec_and_rerun() {
  rec "$@"
  local run=$1; shift
  PYTORCH_CUDA_ALLOC_CONF=$X rec "${run}_x" "$@"
}
gib() { python3 -c "import json; m=json.load(open('$R/$1/meta.json')); print(m['$2']*$3/2**30)"; }
batch_end() {
  (cd "$R" && for d in */; do gzip -q "$d"snapshot*.pickle 2>/dev/null; done; tar cf "$OUT/$1.tar" .)
  ls -la "$OUT"
}
