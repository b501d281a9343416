#!/usr/bin/env bash
# Field batch 65 (issue #15, twenty-seventh session): a validation that grows. Lightning's validation_step_outputs
# pattern keeping each batch's per-pixel probabilities (FCN-ResNet50, 21 classes, 512 px) on the GPU for the
# epoch's metrics; and the growing loop at a third budget, between the protocol's two.
source "$(dirname "$0")/lib.sh"
field_begin field65
edge_and_lo lvo lightning_val_outputs.py --steps 4 --val-every 2 --val-batches 12
calibrate leak_cal epoch_logits_leak.py --steps 12
calibrated leak_cal && record leak_mid "$(budget leak_cal max_memory_allocated 0.995)" epoch_logits_leak.py --steps 12
for run in leak_cal leak_mid; do
  [[ -f $R/$run/user/train.log ]] && echo "$run: $(grep -o '^step [0-9]*' $R/$run/user/train.log | tail -1)"
done
field_end field65
