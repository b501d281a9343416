#!/usr/bin/env bash
# Field batch 27 (issue #15, seventeenth session): a ViT-L classifier with the HF Trainer as
# run_image_classification.py runs it (compute_metrics: the eval gathers its logits; OOM observer) and BERT-large
# token classification as run_ner.py runs it (DataCollatorForTokenClassification, history from step 3; except
# handler).
source "$(dirname "$0")/lib.sh"
field_begin field27
edge_and_lo vcls hf_vit_cls.py --hidden 1024 --layers 24 --batch 96 --eval-batch 256 --steps 10 --eval-steps 4
edge_and_lo ner hf_token_cls.py --hidden 1024 --layers 24 --batch 64 --eval-batch 128 --steps 12 --eval-steps 5 \
  --history-from-step 3
field_end field27
