#!/usr/bin/env bash
# Field batch 14 (issue #15, fourteenth session): torchvision settings no rule was written on: FCN-ResNet50
# segmentation with eval, Mask R-CNN, ViT-L/16 at one size, ResNeXt-50 in the multi-scale recipe.
source "$(dirname "$0")/lib.sh"
field_begin field14
edge_and_lo fcn tv_segmentation.py --model fcn_resnet50 --batch 12 --steps 8 --eval-every 3 --sizes 384,448,512
edge_and_lo mrc tv_detection.py --arch maskrcnn_resnet50_fpn --batch 6 --steps 10
edge_and_lo vitl tv_vit.py --arch vit_l_16 --batch 48 --steps 8
edge_and_lo rx tv_resnet.py --arch resnext50_32x4d --batch 96 --sizes 160,224,288 --steps 10
field_end field14
