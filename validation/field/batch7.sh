#!/usr/bin/env bash
# Field batch 7 (issue #15): BERT masked-LM pretraining in HF's run_mlm_no_trainer style (Accelerate, bf16,
# gradient accumulation, dynamic padding, history from mid-run; except handler), and the Seq2SeqTrainer
# with Adafactor, at the edge.
source "$(dirname "$0")/lib.sh"
field_begin field7
MLM=(bert_mlm.py --steps 16)
S2A=(hf_seq2seq.py --steps 12 --eval-steps 5 --optim adafactor --batch 24)
calibrate mlm_cal "${MLM[@]}"
record mlm_edge "$(budget mlm_cal edge 1.03)" "${MLM[@]}"
calibrate s2a_cal "${S2A[@]}"
record s2a_edge "$(budget s2a_cal edge 1.03)" "${S2A[@]}"
record mlm_lo "$(budget mlm_cal max_memory_allocated 0.9)" "${MLM[@]}"
record s2a_mid "$(budget s2a_cal mid 1)" "${S2A[@]}"
# batch 6's s2s_edge (55.10 GiB) completed: the same job at 1.005 x its calibration's peak allocated (53.495 GiB)
record s2s_e1005 53.76 hf_seq2seq.py --steps 12 --eval-steps 5
field_end field7
