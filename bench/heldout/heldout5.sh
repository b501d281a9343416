#!/bin/bash
# Held-out replay/doctor check, fifth batch: the first batch's workload and 1.04 budget recorded
# under other allocator settings (roundup, garbage collection, max_split + GC, expandable +
# roundup), and without a budget under GC. Writes $OUT/heldout5.tar.
set -u
R=/tmp/heldout5; rm -rf $R; mkdir -p $R
A="--hidden 1792 --layers 14 --heads 14 --inter 4864 --seed 2027 --mbs 4 --ga 4 --steps 12"
rec() { name=$1; shift; echo "== $name $*"; timeout 120 python3 .device/record.py "$name" --out "$R/$name" "$@" 2>&1 | tail -1; }
b=23.4718510055542
PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:4 rec S_round4 $A --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8 rec S_gc08 $A --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,garbage_collection_threshold:0.6 rec S_ms128gc06 $A --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,roundup_power2_divisions:2 rec S_exp_round2 $A --budget-gib $b --history
PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.7,max_split_size_mb:256 rec S_gc07_nobudget $A --history
cd $R && for d in */; do gzip -q "$d"snapshot*.pickle 2>/dev/null; done; tar cf "$OUT/heldout5.tar" . && ls -la "$OUT"
