#!/usr/bin/env bash
# Field batch 45 (issue #15, twenty-third session): masked-LM pretraining with BigBird's block-sparse attention under
# the HF Trainer (lengths up to 4,096 padded to its block, eval); GPT-2 in a plain loop with its activations
# offloaded to pinned host memory by torch.autograd.graph.save_on_cpu (fp16, GradScaler, accumulation, random lengths,
# history from step 1, except handler).
source "$(dirname "$0")/lib.sh"
field_begin field45
edge_and_lo bb hf_bigbird.py --hidden 768 --layers 12 --batch 8 --steps 12
edge_and_lo off offload_gpt.py --n-embd 1280 --n-layer 24 --batch 8 --ga 2 --steps 8
field_end field45
