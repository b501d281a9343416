#!/bin/bash
# Held-out doctor check: a shape no fixture has; budgets from its own calibration, labels from
# the expandable_segments rerun at the same budget (as the fixtures' truth.json labels are made).
# Writes $OUT/heldout.tar.
. "$(dirname "$0")/lib.sh"
REC_TIMEOUT=170
batch_begin heldout
shape="--hidden 1792 --layers 14 --heads 14 --inter 4864 --seed 2027 --mbs 4 --ga 4 --steps 12"
rec calib $shape
b=$(gib calib max_memory_allocated 1.04); rec_and_rerun frag $shape --budget-gib "$b" --history
b=$(gib calib max_memory_allocated 0.80); rec_and_rerun cap $shape --budget-gib "$b" --history
b=$(gib calib max_memory_reserved 1.06)
rec_and_rerun eval $shape --budget-gib "$b" --history --eval-every 6 --eval-batch 32 --eval-len 4096
rec input --hidden 768 --layers 6 --heads 12 --inter 2048 --seed 99 --fixed-len 768 --mbs 8 --ga 1 --steps 40 \
  --loader-workers 1 --loader-work 15000 --smi-trace
batch_end heldout
