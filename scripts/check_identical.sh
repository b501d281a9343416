#!/usr/bin/env bash
# Byte-identical check for refactors: record what every command prints on every recording, then
# compare two such records.
#
#   scripts/check_identical.sh run FRAGSCOPE_BINARY OUT_DIR   record into OUT_DIR (must not exist)
#   scripts/check_identical.sh compare OLD_DIR NEW_DIR        print every difference; exit 1 on any
#
# `run` executes analyze, replay, whatif (snapshot files), doctor (recording folders), plan (job
# specs) and check (step telemetry) with --json and as text, on every fixture (../shared/fixtures),
# every held-out and validation recording under tests/data, the test snapshots and examples/. Each
# case leaves CASE.out (stdout), CASE.err (stderr) and CASE.rc (exit status); a file a command writes
# (doctor --html, plan --criteria-out) is kept as CASE.file. Inputs are named relative to the
# repository root and the scratch folder and the --json documents' build_info revision are
# masked, so records made from two checkouts compare.
# whatif and doctor run on 2 threads (the text names the count), so records from machines with
# different core counts compare. whatif --min-capacity bisects every config: it is skipped on
# `big` (the slowest by far). A record takes about two minutes.
set -uo pipefail

usage() {
  sed -n '5,6p' "$0" | sed 's/^# *//' >&2
  exit 2
}

record() {  # NAME FILE_OUTPUT ARGS...: run one case; FILE_OUTPUT is a path the command writes, or ""
  local name="$1" written="$2"
  shift 2
  local base="$out/$name"
  mkdir -p "$(dirname "$base")"
  [[ -n "$written" ]] && rm -f "$written"
  "$bin" "$@" >"$base.out" 2>"$base.err" </dev/null
  echo "$?" >"$base.rc"
  sed -i "s#$scratch#@SCRATCH@#g" "$base.out" "$base.err"
  sed -i -E 's/^( *"revision": )"[^"]*"/\1"@REVISION@"/' "$base.out"  # build_info: the commit differs
  if [[ -n "$written" && -e "$written" ]]; then
    sed "s#$scratch#@SCRATCH@#g" "$written" >"$base.file"
  fi
  cases=$((cases + 1))
}

