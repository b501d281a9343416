#!/usr/bin/env bash
# Field batch 31 (issue #15, nineteenth session): nanoGPT with compile=True as its train.py has it (torch.compile
# default after the optimizer; estimate_loss under no_grad at iteration 0 and every 4; except handler), and SegFormer
# (MiT-b2) with the HF Trainer as run_semantic_segmentation.py runs it (fixed 512 px crops, 150 classes, eval every 4
# steps gathering logits on the GPU; OOM observer).
source "$(dirname "$0")/lib.sh"
field_begin field31
edge_and_lo ngc nanogpt.py --compile --n-layer 12 --n-embd 1024 --batch 16 --ga 2 --iters 8
edge_and_lo sgf hf_segformer.py --image-size 512 --batch 16 --eval-batch 32 --steps 10 --eval-steps 4
field_end field31
