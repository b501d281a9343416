#!/usr/bin/env bash
# Field batch 28 (issue #15, eighteenth session): BERT-large multiple choice as run_swag.py runs it (its own
# collator: contexts × four endings padded to the batch's longest; OOM observer), wav2vec 2.0 CTC fine-tuning as the
# HF blog runs it (frozen feature encoder, gradient checkpointing, audio of 2-12 s; history from step 2, except
# handler), and pytorch/examples' fast neural style (TransformerNet, VGG16 loss, fixed 512 px images; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field28
edge_and_lo swag hf_multiple_choice.py --hidden 1024 --layers 24 --batch 16 --eval-batch 32 --steps 12 --eval-steps 5
edge_and_lo w2v hf_wav2vec2_ctc.py --hidden 1024 --layers 24 --batch 32 --eval-batch 32 --steps 12 --eval-steps 5
edge_and_lo nst fast_neural_style.py --batch 16 --image-size 512 --steps 10
field_end field28
