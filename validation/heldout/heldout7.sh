#!/bin/bash
# Held-out doctor check, seventh batch: the fixtures' workload, seeds 42 and 3, at 1.04.
. "$(dirname "$0")/lib.sh"
REC_TIMEOUT=60
batch_begin heldout7
for seed in 42 3; do
  rec calib$seed --seed $seed --steps 12
  b=$(gib calib$seed max_memory_allocated 1.04)
  rec_and_rerun F${seed}_frag --seed $seed --steps 12 --budget-gib $b --history
done
batch_end heldout7
