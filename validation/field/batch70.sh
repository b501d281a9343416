#!/usr/bin/env bash
# Field batch 70 (issue #15, twenty-eighth session): a plain ViT-L loop with per-block activation checkpointing,
# gradient accumulation over 4 micro-batches and torch.cuda.empty_cache() after every optimizer step; and a GPT loop
# that samples from the model every 3 steps (a KV cache grown by torch.cat at every token, 256 prompts).
source "$(dirname "$0")/lib.sh"
field_begin field70
edge_and_lo cav ckpt_accum_vit.py --batch 64 --accum 4 --steps 4
edge_and_lo gsl gpt_sample_in_loop.py --steps 8 --sample-every 3
field_end field70
