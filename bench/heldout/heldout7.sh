#!/bin/bash
# Held-out doctor check, seventh batch: the fixtures' workload, seeds 42 and 3, at 1.04.
set -u
R=/tmp/heldout7; rm -rf $R; mkdir -p $R
rec() { name=$1; shift; echo "== $name $*"; timeout 60 python3 .device/record.py "$name" --out "$R/$name" "$@" 2>&1 | tail -1; }
gib() { python3 -c "import json; m=json.load(open('$R/$1/meta.json')); print(m['$2']*$3/2**30)"; }
for seed in 42 3; do
  rec calib$seed --seed $seed --steps 12
  b=$(gib calib$seed max_memory_allocated 1.04)
  rec F${seed}_frag --seed $seed --steps 12 --budget-gib $b --history
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True rec F${seed}_frag_x --seed $seed --steps 12 --budget-gib $b --history
done
cd $R && for d in */; do gzip -q "$d"snapshot*.pickle 2>/dev/null; done; tar cf "$OUT/heldout7.tar" . && ls -la "$OUT"
