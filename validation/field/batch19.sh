#!/usr/bin/env bash
# Field batch 19 (issue #15, sixteenth session): the HF Trainer with torch_compile=True (Qwen2, dynamic
# padding: recompiles as shapes vary, an eval every 6 steps), the way its docs enable it; and batch 18's video
# recipe again between its budgets (at 0.92 of the peak allocated cuBLAS could not create the backward's
# handle: an error, not an OOM; at the edge it completed).
source "$(dirname "$0")/lib.sh"
field_begin field19
edge_and_lo hfcmp hf_trainer.py --compile --hidden 1024 --layers 8 --batch 8 --max-len 2048 --steps 14
record vid_mid 12.03 tv_video.py --batch 24 --steps 12
field_end field19
