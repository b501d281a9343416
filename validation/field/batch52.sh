#!/usr/bin/env bash
# Field batch 52 (issue #15, twenty-fifth session): DP-SGD with per-sample gradients from torch.func (vmap of grad,
# Poisson-sampled batches whose size varies, a GroupNorm WideResNet; except handler); a two-tower retrieval model
# with sparse embedding tables under SparseAdam and an in-batch softmax (history from step 2, OOM observer).
source "$(dirname "$0")/lib.sh"
field_begin field52
edge_and_lo dps dp_sgd_vmap.py --batch 512 --width 4 --steps 12
edge_and_lo twt two_tower_sparse.py --batch 8192 --negatives 16384 --steps 14
field_end field52
