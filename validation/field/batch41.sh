#!/usr/bin/env bash
# Field batch 41 (issue #15, twenty-second session): a diffusion transformer (DiT, adaLN-Zero blocks, EMA copy,
# bf16, under torch.compile default; OOM observer) in a plain loop, fixed shapes; and the same without compile.
source "$(dirname "$0")/lib.sh"
field_begin field41
edge_and_lo dit dit_loop.py --width 1152 --depth 12 --batch 64 --steps 10 --compile default
edge_and_lo ditn dit_loop.py --width 1152 --depth 12 --batch 64 --steps 10 --compile none
field_end field41
