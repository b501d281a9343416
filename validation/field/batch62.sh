#!/usr/bin/env bash
# Field batch 62 (issue #15, twenty-sixth session): batch 61's Lightning Fabric job again with a seeded shuffle.
# Batch 61's rerun met the batches in another order than the run it labels (step 0: 842 tokens against 1,019) and
# failed at step 3: that label said nothing of the recorded order.
source "$(dirname "$0")/lib.sh"
field_begin field62
edge_and_lo fab fabric_gpt.py --layers 24 --hidden 1024 --batch 8 --max-len 1024 --steps 12
for run in fab_cal fab_edge fab_lo; do  # not the reruns: their labels are opened after the predictions
  [[ -f $R/$run/user/train.log ]] &&
    echo "$run: $(grep -o 'step [0-9]* tokens [0-9]*' $R/$run/user/train.log | tr '\n' ' ')"
done
field_end field62
