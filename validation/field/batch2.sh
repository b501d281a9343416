#!/usr/bin/env bash
# Field batch 2: torch.compile (dynamic shapes; reduce-overhead, whose CUDA graphs have a pool of their
# own), dumped at the end; then batch 1's jobs at the edge
# (1.04-1.05 × the peak allocated of their batch-1 calibration).
source "$(dirname "$0")/lib.sh"
field_begin field2
calibrate cdyn_cal llama_loop.py --compile dynamic --layers 6 --steps 10 --dump-end
calibrate cro_cal llama_loop.py --compile reduce-overhead --layers 6 --steps 10 --fixed-len 1024 --batch 8 --dump-end
record hft_edge 25.264 hf_trainer.py
record ec_edge 16.401 llama_loop.py --empty-cache-every 3
record rn_edge 17.174 tv_resnet.py --steps 16
field_end field2
