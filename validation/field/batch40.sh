#!/usr/bin/env bash
# Field batch 40 (issue #15, twenty-second session): jobs no batch ran. Image captioning with a ViT encoder and a
# GPT-2 decoder under the HF Seq2SeqTrainer (gradient checkpointing, captions of varying length, eval with a
# larger batch; except handler), and sentence-embedding training with in-batch negatives (BERT-large, varying
# lengths, fp16 with GradScaler, empty_cache every 3 steps, history from step 1; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field40
edge_and_lo cap hf_caption.py --image 384 --width 768 --layers 12 --batch 32 --eval-batch 64 --steps 10 \
  --eval-steps 4
edge_and_lo sb sbert_contrastive.py --width 1024 --layers 24 --batch 128 --steps 12 --empty-cache-every 3
field_end field40
