#!/usr/bin/env bash
# Field batch 50 (issue #15, twenty-fourth session): T5 translation under the Seq2SeqTrainer evaluated by beam search
# (predict_with_generate: the eval batch runs generate; except handler); a VQGAN-style autoencoder whose PatchGAN
# discriminator joins at step 6, with the adaptive GAN weight from torch.autograd.grad(retain_graph=True) (OOM
# observer).
source "$(dirname "$0")/lib.sh"
field_begin field50
edge_and_lo t5g hf_t5_generate_eval.py --d-model 768 --layers 12 --batch 16 --eval-batch 64 --steps 10
edge_and_lo vq vqgan_disc.py --ch 128 --batch 8 --size 256 --steps 12
field_end field50
