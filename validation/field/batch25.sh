#!/usr/bin/env bash
# Field batch 25 (issue #15, seventeenth session): three recipes no batch ran: ViT masked-autoencoder pretraining
# with the HF Trainer as transformers' run_mae.py runs it (fixed shapes, eval logits and labels gathered on the
# GPU; OOM observer), the T5 Seq2SeqTrainer evaluating with generate (predict_with_generate) and PyTorch's
# "Language Translation with nn.Transformer" tutorial (sequence-first padded pairs; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field25
edge_and_lo mae hf_mae.py --batch 256 --eval-batch 512 --steps 10 --eval-steps 4
edge_and_lo trn translation_tutorial.py --batch 128 --eval-batch 256 --steps 12 --eval-every 5
edge_and_lo s2g hf_seq2seq.py --generate --gen-len 96 --d-model 768 --layers 8 --batch 32 --eval-batch 96 \
  --steps 10 --eval-steps 4
field_end field25
