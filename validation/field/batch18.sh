#!/usr/bin/env bash
# Field batch 18 (issue #15, sixteenth session): code no earlier batch ran: the Hugging Face course's plain
# fine-tuning loop (BERT sequence classification in fp32, DataCollatorWithPadding, an eval loop per epoch)
# and torchvision's video classification recipe (R(2+1)D-18, fp16 with GradScaler, cudnn.benchmark, clips
# of a multigrid short cycle).
source "$(dirname "$0")/lib.sh"
field_begin field18
edge_and_lo hfc hf_course_loop.py --hidden 1024 --layers 24 --batch 32 --eval-batch 64 --rows 160 --epochs 2
edge_and_lo vid tv_video.py --batch 24 --steps 12
field_end field18
