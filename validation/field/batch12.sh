#!/usr/bin/env bash
# Field batch 12 (issue #15, twelfth session): recorded after the rule on unseen batches, jobs and
# settings no rule was written on: RetinaNet in the detection reference, EfficientNet-B3 in the
# classification recipe (multi-scale), the HF Trainer on GPT-NeoX with gradient checkpointing and
# torch_empty_cache_steps=3, and Accelerate with 4 accumulation steps of 2 sequences.
source "$(dirname "$0")/lib.sh"
field_begin field12
edge_and_lo ret tv_detection.py --arch retinanet_resnet50_fpn --batch 8 --steps 10
edge_and_lo eff tv_resnet.py --arch efficientnet_b3 --batch 96 --sizes 224,288,320 --steps 10
edge_and_lo hfg hf_trainer.py --arch gpt_neox --ckpt --empty-cache-steps 3 --batch 16
edge_and_lo acc4 accelerate_llama.py --batch 2 --ga 4 --steps 16
field_end field12
