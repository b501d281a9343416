#!/usr/bin/env bash
# Field batch 20 (issue #15, sixteenth session): PyTorch's word_language_model example (a 2-layer LSTM, fp32,
# tied weights) with AWD-LSTM's variable-length BPTT and an eval pass, and the HF Trainer with
# group_by_length=True (its sampler puts the longest batch first) and gradient checkpointing.
source "$(dirname "$0")/lib.sh"
field_begin field20
edge_and_lo lstm lstm_lm.py --batch 128 --bptt 200 --steps 16
edge_and_lo hfg2 hf_trainer.py --group-by-length --ckpt --arch llama --hidden 2048 --layers 12 --batch 8 \
  --max-len 2048 --steps 12
field_end field20
