#!/usr/bin/env bash
# Field batch 4 (issues #14, #15): code paths the first three batches did not record. FSDP2 and the HF
# Trainer (GPT-NeoX, gradient checkpointing, eval) with history from mid-run, a Llama loop whose history is a
# small ring (max_entries 6000: about one step), torch.compile in default mode, the PyTorch nn.Transformer
# tutorial dumped by the OOM observer, torchvision segmentation (DeepLabV3, varying image sizes, eval).
# Budgets: "edge" 1.03 × the calibration's peak allocated, at most midway to its peak reserved; "lo" 0.9 ×.
source "$(dirname "$0")/lib.sh"
field_begin field4
FS2=(fsdp2_llama.py --hidden 1536 --layers 16 --batch 6 --ga 1 --steps 8 --history-from-step 3 --seed 5)
RING=(llama_loop.py --hidden 2048 --layers 10 --steps 8 --max-entries 6000)
HFN=(hf_trainer.py --arch gpt_neox --hidden 1536 --layers 12 --ckpt --batch 16 --eval-batch 40 --eval-steps 4
     --steps 10 --history-from-step 3)
CMP=(llama_loop.py --compile default --layers 6 --steps 8)
TUT=(tutorial_transformer.py --steps 10 --eval-every 4)
SEG=(tv_segmentation.py --steps 8 --eval-every 3)
calibrate fs2_cal "${FS2[@]}"
record fs2_edge "$(budget fs2_cal edge 1.03)" "${FS2[@]}"
calibrate ring_cal "${RING[@]}"
record ring_edge "$(budget ring_cal edge 1.03)" "${RING[@]}"
calibrate hfn_cal "${HFN[@]}"
record hfn_edge "$(budget hfn_cal edge 1.03)" "${HFN[@]}"
calibrate cmp_cal "${CMP[@]}"
record cmp_edge "$(budget cmp_cal edge 1.03)" "${CMP[@]}"
calibrate tut_cal "${TUT[@]}"
record tut_edge "$(budget tut_cal edge 1.03)" "${TUT[@]}"
record tut_lo "$(budget tut_cal max_memory_allocated 0.9)" "${TUT[@]}"
calibrate seg_cal "${SEG[@]}"
record seg_edge "$(budget seg_cal edge 1.03)" "${SEG[@]}"
record hfn_lo "$(budget hfn_cal max_memory_allocated 0.9)" "${HFN[@]}"
record fs2_lo "$(budget fs2_cal max_memory_allocated 0.9)" "${FS2[@]}"
field_end field4
