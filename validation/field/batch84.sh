#!/usr/bin/env bash
# Field batch 84 (issue #15), the thirty-fifth session: Barlow Twins (a ResNet-50 with an 8,192-unit projector, the
# views' cross-correlation in fp32, a hand-written LARS step whose momentum buffers appear at the first step; except
# handler) and a SchNet-style potential in plain torch (molecules padded to the batch's largest, pairwise filters
# batch x atoms x atoms x features, forces by autograd.grad with create_graph; OOM observer). One call
# (FIELD_SECONDS=555 JOB_TIMEOUT=150); predictions (predictions-batch84.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field84
edge_and_lo bt barlow_twins.py
edge_and_lo schn schnet_molecules.py
field_end field84
