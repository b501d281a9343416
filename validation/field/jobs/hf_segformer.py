"""Semantic segmentation with the HF Trainer, as transformers' run_semantic_segmentation.py runs it:
SegformerForSemanticSegmentation (random init: no download; MiT-b2 sizes), 150 classes as ADE20k, random crops of
--image-size, the label's ignore index 255 at the borders, eval every --eval-steps (the Trainer gathers the logits of
every eval batch on the GPU, as the script's compute_metrics expects), bf16. Random images and masks.
History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch
from transformers import SegformerConfig, SegformerForSemanticSegmentation, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--image-size", type=int, default=512)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=32)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--eval-images", type=int, default=64)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class RandomScenes(torch.utils.data.Dataset):
    """An image and its mask, as the script's train transforms leave them: a crop, ignore index at the edges."""

    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 100003 + i)
        s = args.image_size
        labels = torch.randint(0, 150, (s, s), generator=g)
        border = random.Random(self.seed * 7 + i).randrange(0, s // 8)
        if border:
            labels[:border], labels[-border:] = 255, 255
        return {"pixel_values": torch.randn(3, s, s, generator=g), "labels": labels}


config = SegformerConfig(num_labels=150, hidden_sizes=[64, 128, 320, 512], depths=[3, 4, 6, 3],
                         decoder_hidden_size=768, semantic_loss_ignore_index=255)
model = SegformerForSemanticSegmentation(config)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
targs = TrainingArguments(output_dir="seg_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=4, learning_rate=6e-5, dataloader_num_workers=0, seed=0,
                          remove_unused_columns=False)
trainer = Trainer(model=model, args=targs, train_dataset=RandomScenes(args.steps * args.batch, 1),
                  eval_dataset=RandomScenes(args.eval_images, 2))
trainer.train()
