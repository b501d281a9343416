#!/bin/bash
# Held-out doctor check, sixth batch: the fixtures' own default workload with other seeds, at
# the fixtures' budget factors. Writes $OUT/heldout6.tar.
. "$(dirname "$0")/lib.sh"
REC_TIMEOUT=100
batch_begin heldout6
for seed in 99 7; do
  rec calib$seed --seed $seed --steps 16
  b=$(gib calib$seed max_memory_allocated 1.04)
  rec_and_rerun F${seed}_frag --seed $seed --steps 16 --budget-gib $b --history
  b=$(gib calib$seed max_memory_allocated 0.80)
  rec_and_rerun F${seed}_cap --seed $seed --steps 16 --budget-gib $b --history
done
batch_end heldout6
