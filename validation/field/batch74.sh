#!/usr/bin/env bash
# Field batch 74 (issue #15): prepared in the thirty-first session, not run yet; run with batch 73 (see there). A
# GRPO loop as TRL's GRPOTrainer runs it, written out with HF transformers: policy.generate() under no_grad with a
# KV cache, 16 prompts of random length × 16 sampled completions of a length drawn each step; a frozen reference
# model's forward; the policy's checkpointed forward and backward on fp32 log-probabilities in 2 micro-batches;
# foreach AdamW. History from the start, dump in the except handler. Without a budget on an H100: 22.5 GB allocated
# and 83.8 GB reserved at the peak (the shapes change every step; 2 allocator retries), 62 s.
source "$(dirname "$0")/lib.sh"
field_begin field74
edge_and_lo grpo hf_grpo_generate.py
field_end field74
