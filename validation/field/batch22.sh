#!/usr/bin/env bash
# Field batch 22 (issue #15, sixteenth session): gradient accumulation in two loops no batch ran: Karpathy's
# nanoGPT train.py (its GPT-2, fused AdamW, bf16, 4 micro-steps, estimate_loss at iteration 0 and every 4)
# and the HF Trainer with gradient_accumulation_steps=4 (Qwen2, dynamic padding, eval every 4 steps).
source "$(dirname "$0")/lib.sh"
field_begin field22
edge_and_lo ngpt nanogpt.py --n-layer 12 --n-embd 1024 --batch 16 --ga 4 --iters 8
edge_and_lo hfga hf_trainer.py --ga 4 --batch 4 --max-len 2048 --steps 8 --eval-steps 4 --eval-batch 16
field_end field22
