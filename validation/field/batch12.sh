#!/usr/bin/env bash
# Field batch 12 (issue #15, twelfth session): recorded after the rule on unseen batches, jobs and
# settings no rule was written on: RetinaNet in the detection reference, EfficientNet-B3 in the
# classification recipe (multi-scale), the HF Trainer on GPT-NeoX with gradient checkpointing and
# torch_empty_cache_steps=3, and Accelerate with 4 accumulation steps of 2 sequences.
source "$(dirname "$0")/lib.sh"
field_begin field12
RET=(tv_detection.py --arch retinanet_resnet50_fpn --batch 8 --steps 10)
EFF=(tv_resnet.py --arch efficientnet_b3 --batch 96 --sizes 224,288,320 --steps 10)
HFG=(hf_trainer.py --arch gpt_neox --ckpt --empty-cache-steps 3 --batch 16)
ACC=(accelerate_llama.py --batch 2 --ga 4 --steps 16)
for job in ret:RET eff:EFF hfg:HFG acc4:ACC; do
  name=${job%%:*}; declare -n args=${job#*:}
  calibrate "${name}_cal" "${args[@]}"
  if calibrated "${name}_cal"; then
    record "${name}_edge" "$(budget "${name}_cal" edge 1.02)" "${args[@]}"
    record "${name}_lo" "$(budget "${name}_cal" max_memory_allocated 0.92)" "${args[@]}"
  fi
  unset -n args
done
field_end field12
