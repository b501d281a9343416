#!/usr/bin/env bash
# Field batch 21 (issue #15, sixteenth session): batch 20's grouped HF Trainer again (transformers 5 took
# group_by_length out of TrainingArguments: it is a train_sampling_strategy now).
source "$(dirname "$0")/lib.sh"
field_begin field21
edge_and_lo hfg2 hf_trainer.py --group-by-length --ckpt --arch llama --hidden 2048 --layers 12 --batch 8 \
  --max-len 2048 --steps 12
field_end field21
