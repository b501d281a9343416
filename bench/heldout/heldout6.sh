#!/bin/bash
# Held-out doctor check, sixth batch: the fixtures' own default workload with other seeds, at
# the fixtures' budget factors. Writes $OUT/heldout6.tar.
set -u
R=/tmp/heldout6; rm -rf $R; mkdir -p $R
rec() { name=$1; shift; echo "== $name $*"; timeout 100 python3 .device/record.py "$name" --out "$R/$name" "$@" 2>&1 | tail -1; }
gib() { python3 -c "import json; m=json.load(open('$R/$1/meta.json')); print(m['$2']*$3/2**30)"; }
X=expandable_segments:True
for seed in 99 7; do
  rec calib$seed --seed $seed --steps 16
  b=$(gib calib$seed max_memory_allocated 1.04)
  rec F${seed}_frag --seed $seed --steps 16 --budget-gib $b --history
  PYTORCH_CUDA_ALLOC_CONF=$X rec F${seed}_frag_x --seed $seed --steps 16 --budget-gib $b --history
  b=$(gib calib$seed max_memory_allocated 0.80)
  rec F${seed}_cap --seed $seed --steps 16 --budget-gib $b --history
  PYTORCH_CUDA_ALLOC_CONF=$X rec F${seed}_cap_x --seed $seed --steps 16 --budget-gib $b --history
done
cd $R && for d in */; do gzip -q "$d"snapshot*.pickle 2>/dev/null; done; tar cf "$OUT/heldout6.tar" . && ls -la "$OUT"
