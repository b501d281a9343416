#!/usr/bin/env bash
# Field batch 19 (issue #15, sixteenth session): the HF Trainer with torch_compile=True (Qwen2, dynamic
# padding: recompiles as shapes vary, an eval every 6 steps), the way its docs enable it.
source "$(dirname "$0")/lib.sh"
field_begin field19
edge_and_lo hfcmp hf_trainer.py --compile --hidden 1024 --layers 8 --batch 8 --max-len 2048 --steps 14
field_end field19
