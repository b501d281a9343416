#!/usr/bin/env bash
# Field batch 15 (issue #15, fourteenth session): transformer settings no rule was written on: HF Trainer
# (Qwen2) with checkpointing at 1024 tokens and history from step 4, a smaller seq2seq, a BERT-base-sized
# MLM, and the compiled Llama loop at hidden 2048.
source "$(dirname "$0")/lib.sh"
field_begin field15
edge_and_lo hfq hf_trainer.py --ckpt --batch 12 --max-len 1024 --eval-batch 24 --history-from-step 4
edge_and_lo s2m hf_seq2seq.py --d-model 768 --layers 8 --batch 32 --eval-batch 48
edge_and_lo bml bert_mlm.py --hidden 768 --layers 12 --batch 64
edge_and_lo cmp2 llama_loop.py --compile default --hidden 2048 --layers 8 --steps 10
field_end field15
