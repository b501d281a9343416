#!/usr/bin/env bash
# Field batch 11 (issue #15, twelfth session): the HF Trainer with torch_empty_cache_steps=2 (the Trainer
# empties the cache every other step) and the classification recipe on ConvNeXt-T, recorded before any
# change of the session.
source "$(dirname "$0")/lib.sh"
field_begin field11
edge_and_lo hfe hf_trainer.py --empty-cache-steps 2 --batch 12
edge_and_lo cnx tv_resnet.py --arch convnext_tiny --batch 96 --sizes 160,224,288 --steps 10
field_end field11
