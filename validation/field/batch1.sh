#!/usr/bin/env bash
# Field batch 1: HF Trainer (plain, gradient checkpointing + big eval, torch_empty_cache_steps),
# torchvision ResNet-50 with cudnn.benchmark, a plain Llama loop with empty_cache().
source "$(dirname "$0")/lib.sh"
field_begin field1
calibrate hft_cal hf_trainer.py
record hft_mid "$(budget hft_cal mid 1)" hf_trainer.py
record hft_lo "$(budget hft_cal max_memory_allocated 0.92)" hf_trainer.py
calibrate hfc_cal hf_trainer.py --ckpt --eval-batch 48 --batch 16
record hfc_mid "$(budget hfc_cal mid 1)" hf_trainer.py --ckpt --eval-batch 48 --batch 16
record hfc_lo "$(budget hfc_cal max_memory_allocated 0.95)" hf_trainer.py --ckpt --eval-batch 48 --batch 16
calibrate rn_cal tv_resnet.py
record rn_mid "$(budget rn_cal mid 1)" tv_resnet.py
record rn_lo "$(budget rn_cal max_memory_allocated 0.93)" tv_resnet.py
calibrate ec_cal llama_loop.py --empty-cache-every 3
record ec_mid "$(budget ec_cal mid 1)" llama_loop.py --empty-cache-every 3
record ec_lo "$(budget ec_cal max_memory_allocated 0.93)" llama_loop.py --empty-cache-every 3
field_end field1
