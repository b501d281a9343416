#!/usr/bin/env bash
# Field batch 73 (issue #15): prepared in the thirty-first session, not run yet (the session's device minutes went to
# the jobs' trial runs). Run it with batch 74, one device call each (FIELD_SECONDS=560 JOB_TIMEOUT=120), and write the
# predictions (predictions-batch73-74.md) before opening the labels. Kinds the field set lacks: torchvision's
# classification recipe with SWA (AveragedModel, SWALR, then update_bn's fp32 train-mode pass at a larger batch after
# the last epoch, and an eval; dump by the OOM observer; without a budget, with the eval at 1,536 and update_bn at
# 1,024: 16.24 GiB allocated at the peak, in the final eval, about 25 s; the training steps, all of one crop size, peak
# at 11.1 GiB, so the budgets fail after them), ANCE-style dense retrieval whose hard negatives are refreshed every 4
# steps by encoding 100,000 passages under no_grad (history from step 2, dump in the except handler; measured in parts:
# a refresh peaks near 26 GB allocated, 38 GB reserved, a training step at 15.4 GB), and a first-step OOM in a larger
# model (llama_loop.py with a 2B-parameter HF Llama in fp32 and AdamW at one sequence of 512 tokens: the optimizer's
# first step makes its state; history from the start).
source "$(dirname "$0")/lib.sh"
field_begin field73
edge_and_lo swa swa_resnet.py --eval-batch 1536 --bn-batch 1024
edge_and_lo hnr hard_negative_refresh.py
edge_and_lo lfs llama_loop.py --hidden 3072 --layers 16 --batch 1 --steps 3 --fixed-len 512
field_end field73
