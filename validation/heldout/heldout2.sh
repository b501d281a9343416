#!/bin/bash
# Held-out doctor check, second batch: GQA shape with ga 1, an OOM under max_split_size, a
# wrapped ring buffer, an OOM-observer dump; a checkpointed shape. Writes $OUT/heldout2.tar.
. "$(dirname "$0")/lib.sh"
batch_begin heldout2
B="--hidden 2560 --layers 10 --heads 20 --kv-heads 4 --inter 6912 --seed 5150 --mbs 2 --ga 1 --steps 16"
C="--hidden 2048 --layers 12 --heads 16 --inter 5632 --seed 31 --mbs 8 --ga 2 --steps 10 --ckpt"
rec calibB $B
b=$(gib calibB max_memory_allocated 1.04)
rec_and_rerun B_frag $B --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256 rec B_msplit $B --budget-gib $b --history
rec B_ring $B --budget-gib $b --history --max-entries 30000
rec B_obs $B --budget-gib $b --history --oom-observer
b=$(gib calibB max_memory_allocated 0.85)
rec_and_rerun B_cap $B --budget-gib $b --history
rec calibC $C
b=$(gib calibC max_memory_allocated 1.04)
rec_and_rerun C_frag $C --budget-gib $b --history
batch_end heldout2