snapshot_cases() {  # LABEL SNAPSHOT_FILE
  local label="$1" snap="$2"
  record "$label/analyze.text" "" analyze "$snap"
  record "$label/analyze.json" "" analyze "$snap" --json
  record "$label/replay.text" "" replay "$snap"
  record "$label/replay.json" "" replay "$snap" --json
  record "$label/replay.expandable.json" "" replay "$snap" --alloc-conf expandable_segments:True --json
  record "$label/whatif.text" "" whatif "$snap" --threads 2
  record "$label/whatif.json" "" whatif "$snap" --threads 2 --json
  if [[ "$snap" != *fixtures/big/* ]]; then
    record "$label/whatif.min_capacity.json" "" whatif "$snap" --threads 2 --min-capacity --json
  fi
}

recording_cases() {  # LABEL FOLDER: every snapshot in it, doctor on the folder, check on its steps
  local label="$1" dir="$2" snap steps smi
  for snap in "$dir"/*snapshot*.pickle*; do
    [[ -e "$snap" ]] || continue
    snapshot_cases "$label/$(basename "$snap")" "$snap"
  done
  record "$label/doctor.text" "$scratch/doctor.html" doctor "$dir" --threads 2 --html "$scratch/doctor.html"
  record "$label/doctor.json" "" doctor "$dir" --threads 2 --json
  steps="$dir/steps.jsonl"
  if [[ -e "$steps" ]]; then
    record "$label/check.text" "" check "$steps"
    record "$label/check.json" "" check "$steps" --json
    for smi in "$dir/smi_trace.csv" "$dir/smi.csv"; do
      [[ -e "$smi" ]] || continue
      record "$label/check.$(basename "$smi" .csv).json" "" check "$steps" --smi "$smi" --json
    done
  fi
}

plan_cases() {  # LABEL JOB_TOML [STEPS_JSONL]: plan in every mode; check the steps against its criteria
  local label="$1" job="$2" steps="${3:-}"
  record "$label/plan.text" "" plan "$job"
  record "$label/plan.json" "" plan "$job" --json
  record "$label/plan.propose.text" "" plan "$job" --propose
  record "$label/plan.propose.json" "" plan "$job" --propose --json
  record "$label/plan.global_batch.json" "" plan "$job" --global-batch 64 --json
  record "$label/plan.canary.text" "$scratch/criteria.json" plan "$job" --canary --criteria-out "$scratch/criteria.json"
  record "$label/plan.canary.json" "" plan "$job" --canary --json
  if [[ -n "$steps" && -e "$steps" && -e "$scratch/criteria.json" ]]; then
    cp "$scratch/criteria.json" "$scratch/criteria_for_check.json"
    record "$label/check.criteria.text" "" check "$steps" --criteria "$scratch/criteria_for_check.json"
    record "$label/check.criteria.json" "" check "$steps" --criteria "$scratch/criteria_for_check.json" --json
  fi
}

error_cases() {  # bad input: the one-line errors and exit codes stay the same too
  printf 'not a pickle' >"$scratch/garbage.pickle"
  printf '{"step": 1, "seq_len": \n' >"$scratch/truncated.jsonl"
  printf '[model\nhidden = \n' >"$scratch/bad.toml"
  record errors/analyze.missing "" analyze /nonexistent/snapshot.pickle
  record errors/analyze.garbage "" analyze "$scratch/garbage.pickle"
  record errors/replay.garbage "" replay "$scratch/garbage.pickle"
  record errors/whatif.bad_conf "" whatif tests/data/snapshots/small_snapshot.pickle --alloc-conf nonsense:1
  record errors/doctor.garbage "" doctor "$scratch/garbage.pickle"
  record errors/doctor.truncated "" doctor "$scratch/truncated.jsonl"
  record errors/check.truncated "" check "$scratch/truncated.jsonl"
  record errors/check.bad_criteria "" check ../shared/fixtures/calib/steps.jsonl --criteria "$scratch/bad.toml"
  record errors/plan.bad "" plan "$scratch/bad.toml"
  record errors/plan.missing "" plan /nonexistent/job.toml
}

run_all() {
  local dir name
  for dir in ../shared/fixtures/*/; do
    dir="${dir%/}"
    recording_cases "fixtures/$(basename "$dir")" "$dir"
  done
  for dir in tests/data/heldout/*/ tests/data/validation/*/ tests/data/doctor/*/ examples/*/; do
    dir="${dir%/}"
    recording_cases "${dir#tests/data/}" "$dir"
  done
  for snap in tests/data/snapshots/*.pickle*; do
    snapshot_cases "snapshots/$(basename "$snap")" "$snap"
  done
  for job in examples/*.toml; do
    name="$(basename "$job" .toml)"
    plan_cases "plan/examples/$name" "$job" "../shared/fixtures/$name/steps.jsonl"
  done
  for dir in tests/data/plan/*/; do
    dir="${dir%/}"
    plan_cases "plan/$(basename "$dir")" "$dir/job.toml" "$dir/steps.jsonl"
  done
  error_cases
}

compare() {  # OLD NEW
  local old="$1" new="$2" differ=0 rel
  [[ -d "$old" && -d "$new" ]] || { echo "compare: both folders must exist" >&2; exit 2; }
  while IFS= read -r rel; do
    if [[ ! -e "$old/$rel" ]]; then
      echo "only in $new: $rel"
      differ=1
    elif [[ ! -e "$new/$rel" ]]; then
      echo "only in $old: $rel"
      differ=1
    elif ! cmp -s "$old/$rel" "$new/$rel"; then
      echo "differs: $rel"
      diff -u "$old/$rel" "$new/$rel" | head -n 20
      differ=1
    fi
  done < <( (cd "$old" && find . -type f; cd "$new" && find . -type f) | sed 's#^\./##' | sort -u)
  local total
  total=$(cd "$old" && find . -type f | wc -l)
  if ((differ)); then
    echo "check_identical: differences found ($total files in $old)"
    exit 1
  fi
  echo "check_identical: identical ($total files)"
}

case "${1:-}" in
  run)
    [[ $# -eq 3 ]] || usage
    [[ -x "$2" && -f "$2" ]] || { echo "run: $2 is not an executable" >&2; exit 2; }
    [[ -e "$3" ]] && { echo "run: $3 exists; give a new folder" >&2; exit 2; }
    bin="$(realpath "$2")"
    mkdir -p "$3" || exit 2
    out="$(realpath "$3")"
    cd "$(dirname "$0")/.."
    scratch="$(mktemp -d)"
    trap 'rm -rf "$scratch"' EXIT
    cases=0
    start=$SECONDS
    run_all
    echo "check_identical: $cases cases recorded in $out ($((SECONDS - start)) s)"
    ;;
  compare)
    [[ $# -eq 3 ]] || usage
    compare "$(realpath "$2")" "$(realpath "$3")"
    ;;
  *) usage ;;
esac
