#!/usr/bin/env bash
# Field batch 66 (issue #15, twenty-seventh session): the forums' validation leak, validate() without
# torch.no_grad() summing the loss as a tensor, so every validation batch's graph and saved activations live on.
source "$(dirname "$0")/lib.sh"
field_begin field66
edge_and_lo vng val_without_no_grad.py --steps 4 --val-batches 10
calibrated vng_cal && record vng_mid "$(budget vng_cal max_memory_allocated 0.97)" val_without_no_grad.py --steps 4 \
  --val-batches 10
field_end field66
