#!/usr/bin/env bash
# Field batch 13 (issue #15, twelfth session): after the rule on unseen batches and the 1% re-laid margin,
# settings no rule was written on: Wide ResNet-50-2 and MobileNetV3-Large in the classification recipe
# (multi-scale), Lightning GPT with 16 layers at 1024 tokens, the nn.Transformer tutorial with 8 layers,
# batch 48 and BPTT 384.
source "$(dirname "$0")/lib.sh"
field_begin field13
edge_and_lo wrn tv_resnet.py --arch wide_resnet50_2 --batch 64 --sizes 192,256,320 --steps 8
edge_and_lo lit2 lightning_gpt.py --batch 12 --max-len 1024 --layers 16
edge_and_lo tut2 tutorial_transformer.py --nlayers 8 --batch 48 --bptt 384
edge_and_lo mnv tv_resnet.py --arch mobilenet_v3_large --batch 384 --sizes 160,192,224 --steps 10
field_end field13
