#!/usr/bin/env bash
# Field batch 17 (issue #15, fifteenth session): code no earlier batch ran: LoRA adapters from PEFT on a bf16
# Llama under the HF Trainer, torchvision's EfficientNet-B3 in the classification recipe (multi-scale,
# cudnn.benchmark), and the PyTorch DCGAN tutorial (two models, three backward passes per iteration).
source "$(dirname "$0")/lib.sh"
field_begin field17
edge_and_lo lora hf_trainer.py --arch llama --lora 16 --hidden 1536 --layers 16 --batch 8 --max-len 2048 \
  --eval-batch 16 --steps 14
edge_and_lo eff tv_resnet.py --arch efficientnet_b3 --batch 64 --sizes 224,256,288,320 --steps 10
edge_and_lo gan dcgan.py --ngf 128 --ndf 128 --batch 2048 --images 5000 --epochs 3
field_end field17
