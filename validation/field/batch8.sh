#!/usr/bin/env bash
# Field batch 8 (issue #15): the "lo" budgets (about 0.9 x the calibration's peak allocated, from the calibration
# figures the earlier batches kept in tests/data/field/*/truth.json, so no calibration run is needed) of jobs
# whose edge was recorded before, and BERT MLM with history from its first step.
source "$(dirname "$0")/lib.sh"
field_begin field8
record mlm0_lo 18.53 bert_mlm.py --steps 16 --history-from-step 0
record seg_lo 6.69 tv_segmentation.py --steps 8 --eval-every 3
record s2a_lo 67.34 hf_seq2seq.py --steps 12 --eval-steps 5 --optim adafactor --batch 24
record hfn_lo 28.15 hf_trainer.py --arch gpt_neox --hidden 1536 --layers 12 --ckpt --batch 16 --eval-batch 40 \
  --eval-steps 4 --steps 10 --history-from-step 3
record fs2_lo 20.85 fsdp2_llama.py --hidden 1536 --layers 16 --batch 6 --ga 1 --steps 8 --history-from-step 3 --seed 5
record ring_lo 14.78 llama_loop.py --hidden 2048 --layers 10 --steps 8 --max-entries 6000
record acc_lo 28.2 accelerate_llama.py --steps 16
record cmp_lo 5.86 llama_loop.py --compile default --layers 6 --steps 8
field_end field8
