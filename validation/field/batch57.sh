#!/usr/bin/env bash
# Field batch 57 (issue #15, twenty-sixth session): batch 56's jobs again at budgets between their runs: the
# side-stream prefetcher with history from its first step (batch 56's OOM came before history began), MoCo v2
# between its peak allocated (23.84 GiB) and the budget where the default allocator failed (25.32).
source "$(dirname "$0")/lib.sh"
field_begin field57
python3 -c "import importlib.util as u; print('installed:', [m for m in ['torchaudio', 'diffusers', 'timm', \
'lightning', 'pytorch_lightning', 'datasets', 'peft', 'bitsandbytes', 'deepspeed', 'torchtune', 'torchao'] \
if u.find_spec(m)])"
record tpf0_edge 16.6 timm_prefetch.py --arch efficientnet_v2_s --batch 128 --size 288 --steps 12 --history-from-step 0
record tpf0_lo 15.3 timm_prefetch.py --arch efficientnet_v2_s --batch 128 --size 288 --steps 12 --history-from-step 0
record moco_mid 24.4 moco_v2.py --arch resnet50 --batch 256 --steps 10
field_end field57
