#!/usr/bin/env bash
# Field batch 55 (issue #15, twenty-fifth session): NeRF with coarse and fine networks and importance sampling (the
# same number of rays every step; OOM observer); the seq2seq-with-attention tutorial on batches (packed GRU encoder,
# a decoder unrolled with teacher forcing, sentences of random length; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field55
edge_and_lo nerf nerf_rays.py --rays 8192 --coarse 64 --fine 128 --steps 12
edge_and_lo gmt gru_attention_mt.py --batch 128 --hidden 1024 --steps 12
field_end field55
