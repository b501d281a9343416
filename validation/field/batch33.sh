#!/usr/bin/env bash
# Field batch 33 (issue #15, nineteenth session): batch 32's run_glue-style RoBERTa-large classification without
# gradient checkpointing (its calibration died of a SystemError in checkpointing's backward, as batch 28's wav2vec
# did).
source "$(dirname "$0")/lib.sh"
field_begin field33
edge_and_lo glue hf_text_cls.py --batch 128 --eval-batch 512 --max-len 256 --steps 12 --eval-steps 5
field_end field33
