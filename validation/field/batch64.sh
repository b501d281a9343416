#!/usr/bin/env bash
# Field batch 64 (issue #15, twenty-seventh session): fairseq's --max-tokens batching (many short sentences or few
# long ones, about the same tokens per batch), and batch 63's growing loop again, recorded from step 3 and dumped by
# the OOM observer at a budget between the protocol's two.
source "$(dirname "$0")/lib.sh"
field_begin field64
edge_and_lo mtk max_tokens_lm.py --steps 14
calibrate leak_cal epoch_logits_leak.py --steps 12
calibrated leak_cal && record leak_obs "$(budget leak_cal max_memory_allocated 0.97)" epoch_logits_leak.py \
  --steps 12 --observer --history-from-step 3
for run in mtk_cal mtk_edge mtk_lo leak_cal leak_obs; do
  [[ -f $R/$run/user/train.log ]] && echo "$run: $(grep -o '^step [0-9]*' $R/$run/user/train.log | tail -1)"
done
field_end field64
