#!/usr/bin/env bash
# Field batch 44 (issue #15, twenty-third session): long-document classification with Longformer under the HF
# Trainer (sliding-window attention, lengths up to 4,096 padded per batch, eval); a Mamba language model in a
# plain loop on its PyTorch path (a token-by-token scan, random lengths, history from step 2, OOM observer).
# First, batch 40's captioning job with history stacks="python": is its SystemError tied to C++ stacks?
source "$(dirname "$0")/lib.sh"
field_begin field44
calibrate cap_py hf_caption.py --batch 32 --steps 3 --stacks python
edge_and_lo lf hf_longformer.py --hidden 768 --layers 12 --batch 8 --steps 12
edge_and_lo mamba mamba_loop.py --hidden 768 --layers 8 --batch 16 --steps 10
field_end field44
