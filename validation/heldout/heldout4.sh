#!/bin/bash
# Held-out doctor check, fourth batch: a wide, shallow GQA model with a 50k vocabulary and
# grad-accum 8; budgets 1.02, 1.06 and 0.90 of its peak; an eval spike. Writes $OUT/heldout4.tar.
. "$(dirname "$0")/lib.sh"
REC_TIMEOUT=120
batch_begin heldout4
E="--hidden 3072 --layers 6 --heads 24 --kv-heads 8 --inter 8192 --vocab 50304 --seed 4242 --mbs 2 --ga 8 --steps 20"
rec calibE $E
for f in 1.02 1.06 0.90; do
  b=$(gib calibE max_memory_allocated $f)
  rec_and_rerun E_$f $E --budget-gib $b --history
done
b=$(gib calibE max_memory_reserved 1.03)
rec E_eval $E --budget-gib $b --history --eval-every 10 --eval-batch 16 --eval-len 4096
batch_end heldout4
