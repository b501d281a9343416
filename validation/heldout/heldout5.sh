#!/bin/bash
# Held-out replay/doctor check, fifth batch: the first batch's workload and 1.04 budget recorded
# under other allocator settings (roundup, garbage collection, max_split + GC, expandable +
# roundup), and without a budget under GC. Writes $OUT/heldout5.tar.
. "$(dirname "$0")/lib.sh"
REC_TIMEOUT=120
batch_begin heldout5
A="--hidden 1792 --layers 14 --heads 14 --inter 4864 --seed 2027 --mbs 4 --ga 4 --steps 12"
b=23.4718510055542
PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:4 rec S_round4 $A --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8 rec S_gc08 $A --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,garbage_collection_threshold:0.6 \
  rec S_ms128gc06 $A --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=$X,roundup_power2_divisions:2 rec S_exp_round2 $A --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.7,max_split_size_mb:256 rec S_gc07_nobudget $A --history
batch_end heldout5
