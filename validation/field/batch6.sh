#!/usr/bin/env bash
# Field batch 6 (issue #15): jobs the doctor was never run on before: the HF Seq2SeqTrainer (T5, encoder-decoder,
# variable source and target lengths, eval; except handler) and torchvision's ViT-B/16 recipe (fixed size, AdamW
# foreach, gradient clipping, a smaller last batch; OOM observer). Budgets: edge 1.03, lo 0.9 × peak allocated.
source "$(dirname "$0")/lib.sh"
field_begin field6
S2S=(hf_seq2seq.py --steps 12 --eval-steps 5)
VIT=(tv_vit.py --steps 10)
calibrate s2s_cal "${S2S[@]}"
record s2s_edge "$(budget s2s_cal edge 1.03)" "${S2S[@]}"
calibrate vit_cal "${VIT[@]}"
record vit_edge "$(budget vit_cal edge 1.03)" "${VIT[@]}"
record s2s_lo "$(budget s2s_cal max_memory_allocated 0.9)" "${S2S[@]}"
record vit_lo "$(budget vit_cal max_memory_allocated 0.92)" "${VIT[@]}"
field_end field6
