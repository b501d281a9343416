#!/usr/bin/env bash
# Field batch 3: Accelerate, FSDP2 (history from mid-run), Lightning: a calibration, then the edge.
source "$(dirname "$0")/lib.sh"
field_begin field3
calibrate acc_cal accelerate_llama.py --steps 16
record acc_edge "$(budget acc_cal max_memory_allocated 1.04)" accelerate_llama.py --steps 16
calibrate fsdp_cal fsdp2_llama.py --steps 10
record fsdp_edge "$(budget fsdp_cal max_memory_allocated 1.04)" fsdp2_llama.py --steps 10
calibrate lit_cal lightning_gpt.py --steps 14
record lit_edge "$(budget lit_cal max_memory_allocated 1.04)" lightning_gpt.py --steps 14
field_end field3
