#!/usr/bin/env bash
# Field batch 41 (issue #15, twenty-second session): the captioning job of batch 40 with non-reentrant gradient
# checkpointing (the reentrant default died in batch 40's calibration: SystemError from run_backward), and a
# diffusion transformer (DiT, adaLN-Zero blocks, EMA copy, bf16, under torch.compile default; OOM observer) in
# a plain loop, fixed shapes; then the same DiT without compile if time is left.
source "$(dirname "$0")/lib.sh"
field_begin field41
edge_and_lo cap hf_caption.py --image 384 --width 768 --layers 12 --batch 32 --eval-batch 64 --steps 10 \
  --eval-steps 4 --checkpointing non-reentrant
edge_and_lo dit dit_loop.py --width 1152 --depth 12 --batch 64 --steps 10 --compile default
edge_and_lo ditn dit_loop.py --width 1152 --depth 12 --batch 64 --steps 10 --compile none
field_end field41
