#!/bin/bash
# Held-out doctor check, third batch: FSDP OOMs, a memory-fraction cap, recording from step 3,
# a loader that starves the GPU. Writes $OUT/heldout3.tar.
. "$(dirname "$0")/lib.sh"
batch_begin heldout3
D="--hidden 1280 --layers 10 --heads 10 --inter 3584 --seed 77 --mbs 8 --ga 2 --steps 12 --fsdp"
A="--hidden 1792 --layers 14 --heads 14 --inter 4864 --seed 2027 --mbs 4 --ga 4 --steps 12"
frac() {
  python3 -c "import json; m=json.load(open('$R/$1/meta.json')); print(m['max_memory_allocated']*$2/150109880320)"
}
rec calibD $D
b=$(gib calibD max_memory_allocated 1.04)
rec_and_rerun D_frag $D --budget-gib $b --history
b=$(gib calibD max_memory_allocated 0.80)
rec_and_rerun D_cap $D --budget-gib $b --history
rec calibA $A
f=$(frac calibA 1.03)
rec_and_rerun A_frac $A --fraction $f --history
b=$(gib calibA max_memory_allocated 1.04)
rec A_mid $A --budget-gib $b --history --history-from-step 3
rec G_input --hidden 1024 --layers 8 --heads 8 --inter 2816 --seed 12 --fixed-len 1024 --mbs 8 --ga 1 --steps 40 \
  --loader-workers 2 --loader-work 30000 --pin --smi-trace
batch_end heldout3
