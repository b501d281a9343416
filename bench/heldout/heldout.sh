#!/bin/bash
# Held-out doctor check: a shape no fixture has; budgets from its own calibration, labels from
# the expandable_segments rerun at the same budget (as the fixtures' truth.json labels are made).
#   .device/heldout.sh   (writes $OUT/heldout.tar: one file, the device returns few files)
set -u
RESULTS=/tmp/heldout; rm -rf $RESULTS; mkdir -p $RESULTS
shape="--hidden 1792 --layers 14 --heads 14 --inter 4864 --seed 2027 --mbs 4 --ga 4 --steps 12"
rec() { name=$1; shift; echo "== $name $*"; timeout 170 python3 .device/record.py "$name" --out "$RESULTS/$name" "$@" 2>&1 | tail -2; }
gib() { python3 -c "import json,sys; m=json.load(open('$RESULTS/calib/meta.json')); print(m['$1']*$2/2**30)"; }
rec calib $shape
b=$(gib max_memory_allocated 1.04); rec frag $shape --budget-gib "$b" --history
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True rec frag_x $shape --budget-gib "$b" --history
b=$(gib max_memory_allocated 0.80); rec cap $shape --budget-gib "$b" --history
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True rec cap_x $shape --budget-gib "$b" --history
b=$(gib max_memory_reserved 1.06)
rec eval $shape --budget-gib "$b" --history --eval-every 6 --eval-batch 32 --eval-len 4096
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True rec eval_x $shape --budget-gib "$b" --history --eval-every 6 --eval-batch 32 --eval-len 4096
rec input --hidden 768 --layers 6 --heads 12 --inter 2048 --seed 99 --fixed-len 768 --mbs 8 --ga 1 --steps 40 --loader-workers 1 --loader-work 15000 --smi-trace
cd "$RESULTS" && for d in */; do gzip -q "$d"snapshot*.pickle 2>/dev/null; done; tar cf "$OUT/heldout.tar" . && ls -la "$OUT"
