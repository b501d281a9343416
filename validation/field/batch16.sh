#!/usr/bin/env bash
# Field batch 16 (issue #15, fourteenth session): what batch 15 had no time for (the compiled Llama loop at
# hidden 2048), the nn.Transformer tutorial at d_model 768 with 10 layers, and HF Trainer (Pythia) without
# checkpointing at 1024 tokens.
source "$(dirname "$0")/lib.sh"
field_begin field16
edge_and_lo cmp2 llama_loop.py --compile default --hidden 2048 --layers 8 --steps 10
edge_and_lo tut3 tutorial_transformer.py --d-model 768 --nlayers 10 --batch 64 --bptt 256
edge_and_lo hfp hf_trainer.py --arch gpt_neox --batch 16 --max-len 1024 --eval-batch 32
field_end field16
