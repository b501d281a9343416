"""Masked-autoencoder pretraining of a ViT with the HF Trainer, as transformers' run_mae.py example runs it
(ViTMAEForPreTraining, random init: no download; random images).

75% of the patches masked at random per image (a fixed count: fixed shapes), the encoder on the rest and the
decoder on all, the loss on the masked patches' pixels. As run_mae.py: remove_unused_columns=False and
label_names=["pixel_values"], so that the Trainer computes the eval loss; base learning rate scaled by the
batch over 256, cosine schedule, weight decay 0.05, bf16. History from the start; the snapshot is dumped by the
OOM observer.
"""
import argparse
import torch
from transformers import Trainer, TrainingArguments, ViTMAEConfig, ViTMAEForPreTraining

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--image-size", type=int, default=224)
p.add_argument("--batch", type=int, default=256)
p.add_argument("--eval-batch", type=int, default=512)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class RandomImages(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        return {"pixel_values": torch.randn(3, args.image_size, args.image_size, generator=g)}


def collate(rows):
    return {"pixel_values": torch.stack([r["pixel_values"] for r in rows])}


model = ViTMAEForPreTraining(ViTMAEConfig(
    hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
    intermediate_size=4 * args.hidden, image_size=args.image_size, patch_size=16, decoder_hidden_size=512,
    decoder_num_hidden_layers=8, decoder_num_attention_heads=16, decoder_intermediate_size=2048, mask_ratio=0.75,
    norm_pix_loss=True))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
targs = TrainingArguments(output_dir="mae_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, remove_unused_columns=False, label_names=["pixel_values"],
                          learning_rate=1.5e-4 * args.batch / 256, lr_scheduler_type="cosine", weight_decay=0.05,
                          warmup_steps=2, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=RandomImages(args.steps * args.batch, 1),
                  eval_dataset=RandomImages(2 * args.eval_batch, 2), data_collator=collate)
trainer.train()
