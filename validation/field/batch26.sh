#!/usr/bin/env bash
# Field batch 26 (issue #15, seventeenth session): GPT-2 with the HF Trainer as transformers' run_clm.py runs it
# (group_texts: fixed blocks; except handler) and a torchvision ResNet-50 under HF Accelerate with progressive
# resizing and gradient accumulation (channels_last, bf16; OOM observer).
source "$(dirname "$0")/lib.sh"
field_begin field26
edge_and_lo clm hf_run_clm.py --n-embd 1024 --n-layer 24 --batch 16 --eval-batch 32 --steps 10 --eval-steps 4
edge_and_lo ares accelerate_resnet.py --batch 192 --ga 2 --sizes 160,192,224 --steps-per-size 3
field_end field26
