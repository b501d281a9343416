#!/usr/bin/env bash
# Field batch 46 (issue #15, twenty-third session): visual instruction tuning of a LLaVA-style model under the HF
# Trainer (a frozen CLIP tower, 576 image tokens, answers of random length, eval); BART summarisation under the
# Seq2SeqTrainer with label smoothing (the Trainer's LabelSmoother over the logits, gradient accumulation, OOM
# observer).
source "$(dirname "$0")/lib.sh"
field_begin field46
edge_and_lo llava hf_llava.py --hidden 2048 --layers 12 --batch 8 --steps 12
edge_and_lo bart hf_bart_smoothing.py --d-model 1024 --layers 12 --batch 16 --steps 10
field_end field46
