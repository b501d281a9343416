#!/usr/bin/env bash
# Field batch 63 (issue #15, twenty-seventh session): two runs that grow instead of repeating. The HF Trainer with a
# compute_metrics on logits and neither preprocess_logits_for_metrics nor eval_accumulation_steps (the evaluation
# loop concatenates every eval batch's logits on the GPU), and a word-language-model loop that keeps each step's
# logits on the GPU for the epoch's accuracy.
source "$(dirname "$0")/lib.sh"
field_begin field63
edge_and_lo hel hf_eval_logits.py --steps 6 --eval-steps 3 --eval-batches 6
edge_and_lo leak epoch_logits_leak.py --steps 12
for run in leak_cal leak_edge leak_lo; do
  [[ -f $R/$run/user/train.log ]] && echo "$run: $(grep -o '^step [0-9]*' $R/$run/user/train.log | tail -1)"
done
field_end field63
