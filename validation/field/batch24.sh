#!/usr/bin/env bash
# Field batch 24 (issue #15, seventeenth session): two model families and recipes no batch ran: CLIP's
# contrastive training with the HF Trainer as transformers' run_clip.py runs it (OOM observer dump), and
# Whisper's fine-tune with the Seq2SeqTrainer as HF's blog runs it (fp16 + GradScaler, gradient checkpointing,
# history from step 2, except-handler dump).
source "$(dirname "$0")/lib.sh"
field_begin field24
edge_and_lo clip hf_clip.py --batch 160 --steps 10 --eval-steps 4 --eval-batch 256
edge_and_lo whs hf_whisper.py --batch 32 --steps 10 --eval-steps 4 --eval-batch 48
field_end field24
