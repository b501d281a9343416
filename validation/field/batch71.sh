#!/usr/bin/env bash
# Field batch 71 (issue #15): written in the twenty-ninth session, which had no device; run in the thirtieth
# (predictions in predictions-batch71-72.md, committed before the labels were opened). Four kinds of job
# the field set lacks: second-order MAML through torch.func (every inner step's graph alive until the meta-backward),
# CycleGAN as junyanz's repository trains it (two generators and two critics, an image pool kept on the GPU), SAM
# (davda54/sam: two forward-backward passes a step, the weights' copy in the optimizer's state; history from step 2),
# and torchvision's EfficientNetV2 recipe (cudnn.benchmark, channels_last, bf16, MixUp/CutMix, EMA, an eval every 4
# steps at 384 px).
source "$(dirname "$0")/lib.sh"
field_begin field71
edge_and_lo maml maml_func.py
edge_and_lo cyg cyclegan.py --iters 16
edge_and_lo sam sam_wrn.py
edge_and_lo tve tv_efficientnet.py
field_end field71
