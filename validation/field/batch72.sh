#!/usr/bin/env bash
# Field batch 72 (issue #15, thirtieth session): run with batch 71 in the same session (predictions in
# predictions-batch71-72.md, committed before the labels were opened). Three kinds of job the field set lacks:
# full-batch L-BFGS as PyTorch's torch.optim docs show it (optimizer.step(closure); the MNIST example's Net with fc1
# widened to 18.9M parameters; LBFGS's history of up to 100 (y, s) pairs of the flattened parameters' size grows on the
# GPU step by step, 15 GB when full; history from the start), nanoGPT with its activations offloaded to pinned host
# memory by torch.autograd.graph.save_on_cpu around the whole forward (bf16, foreach AdamW, accumulation 2, a random
# length between 512 and 1,024 each step; history from the start, a ring of 200,000), and a text-to-image
# latent-diffusion UNet trained as diffusers' train_text_to_image.py does it, written by hand (cross-attention to a
# frozen CLIP text encoder, fp16 with a GradScaler, min-SNR weighting, an EMA copy on the GPU, gradient checkpointing;
# history turned on after the first step).
source "$(dirname "$0")/lib.sh"
field_begin field72
edge_and_lo lbfgs lbfgs_cnn.py --width 2048 --samples 8192 --steps 30 --max-iter 4
edge_and_lo soc save_on_cpu_gpt.py --n-layer 12 --n-embd 2048 --batch 8 --ga 2 --steps 8
edge_and_lo ldm latent_diffusion_unet.py --base-channels 192 --batch 16 --steps 12
field_end field72
