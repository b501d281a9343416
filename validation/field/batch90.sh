#!/usr/bin/env bash
# Field batch 90 (issue #15), the thirty-seventh session: batch 88's StyleGAN2 with lazy R1 again (its Adam betas
# were an int and a float: it stopped before training), and batch 87's QAT ResNet-50 at lower budgets (at 0.92 of
# its calibrated peak allocated it completed: under a budget cuDNN picks smaller workspaces, the run peaked at
# 19.2 GiB allocated against 21.6 GiB uncapped). One call; predictions (predictions-batch87-90.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field90
edge_and_lo sg2 stylegan_lazy_r1.py
record qat_edge 19.0 qat_resnet_fx.py
record qat_lo 17.5 qat_resnet_fx.py
field_end field90
