#!/usr/bin/env bash
# Field batch 42 (issue #15, twenty-second session): the DiT of batch 41 under torch.compile(mode="reduce-overhead")
# (CUDA graphs with their private pool; cudagraph_mark_step_begin() each step, as the docs ask), and batch 40's
# sentence-embedding job with history from its first step (its lo OOM came before history began).
source "$(dirname "$0")/lib.sh"
field_begin field42
edge_and_lo ditro dit_loop.py --width 1152 --depth 12 --batch 64 --steps 10 --compile reduce-overhead
edge_and_lo sb0 sbert_contrastive.py --width 1024 --layers 24 --batch 128 --steps 12 --empty-cache-every 3 \
  --history-from-step 0
field_end field42
