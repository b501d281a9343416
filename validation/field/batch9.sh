#!/usr/bin/env bash
# Field batch 9 (issue #15): after the expandable-at-OOM rule, more jobs and settings it was not written on:
# torchvision ResNet-101 (cudnn.benchmark, AMP, multi-scale), ViT-B/16 at batch 192, torch.compile in
# reduce-overhead mode (CUDA graphs) under a budget, BERT MLM with history from its first step at the edge,
# the T5 Seq2SeqTrainer with Adafactor at 0.95. Fixed budgets come from earlier calibrations
# (cro_cal 9.082 GiB, mlm_cal's edge 21.198 GiB, s2a_cal 74.82 GiB peak allocated).
source "$(dirname "$0")/lib.sh"
field_begin field9
RN=(tv_resnet.py --arch resnet101 --steps 10)
VIT=(tv_vit.py --batch 192 --steps 8)
calibrate vit192_cal "${VIT[@]}"
record vit192_edge "$(budget vit192_cal edge 1.02)" "${VIT[@]}"
record mlm0_edge 21.198 bert_mlm.py --steps 16 --history-from-step 0
calibrate rn101_cal "${RN[@]}"
record rn101_edge "$(budget rn101_cal edge 1.03)" "${RN[@]}"
record rn101_lo "$(budget rn101_cal max_memory_allocated 0.92)" "${RN[@]}"
record s2a_95 71.08 hf_seq2seq.py --steps 12 --eval-steps 5 --optim adafactor --batch 24
record cro_lo 8.36 llama_loop.py --compile reduce-overhead --layers 6 --steps 10 --fixed-len 1024 --batch 8
record vit192_lo "$(budget vit192_cal max_memory_allocated 0.95)" "${VIT[@]}"
field_end field9
