#!/usr/bin/env bash
# Field batch 53 (issue #15, twenty-fifth session): a GPT under torch.compile(dynamic=True) with sequence-length
# warmup (the length doubles every three steps, 256 to 2048), fused AdamW, clipping (except handler).
source "$(dirname "$0")/lib.sh"
field_begin field53
edge_and_lo slw compile_seqlen_warmup.py --n-embd 1024 --n-layer 12 --batch 16 --steps 12
field_end field53
