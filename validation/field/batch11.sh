#!/usr/bin/env bash
# Field batch 11 (issue #15, twelfth session): the HF Trainer with torch_empty_cache_steps=2 (the Trainer
# empties the cache every other step) and the classification recipe on ConvNeXt-T, recorded before any
# change of the session.
source "$(dirname "$0")/lib.sh"
field_begin field11
HFE=(hf_trainer.py --empty-cache-steps 2 --batch 12)
CNX=(tv_resnet.py --arch convnext_tiny --batch 96 --sizes 160,224,288 --steps 10)
calibrate hfe_cal "${HFE[@]}"
if calibrated hfe_cal; then
  record hfe_edge "$(budget hfe_cal edge 1.02)" "${HFE[@]}"
  record hfe_lo "$(budget hfe_cal max_memory_allocated 0.92)" "${HFE[@]}"
fi
calibrate cnx_cal "${CNX[@]}"
if calibrated cnx_cal; then
  record cnx_edge "$(budget cnx_cal edge 1.02)" "${CNX[@]}"
  record cnx_lo "$(budget cnx_cal max_memory_allocated 0.92)" "${CNX[@]}"
fi
field_end field11
